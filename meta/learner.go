package meta

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	G "gorgonia.org/gorgonia"
)

// Gradient selects how the meta-gradient is computed.
type Gradient int

const (
	ITD  Gradient = iota // ITD-BiO: the reverse sweep through the T inner steps
	AID                  // AID-BiO: CG on the head's Hessian at y_D, one mixed product
	ANIL                 // ANIL: learned head initialization, inner loss without penalty
	MAML                 // MAML: learned initialization of the whole network, adapted by the inner steps
)

var gradientNames = []string{"itd", "aid", "anil", "maml"}

// learnsInit reports whether the method learns an initialization of the
// adapted parameters (the head for ANIL, the whole network for MAML) as
// well as φ.
func (g Gradient) learnsInit() bool { return g == ANIL || g == MAML }

func (g Gradient) String() string {
	if g >= 0 && int(g) < len(gradientNames) {
		return gradientNames[g]
	}
	return fmt.Sprintf("Gradient(%d)", int(g))
}

// ParseGradient returns the meta-gradient named s (itd, aid, anil or
// maml).
func ParseGradient(s string) (Gradient, error) {
	for i, n := range gradientNames {
		if strings.EqualFold(s, n) {
			return Gradient(i), nil
		}
	}
	return 0, fmt.Errorf("meta: unknown meta-gradient %q (want itd, aid, anil or maml)", s)
}

// Backprop selects how derivatives through the backbone are computed; see
// the package comment. Both give the same meta-gradient.
type Backprop int

const (
	// Features runs the sweeps on the head with the features as outer
	// variable, then pulls the features' adjoint back through the backbone
	// once per image set.
	Features Backprop = iota
	// Direct evaluates models.CNN's oracles at a fixed φ: each mixed
	// product ∇φ∇w g·v back-propagates through the whole backbone.
	Direct
)

// Settings configures a Learner. Zero values mean the defaults.
type Settings struct {
	// Gradient is the meta-gradient (default ITD).
	Gradient Gradient
	// Steps is the number of inner gradient steps: T for ITD, ANIL and
	// MAML, D for AID (default 10; ANIL 5 and MAML 3, the settings of
	// paper 003, App. A).
	Steps int
	// Growth, when positive, makes AID's inner steps increase with the
	// meta-iteration k as D_k = ⌈Growth·(k+1)^{1/4}⌉ (AID-BiO-increasing);
	// Steps is then ignored.
	Growth float64
	// Alpha is the inner step size α (default 0.1).
	Alpha float64
	// CGSteps is AID's number N of CG steps (default 10); CG stops earlier
	// once its relative residual falls below 1e-10.
	CGSteps int
	// FirstOrder makes ANIL or MAML first-order (default: full, through
	// the steps); first-order MAML is FOMAML.
	FirstOrder bool
	// TaskBatch is the number of tasks per meta-iteration (default 4).
	TaskBatch int
	// Outer is the outer optimizer, Adam (its zero value: LR 1e-3).
	Outer optim.Adam
	// Workers is the number of tasks processed in parallel (default
	// GOMAXPROCS); each worker compiles its own problems.
	Workers int
	// Backprop selects the computation through the backbone (default
	// Features). MAML ignores it: its inner steps change the backbone, so
	// every derivative runs through the whole network.
	Backprop Backprop
	// EvalSteps is the number of inner steps used to fit a head at
	// evaluation (default: the training steps of the current iteration).
	EvalSteps int
	// Runner, when not nil, computes the tasks' meta-gradients instead of
	// the Workers goroutines (dist.MetaTasks: on worker processes); the
	// result is the same, bit for bit. Evaluation stays in process.
	Runner TaskRunner
	// Float32 computes the tasks' oracles in float32
	// (graph.Objective.Float32): the backbone's features, the head's inner
	// loop and the meta-gradient through them, with the images held in
	// float32; the parameters, the inner iterates, the sweep's adjoints
	// and CG's vectors stay float64. The meta-gradient is then the
	// float64 one up to float32 rounding grown through the inner loop
	// (TestFloat32Step: within 3e-7 relative), more for AID when CG is
	// stopped in the middle of its convergence, which amplifies the
	// rounding of its products (7e-4 measured).
	Float32 bool
}

