package meta

import (
	"fmt"

	"github.com/gobilevel/bilevel/models"
)

// Evaluator measures a fixed backbone: it fits a head on each task's
// support set by Steps steps of gradient descent of size Alpha on g (the
// support cross-entropy plus CNN.Lambda's penalty) from zero, and scores
// it on the query set. It gives the reference baselines, a head on a
// random or on a pre-trained backbone. Zero values mean the defaults.
type Evaluator struct {
	// CNN is the backbone's settings, as given to models.CNN.
	CNN models.CNNSettings
	// Ways is the number of classes of a task.
	Ways int
	// Steps (default 100) and Alpha (default 0.1) are the head's inner
	// loop.
	Steps int
	Alpha float64
	// Workers is the number of tasks evaluated in parallel (default
	// GOMAXPROCS).
	Workers int

	ws []*worker
}

// Evaluate returns the query accuracy of heads fit on the tasks first, …,
// first+n−1 of src with the backbone phi (models.CNN's outer vector).
func (e *Evaluator) Evaluate(phi []float64, src *Tasks, first, n int) (Accuracy, error) {
	steps, alpha := e.Steps, e.Alpha
	if steps == 0 {
		steps = 100
	}
	if alpha == 0 {
		alpha = 0.1
	}
	feats, err := models.CNNFeatures(e.CNN)
	if err != nil {
		return Accuracy{}, err
	}
	if e.ws == nil {
		e.ws = newWorkers(e.Workers, e.CNN, e.Ways)
	}
	return evaluate(e.ws, feats, e.Ways, e.CNN.NoBias, phi, nil, steps, alpha, src, first, n)
}

// evaluate fits and scores heads on tasks first, …, first+n−1 of src, in
// parallel on the workers, from head0 (nil: zero).
func evaluate(ws []*worker, features, ways int, noBias bool, phi, head0 []float64, steps int, alpha float64, src *Tasks, first, n int) (Accuracy, error) {
	if n < 1 {
		return Accuracy{}, fmt.Errorf("meta: evaluation on %d tasks", n)
	}
	if src.Ways != ways {
		return Accuracy{}, fmt.Errorf("meta: evaluation on %d-way tasks of a %d-way model", src.Ways, ways)
	}
	acc, loss := make([]float64, n), make([]float64, n)
	err := parallel(ws, n, func(w *worker, i int) error {
		t, err := src.Task(first+i, &w.task)
		if err != nil {
			return err
		}
		tp, err := w.problems(len(t.SupportY), len(t.QueryY), false)
		if err != nil {
			return err
		}
		if len(phi) != tp.ps.p.DimX() {
			return fmt.Errorf("meta: backbone of %d values; the model has %d", len(phi), tp.ps.p.DimX())
		}
		nsF := tp.ns * features
		if err := tp.ps.features(tp.feats[:nsF], phi, t.SupportX); err != nil {
			return err
		}
		if err := tp.pq.features(tp.feats[nsF:], phi, t.QueryX); err != nil {
			return err
		}
		if err := tp.setLabels(t.SupportY, t.QueryY); err != nil {
			return err
		}
		y0 := head0
		if y0 == nil {
			w.dy0 = grow(w.dy0, tp.head.DimY())
			clear(w.dy0)
			y0 = w.dy0
		}
		y, err := w.descend(fixedOracles{tp.head.FixX(tp.feats, nil, nil)}, y0, steps, alpha)
		if err != nil {
			return fmt.Errorf("meta: evaluation task %d: %w", first+i, err)
		}
		acc[i], loss[i] = scoreHead(tp.feats[nsF:], t.QueryY, y, features, ways, noBias)
		return nil
	})
	if err != nil {
		return Accuracy{}, err
	}
	return summarize(acc, loss), nil
}
