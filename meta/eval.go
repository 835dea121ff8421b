package meta

import (
	"fmt"

	"github.com/gobilevel/bilevel/data"
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
		e.ws = newWorkers(e.Workers, e.CNN, e.Ways, false)
	}
	return evaluate(e.ws, e.Ways, src, first, n, func(w *worker, t *data.Task) (float64, float64, error) {
		return fitHead(w, t, feats, e.Ways, e.CNN.NoBias, phi, nil, steps, alpha)
	})
}

// evaluate adapts to tasks first, …, first+n−1 of src and scores the
// adapted models on their query sets, in parallel on the workers: adapt
// returns a task's query accuracy and loss.
func evaluate(ws []*worker, ways int, src *Tasks, first, n int, adapt func(w *worker, t *data.Task) (acc, loss float64, err error)) (Accuracy, error) {
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
		if acc[i], loss[i], err = adapt(w, t); err != nil {
			return fmt.Errorf("meta: evaluation task %d: %w", first+i, err)
		}
		return nil
	})
	if err != nil {
		return Accuracy{}, err
	}
	return summarize(acc, loss), nil
}

// fitHead fits a head on the task's support features by steps steps of
// size alpha from head0 (nil: zero) with the backbone phi, and returns its
// query accuracy and loss.
func fitHead(w *worker, t *data.Task, features, ways int, noBias bool, phi, head0 []float64, steps int, alpha float64) (acc, loss float64, err error) {
	tp, err := w.problems(len(t.SupportY), len(t.QueryY), needHead)
	if err != nil {
		return 0, 0, err
	}
	if len(phi) != tp.ps.p.DimX() {
		return 0, 0, fmt.Errorf("meta: backbone of %d values; the model has %d", len(phi), tp.ps.p.DimX())
	}
	nsF := tp.ns * features
	if err := tp.ps.features(tp.feats[:nsF], phi, t.SupportX); err != nil {
		return 0, 0, err
	}
	if err := tp.pq.features(tp.feats[nsF:], phi, t.QueryX); err != nil {
		return 0, 0, err
	}
	if err := tp.setLabels(t.SupportY, t.QueryY); err != nil {
		return 0, 0, err
	}
	y0 := head0
	if y0 == nil {
		w.dy0 = grow(w.dy0, tp.head.DimY())
		clear(w.dy0)
		y0 = w.dy0
	}
	y, err := w.descend(fixedOracles{tp.head.FixX(tp.feats, nil, nil)}, y0, steps, alpha)
	if err != nil {
		return 0, 0, err
	}
	acc, loss = scoreHead(tp.feats[nsF:], t.QueryY, y, features, ways, noBias)
	return acc, loss, nil
}