func (s Settings) withDefaults() (Settings, error) {
	if s.Steps == 0 {
		s.Steps = map[Gradient]int{ANIL: 5, MAML: 3}[s.Gradient]
		if s.Steps == 0 {
			s.Steps = 10
		}
	}
	if s.Alpha == 0 {
		s.Alpha = 0.1
	}
	if s.CGSteps == 0 {
		s.CGSteps = 10
	}
	if s.TaskBatch == 0 {
		s.TaskBatch = 4
	}
	switch {
	case s.Gradient < ITD || s.Gradient > MAML:
		return s, fmt.Errorf("meta: unknown Gradient %d", int(s.Gradient))
	case s.Steps < 0:
		return s, fmt.Errorf("meta: Steps = %d; want ≥ 0 inner steps", s.Steps)
	case s.Growth < 0 || math.IsNaN(s.Growth) || math.IsInf(s.Growth, 1):
		return s, fmt.Errorf("meta: Growth = %v; want c ≥ 0 (0: constant steps)", s.Growth)
	case s.Growth > 0 && s.Gradient != AID:
		return s, fmt.Errorf("meta: Growth is for AID; %v runs a constant number of steps", s.Gradient)
	case !(s.Alpha > 0) || math.IsInf(s.Alpha, 1):
		return s, fmt.Errorf("meta: Alpha = %v; want a finite inner step size > 0", s.Alpha)
	case s.CGSteps < 1:
		return s, fmt.Errorf("meta: CGSteps = %d; want at least one", s.CGSteps)
	case s.FirstOrder && !s.Gradient.learnsInit():
		return s, fmt.Errorf("meta: FirstOrder is for ANIL and MAML")
	case s.TaskBatch < 1:
		return s, fmt.Errorf("meta: TaskBatch = %d; want at least one task", s.TaskBatch)
	case s.Backprop != Features && s.Backprop != Direct:
		return s, fmt.Errorf("meta: unknown Backprop %d", int(s.Backprop))
	case s.EvalSteps < 0:
		return s, fmt.Errorf("meta: EvalSteps = %d; want ≥ 0 (0: the training steps)", s.EvalSteps)
	}
	if s.Growth > 0 {
		if _, err := optim.IncreasingSteps(s.Growth, 0); err != nil {
			return s, fmt.Errorf("meta: Growth = %v: %w", s.Growth, err)
		}
	}
	if err := s.Outer.Validate(); err != nil {
		return s, fmt.Errorf("meta: %w", err)
	}
	return s, nil
}

// ErrNonFinite reports a NaN or infinity in a meta-gradient or a
// pretraining gradient: the inner step size is too large for g, or the
// outer iteration diverged. (A non-finite inner iterate is the inner
// loop's *unroll.NonFiniteError.)
var ErrNonFinite = errors.New("meta: non-finite meta-gradient (step size too large?)")

// Snapshot is the part of a Learner or Pretrainer that training changes:
// the number of iterations done, the parameters and the outer optimizer's
// memory. It is what a checkpoint must hold, with the task source's seed.
type Snapshot struct {
	Iter   int
	Params []float64
	Opt    optim.OptState
}

func (s Snapshot) clone() Snapshot {
	var c Snapshot
	c.Iter = s.Iter
	c.Params = append([]float64(nil), s.Params...)
	c.Opt.T = s.Opt.T
	if s.Opt.M != nil {
		c.Opt.M = append([]float64(nil), s.Opt.M...)
	}
	if s.Opt.S != nil {
		c.Opt.S = append([]float64(nil), s.Opt.S...)
	}
	return c
}

