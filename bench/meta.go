package bench

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

// MetaSpec is the meta-learning row: one outer step of meta.Learner on
// Tasks tasks of Ways-way Shots-shot classification with Queries queries
// per class, Steps head steps of size MetaAlpha, on Side×Side images, with
// models.CNN's default backbone (4 blocks of 32 3×3 filters, batch
// normalization with ε = 1e-5, ReLU, 2×2 max pooling) and head penalty
// (λ/2)‖w‖², λ = Lambda. Every setting is given explicitly, so that a change
// of a default in models or meta does not silently change the benchmark
// (torch_ref.py's META holds the same values).
var MetaSpec = struct {
	Tasks, Ways, Shots, Queries, Side, Steps, CGSteps int
	Alpha, Lambda, Eps, LR                            float64
}{Tasks: 4, Ways: 5, Shots: 5, Queries: 15, Side: 28, Steps: 10, CGSteps: 10, Alpha: 0.1, Lambda: 0.1, Eps: 1e-5, LR: 1e-3}

// MetaTasks returns the tasks: task k's support and query images are
// uniforms in [0, 1) of streams 300 + 10k + 1 and 300 + 10k + 2, the
// labels class by class (sample i of the support set has label i / Shots).
func MetaTasks() []*data.Task {
	s := MetaSpec
	d := s.Side * s.Side
	var ts []*data.Task
	for k := 0; k < s.Tasks; k++ {
		t := &data.Task{Ways: s.Ways, Shots: s.Shots, Queries: s.Queries, D: d,
			SupportX: Uniforms(uint64(300+10*k+1), s.Ways*s.Shots*d),
			QueryX:   Uniforms(uint64(300+10*k+2), s.Ways*s.Queries*d)}
		for c := 0; c < s.Ways; c++ {
			t.Classes = append(t.Classes, c)
			for range s.Shots {
				t.SupportY = append(t.SupportY, c)
			}
			for range s.Queries {
				t.QueryY = append(t.QueryY, c)
			}
		}
		ts = append(ts, t)
	}
	return ts
}

// MetaParams returns the backbone φ in models.CNN's layout: per block, the
// filters (stream 400 + block, uniform with variance 2/fan-in), γ = 1 and
// β = 0.
func MetaParams() []float64 {
	var phi []float64
	in := 1
	for k := 0; k < 4; k++ {
		fan := 9 * in
		phi = append(phi, Symmetric(uint64(400+k), 32*fan, math.Sqrt(3)*math.Sqrt(2/float64(fan)))...)
		for range 32 {
			phi = append(phi, 1)
		}
		phi = append(phi, make([]float64, 32)...)
		in = 32
	}
	return phi
}

// NewMetaLearner returns a learner of method at MetaParams, computing in
// float32 (meta.Settings.Float32) when f32 is set.
func NewMetaLearner(method meta.Gradient, f32 bool) (*meta.Learner, error) {
	s := MetaSpec
	l, err := meta.NewLearner(meta.Settings{Gradient: method, Steps: s.Steps, Alpha: s.Alpha, CGSteps: s.CGSteps, TaskBatch: s.Tasks,
		Outer: optim.Adam{LR: s.LR}, Float32: f32},
		models.CNNSettings{Side: s.Side, Blocks: 4, Filters: 32, Lambda: s.Lambda, Eps: s.Eps}, s.Ways)
	if err != nil {
		return nil, err
	}
	st := l.Snapshot()
	phi := MetaParams()
	if len(st.Params) != len(phi) {
		return nil, fmt.Errorf("bench: meta.Learner has %d parameters, MetaParams %d", len(st.Params), len(phi))
	}
	st.Params = phi
	if err := l.Restore(st); err != nil {
		return nil, err
	}
	return l, nil
}

// metaMethods are the methods of the meta-learning rows.
var metaMethods = []struct {
	name   string
	method meta.Gradient
}{{"itd-bio", meta.ITD}, {"aid-bio", meta.AID}}

// MetaCases returns the meta-learning rows: one Learner.Step (meta-gradient
// over the tasks and an Adam step) by ITD-BiO and by AID-BiO, in float64
// and in float32. A learner's first step compiles its programs (the
// warm-up call of BenchmarkRows).
func MetaCases() ([]Case, error) {
	tasks := MetaTasks()
	var cs []Case
	for _, prec := range []string{"f64", "f32"} {
		for _, m := range metaMethods {
			l, err := NewMetaLearner(m.method, prec == "f32")
			if err != nil {
				return nil, err
			}
			cs = append(cs, Case{Name: "meta/" + prec + "/" + m.name, Op: func() error {
				_, err := l.Step(tasks)
				return err
			}})
		}
	}
	return cs, nil
}

// MetaResults returns the meta-gradients at MetaParams (before any Adam
// step), itd-bio and aid-bio, and in float32 f32-itd-bio and f32-aid-bio,
// for the cross-check.
func MetaResults() (map[string][]float64, error) {
	tasks := MetaTasks()
	r := map[string][]float64{}
	for _, prec := range []string{"", "f32-"} {
		for _, m := range metaMethods {
			l, err := NewMetaLearner(m.method, prec != "")
			if err != nil {
				return nil, err
			}
			g := make([]float64, l.DimX())
			if _, err := l.MetaGradient(g, tasks); err != nil {
				return nil, err
			}
			r[prec+m.name] = g
		}
	}
	return r, nil
}