// Learner meta-trains the backbone of models.CNN on ways-way tasks with a
// fixed number of support and query images. Its parameters are φ (the
// outer vector of models.CNN) followed, for ANIL and MAML, by the head
// initialization w_0 (models.CNN's inner layout): for MAML, the two are
// θ_0, the initialization of the whole network (models.CNNInit's x).
type Learner struct {
	s          Settings
	cnn        models.CNNSettings
	ways       int
	dimX, dimY int
	features   int
	st         Snapshot
	workers    []*worker
	grads      [][]float64
}

// StepStats reports one meta-iteration.
type StepStats struct {
	// Iter is the iteration's index k (from 0), InnerSteps its T or D_k.
	Iter, InnerSteps int
	// Loss and Accuracy are the query cross-entropy and accuracy of the
	// adapted heads, averaged over the batch's tasks.
	Loss, Accuracy float64
	// GradNorm is ‖meta-gradient‖₂.
	GradNorm float64
	// InnerRatio is, for ITD, AID and ANIL, the largest over the batch's
	// tasks of ‖∇y g(y_T)‖ / ‖∇y g(y_0)‖, the head's inner gradient after
	// the inner loop against before it: well below 1 when the loop
	// converges, 1 or more when the inner step is too large for the
	// head's curvature. AID-BiO's hypergradient assumes y_D ≈ y* (the
	// distance is at most ‖∇y g(y_D)‖/λ), so a large ratio means its
	// meta-gradient is off. 0 for MAML and FOMAML.
	InnerRatio float64
	// CGResidual is, for AID-BiO, the largest over the tasks of CG's
	// relative residual ‖∇y f − ∇yy g·v‖ / ‖∇y f‖ after its N steps (0 for
	// the other methods).
	CGResidual float64
	// Seconds is the wall time of the iteration.
	Seconds float64
}

// NewLearner returns a learner at the initial backbone of cnn (and, for
// ANIL and MAML, w_0 = 0). The inner loss of ANIL and MAML is the support
// cross-entropy alone: cnn.Lambda is replaced by λ = 0 for them.
func NewLearner(s Settings, cnn models.CNNSettings, ways int) (*Learner, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	if s.Gradient.learnsInit() {
		cnn.Lambda = -1
	}
	feats, err := models.CNNFeatures(cnn)
	if err != nil {
		return nil, err
	}
	if ways < 2 {
		return nil, fmt.Errorf("meta: %d ways; want at least 2", ways)
	}
	pr, err := newProbe(1, cnn, false)
	if err != nil {
		return nil, err
	}
	l := &Learner{s: s, cnn: cnn, ways: ways, features: feats, dimX: pr.p.DimX(), dimY: feats * ways}
	if !cnn.NoBias {
		l.dimY += ways
	}
	n := l.dimX
	if s.Gradient.learnsInit() {
		n += l.dimY
	}
	l.st.Params = make([]float64, n)
	pr.p.X0(l.st.Params[:l.dimX])
	l.workers = newWorkers(s.Workers, cnn, ways, s.Float32)
	for _, w := range l.workers {
		w.cg = implicit.CG{Tol: 1e-10, MaxIter: s.CGSteps}
	}
	return l, nil
}

// Settings returns the settings with the defaults filled in.
func (l *Learner) Settings() Settings { return l.s }

// DimX returns the length of φ; Params has DimX values, then, for ANIL and
// MAML, as many more as a head (W, then b) has: its initialization.
func (l *Learner) DimX() int { return l.dimX }

// Snapshot returns a copy of the learner's state.
func (l *Learner) Snapshot() Snapshot { return l.st.clone() }

// Restore restores a state saved by Snapshot (from a checkpoint, say).
func (l *Learner) Restore(st Snapshot) error {
	if len(st.Params) != len(l.st.Params) {
		return fmt.Errorf("meta: state with %d parameters for a %v learner with %d", len(st.Params), l.s.Gradient, len(l.st.Params))
	}
	for _, v := range [][]float64{st.Opt.M, st.Opt.S} {
		if v != nil && len(v) != len(st.Params) {
			return fmt.Errorf("meta: optimizer state of length %d for %d parameters", len(v), len(st.Params))
		}
	}
	if st.Iter < 0 {
		return fmt.Errorf("meta: state at iteration %d", st.Iter)
	}
	l.st = st.clone()
	return nil
}

// Backbone returns φ; it aliases the learner's parameters.
func (l *Learner) Backbone() []float64 { return l.st.Params[:l.dimX] }

// head0 returns the w_0 of ANIL and MAML, or nil (zero) for the other
// methods.
func (l *Learner) head0() []float64 {
	if l.s.Gradient.learnsInit() {
		return l.st.Params[l.dimX:]
	}
	return nil
}

// InnerSteps returns the number of inner steps at meta-iteration k: T, D,
// or D_k = ⌈c(k+1)^{1/4}⌉ for AID with Growth c (optim.IncreasingSteps,
// an error beyond optim.MaxInnerSteps).
func (l *Learner) InnerSteps(k int) (int, error) {
	if l.s.Growth > 0 {
		return optim.IncreasingSteps(l.s.Growth, k)
	}
	return l.s.Steps, nil
}

// Step runs one meta-iteration on a batch of tasks (TaskBatch of them, or
// any non-empty batch): the meta-gradient averaged over the tasks, then an
// Adam step. On error the state is unchanged.
func (l *Learner) Step(tasks []*data.Task) (StepStats, error) {
	start := time.Now()
	grad := make([]float64, len(l.st.Params))
	st, err := l.MetaGradient(grad, tasks)
	if err != nil {
		return st, err
	}
	l.s.Outer.Step(&l.st.Opt, l.st.Params, grad)
	l.st.Iter++
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// MetaGradient writes to dst (the length of the parameters) the
// meta-gradient at the current parameters and iteration, averaged over the
// tasks, without changing the state.
func (l *Learner) MetaGradient(dst []float64, tasks []*data.Task) (StepStats, error) {
	start := time.Now()
	if len(dst) != len(l.st.Params) {
		panic(fmt.Sprintf("meta: MetaGradient destination of length %d for %d parameters", len(dst), len(l.st.Params)))
	}
	if len(tasks) == 0 {
		return StepStats{}, fmt.Errorf("meta: empty batch of tasks")
	}
	k := l.st.Iter
	steps, err := l.InnerSteps(k)
	if err != nil {
		return StepStats{Iter: k}, fmt.Errorf("meta: iteration %d: %w", k, err)
	}
	n := len(tasks)
	for len(l.grads) < n {
		l.grads = append(l.grads, nil)
	}
	stats := make([]TaskStats, n)
	if l.s.Runner != nil {
		if err = l.runTasks(stats, steps, tasks); err != nil {
			err = fmt.Errorf("meta: %v, iteration %d: %w", l.s.Gradient, k, err)
		}
	} else {
		err = parallel(l.workers, n, func(w *worker, i int) error {
			l.grads[i] = grow(l.grads[i], len(dst))
			var err error
			if stats[i], err = l.task(w, tasks[i], steps, l.grads[i]); err != nil {
				return fmt.Errorf("meta: %v, iteration %d, task %d: %w", l.s.Gradient, k, i, err)
			}
			return nil
		})
	}
	if err != nil {
		return StepStats{Iter: k, InnerSteps: steps}, err
	}
	clear(dst)
	for i := 0; i < n; i++ { // in task order, so the sum does not depend on scheduling
		for j, v := range l.grads[i] {
			dst[j] += v
		}
	}
	var norm float64
	for j := range dst {
		dst[j] /= float64(n)
		norm += dst[j] * dst[j]
	}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return StepStats{Iter: k, InnerSteps: steps}, fmt.Errorf("meta: %v, iteration %d: %w", l.s.Gradient, k, ErrNonFinite)
	}
	acc, loss := make([]float64, n), make([]float64, n)
	var inner, cg float64
	for i, ts := range stats {
		acc[i], loss[i] = ts.Accuracy, ts.Loss
		inner, cg = math.Max(inner, ts.InnerRatio), math.Max(cg, ts.CGResidual)
	}
	s := summarize(acc, loss)
	return StepStats{Iter: k, InnerSteps: steps, Loss: s.Loss, Accuracy: s.Mean, GradNorm: math.Sqrt(norm),
		InnerRatio: inner, CGResidual: cg, Seconds: time.Since(start).Seconds()}, nil
}

// checkTask validates a task against the learner's geometry.
func (l *Learner) checkTask(t *data.Task) error {
	side := l.cnn.Side
	if side == 0 {
		side = 28
	}
	switch {
	case t.Ways != l.ways:
		return fmt.Errorf("a %d-way task for a %d-way learner", t.Ways, l.ways)
	case t.D != side*side:
		return fmt.Errorf("images of %d pixels; want %d×%d", t.D, side, side)
	case len(t.SupportY) == 0 || len(t.QueryY) == 0:
		return fmt.Errorf("a task with %d support and %d query samples", len(t.SupportY), len(t.QueryY))
	}
	return nil
}

// task computes one task's meta-gradient into grad and returns its
// TaskStats.
func (l *Learner) task(w *worker, t *data.Task, steps int, grad []float64) (TaskStats, error) {
	w.inner, w.cgRel = 0, 0
	acc, loss, err := l.adapt(w, t, steps, grad)
	return TaskStats{Accuracy: acc, Loss: loss, InnerRatio: w.inner, CGResidual: w.cgRel}, err
}

// adapt computes one task's meta-gradient into grad and returns the query
// accuracy and loss of the adapted head; the worker keeps the inner
// loop's diagnostics.
func (l *Learner) adapt(w *worker, t *data.Task, steps int, grad []float64) (acc, loss float64, err error) {
	if err := l.checkTask(t); err != nil {
		return 0, 0, err
	}
	if l.s.Gradient == MAML {
		return l.adaptWhole(w, t, steps, grad)
	}
	direct := l.s.Backprop == Direct
	need := needHead
	if direct {
		need = needCNN
	}
	tp, err := w.problems(len(t.SupportY), len(t.QueryY), need)
	if err != nil {
		return 0, 0, err
	}
	phi := l.st.Params[:l.dimX]
	y0 := l.head0()
	if y0 == nil {
		w.dy0 = grow(w.dy0, l.dimY)
		clear(w.dy0)
		y0 = w.dy0
	}
	nsF := tp.ns * l.features
	if err := tp.pq.features(tp.feats[nsF:], phi, t.QueryX); err != nil {
		return 0, 0, err
	}
	var fx *graph.FixedX
	var dx []float64
	if direct {
		cm := tp.cm
		if err := tp.setTask(tp.cnn, [4]*G.Node{cm.Support, cm.SupportY, cm.Query, cm.QueryY}, t); err != nil {
			return 0, 0, err
		}
		fx = tp.cnn.FixX(phi, nil, nil)
		dx = grad[:l.dimX]
	} else {
		if err := tp.ps.features(tp.feats[:nsF], phi, t.SupportX); err != nil {
			return 0, 0, err
		}
		if err := tp.setLabels(t.SupportY, t.QueryY); err != nil {
			return 0, 0, err
		}
		fx = tp.head.FixX(tp.feats, nil, nil)
		dx = tp.adj
	}
	var dy0 []float64
	if l.s.Gradient == ANIL {
		dy0 = grad[l.dimX:]
	}
	yT, err := w.metaGradient(dx, dy0, fixedOracles{fx}, y0, l.s.Gradient == AID, l.s.FirstOrder, steps, l.s.Alpha)
	if err != nil {
		return 0, 0, err
	}
	acc, loss = l.score(tp.feats[nsF:], t.QueryY, yT)
	w.inner = w.innerRatio(fx, y0, yT)
	if !direct {
		// φ's gradient: the features' adjoints pulled back through the
		// backbone, support set then query set.
		tp.ps.pullback(grad[:l.dimX], tp.adj[:nsF])
		tp.pq.pullback(tp.tmp, tp.adj[nsF:])
		for j, v := range tp.tmp {
			grad[j] += v
		}
	}
	return acc, loss, nil
}

// score returns the accuracy and mean cross-entropy of the head y on the
// query features.
func (l *Learner) score(feats []float64, labels []int, y []float64) (acc, loss float64) {
	return scoreHead(feats, labels, y, l.features, l.ways, l.cnn.NoBias)
}

// adaptWhole computes one MAML task's meta-gradient into grad (nil: none,
// at evaluation) and returns the query accuracy and loss of the adapted
// network. On models.CNNInit at x = θ_0 the inner loop moves δ from 0,
// and the meta-gradient d f/dθ_0 is the sweep's first adjoint
// a_0 = d f/dδ_0 (full MAML) or ∇δ f at δ_T (FOMAML).
func (l *Learner) adaptWhole(w *worker, t *data.Task, steps int, grad []float64) (acc, loss float64, err error) {
	tp, err := w.problems(len(t.SupportY), len(t.QueryY), needInit)
	if err != nil {
		return 0, 0, err
	}
	im := tp.im
	if err := tp.setTask(tp.init, [4]*G.Node{im.Support, im.SupportY, im.Query, im.QueryY}, t); err != nil {
		return 0, 0, err
	}
	theta0 := l.st.Params
	w.dy0 = grow(w.dy0, len(theta0))
	clear(w.dy0)
	o := initOracles{tp.init.FixX(theta0, nil, nil)}
	var dT []float64
	if grad == nil {
		dT, err = w.descend(o, w.dy0, steps, l.s.Alpha)
	} else {
		dT, err = w.metaGradient(nil, grad, o, w.dy0, false, l.s.FirstOrder, steps, l.s.Alpha)
	}
	if err != nil {
		return 0, 0, err
	}
	// The adapted network θ_T = θ_0 + δ_T, scored on the query set.
	w.theta = grow(w.theta, len(theta0))
	for i, v := range theta0 {
		w.theta[i] = v + dT[i]
	}
	nsF := tp.ns * l.features
	if err := tp.pq.features(tp.feats[nsF:], w.theta[:l.dimX], t.QueryX); err != nil {
		return 0, 0, err
	}
	acc, loss = l.score(tp.feats[nsF:], t.QueryY, w.theta[l.dimX:])
	return acc, loss, nil
}

// Evaluate adapts to each of the tasks first, …, first+n−1 of src by the
// learner's inner loop (EvalSteps, or the training steps of the current
// iteration, of size Alpha: a head from 0, or from w_0 for ANIL; the whole
// network from θ_0 for MAML) and returns the query accuracy over the
// tasks.
func (l *Learner) Evaluate(src *Tasks, first, n int) (Accuracy, error) {
	steps := l.s.EvalSteps
	if steps == 0 {
		var err error
		if steps, err = l.InnerSteps(l.st.Iter); err != nil {
			return Accuracy{}, fmt.Errorf("meta: evaluation: %w", err)
		}
	}
	if l.s.Gradient == MAML {
		return evaluate(l.workers, l.ways, src, first, n, func(w *worker, t *data.Task) (float64, float64, error) {
			if err := l.checkTask(t); err != nil {
				return 0, 0, err
			}
			return l.adaptWhole(w, t, steps, nil)
		})
	}
	return evaluate(l.workers, l.ways, src, first, n, func(w *worker, t *data.Task) (float64, float64, error) {
		return fitHead(w, t, l.features, l.ways, l.cnn.NoBias, l.Backbone(), l.head0(), steps, l.s.Alpha)
	})
}
