package meta

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
	G "gorgonia.org/gorgonia"
)

// probe reads features of a fixed number of images through a compiled
// models.CNNEmbedding, and pulls adjoints of the features back to φ.
type probe struct {
	p      *graph.Problem
	m      *models.CNNEmbeddingModel
	n      int
	zeroE  []float64
	fixed  *graph.FixedX
	images []float64
}

func newProbe(n int, s models.CNNSettings, f32 bool) (*probe, error) {
	side := s.Side
	if side == 0 {
		side = 28
	}
	m, err := models.CNNEmbedding(models.Data{X: make([]float64, n*side*side), N: n, D: side * side}, s)
	if err != nil {
		return nil, err
	}
	p, err := compile(&m.Model, f32)
	if err != nil {
		return nil, err
	}
	return &probe{p: p, m: m, n: n, zeroE: make([]float64, p.DimY())}, nil
}

// features writes h_φ(images) (n × features) to dst and keeps φ fixed for
// a following pullback.
func (pr *probe) features(dst, phi, images []float64) error {
	if err := pr.p.SetData(pr.m.Images, images); err != nil {
		return err
	}
	pr.fixed = pr.p.FixX(phi, nil, nil)
	pr.fixed.GradF(nil, dst, pr.zeroE)
	return nil
}

// pullback writes J_φ(h_φ(images))ᵀ·adj to dst, at the φ and images of
// the last features call.
func (pr *probe) pullback(dst, adj []float64) { pr.fixed.GradF(dst, nil, adj) }

// headProblem is a compiled models.CNNHead with its label buffers.
type headProblem struct {
	head   *graph.Problem
	hm     *models.CNNHeadModel
	ways   int
	ys, yq []float64 // one-hot labels
}

func newHead(ns, nq, ways int, cnn models.CNNSettings, f32 bool) (*headProblem, error) {
	feats, err := models.CNNFeatures(cnn)
	if err != nil {
		return nil, err
	}
	hm, err := models.CNNHead(make([]int, ns), make([]int, nq), ways, feats, cnn)
	if err != nil {
		return nil, err
	}
	p, err := compile(&hm.Model, f32)
	if err != nil {
		return nil, err
	}
	return &headProblem{head: p, hm: hm, ways: ways}, nil
}

// compile compiles m's objective, computed in float32 when f32 is set
// (Settings.Float32).
func compile(m *models.Model, f32 bool) (*graph.Problem, error) {
	obj := m.Objective
	obj.Float32 = f32
	return graph.Compile(obj)
}

// setLabels stores the one-hot labels of a task in the head problem.
func (h *headProblem) setLabels(support, query []int) error {
	h.ys = models.OneHot(h.ys, support, h.ways)
	h.yq = models.OneHot(h.yq, query, h.ways)
	if err := h.head.SetData(h.hm.Ys, h.ys); err != nil {
		return err
	}
	return h.head.SetData(h.hm.Yq, h.yq)
}

// taskProblems are the compiled problems of one task size.
type taskProblems struct {
	*headProblem
	ns, nq   int
	ps, pq   *probe
	cnn      *graph.Problem // Direct only, compiled on first use
	cm       *models.CNNModel
	init     *graph.Problem // MAML only, compiled on first use
	im       *models.CNNInitModel
	feats    []float64 // support rows, then query rows
	adj, tmp []float64
}

// setTask stores a task's images and one-hot labels in p (models.CNN or
// models.CNNInit) through its data nodes: support images and labels, query
// images and labels.
func (tp *taskProblems) setTask(p *graph.Problem, nodes [4]*G.Node, t *data.Task) error {
	tp.ys = models.OneHot(tp.ys, t.SupportY, tp.ways)
	tp.yq = models.OneHot(tp.yq, t.QueryY, tp.ways)
	for i, v := range [][]float64{t.SupportX, tp.ys, t.QueryX, tp.yq} {
		if err := p.SetData(nodes[i], v); err != nil {
			return err
		}
	}
	return nil
}

// need names the problems a computation needs beyond the probes and the
// head: models.CNN for Direct, models.CNNInit for MAML.
type need int

const (
	needHead need = iota
	needCNN
	needInit
)

// worker holds what one goroutine needs to process tasks: compiled
// problems per task size (graph.Problem is not safe for concurrent use)
// and the scratch of the inner loops and meta-gradients.
type worker struct {
	cnn    models.CNNSettings
	ways   int
	f32    bool // Settings.Float32
	sets   map[[2]int]*taskProblems
	unroll unroll.Unroller
	cg     implicit.CG
	y, g   []float64 // an inner iterate and its gradient
	v, fy  []float64 // AID's linear-system solution and right-hand side
	mx     []float64 // AID's mixed product
	dy0    []float64
	theta  []float64 // MAML's adapted network θ_T
	task   data.Task
	cgRel  float64 // AID: CG's relative residual in the task's metaGradient (Learner.task resets it)
	inner  float64 // the last task's ‖∇y g(y_T)‖ / ‖∇y g(y_0)‖ (StepStats.InnerRatio)
}

// innerRatio returns ‖∇y g(y_T)‖ / ‖∇y g(y_0)‖ on the task's lower
// objective fx (0 when y_0 is already stationary). It evaluates two head
// gradients after the meta-gradient is computed, so that it changes
// nothing the meta-gradient uses.
func (w *worker) innerRatio(fx *graph.FixedX, y0, yT []float64) float64 {
	w.g = grow(w.g, len(yT))
	fx.GradG(nil, w.g, yT)
	num := floats.Norm(w.g, 2)
	fx.GradG(nil, w.g, y0)
	if den := floats.Norm(w.g, 2); den > 0 {
		return num / den
	}
	return 0
}

// taskOracles are one task's oracles at a fixed outer point X().
type taskOracles interface {
	oracle.Unrolled
	oracle.Declarer
	X() []float64
}

// descend runs steps steps of gradient descent of size alpha on the task's
// g from y0 (unroll.Descend) and returns y_T, which aliases the worker's
// storage.
func (w *worker) descend(o taskOracles, y0 []float64, steps int, alpha float64) ([]float64, error) {
	w.y = append(w.y[:0], y0...)
	w.g = grow(w.g, len(y0))
	return w.y, unroll.Descend(o, o.X(), w.y, steps, alpha, nil, w.g)
}

// metaGradient runs a task's inner loop, steps steps of size alpha from
// y0 on o, and writes the meta-gradient with respect to the outer point to
// dx and, when dy0 is not nil, with respect to the initialization y0 to
// dy0: by AID (aid: implicit.Estimate with CG from zero at y_D), else by
// unroll's reverse sweep (ITD, full ANIL and MAML; its first adjoint a_0
// is the gradient for y0) or, first-order, by ∇f at y_T. It returns y_T,
// which aliases the worker's storage.
func (w *worker) metaGradient(dx, dy0 []float64, o taskOracles, y0 []float64, aid, firstOrder bool, steps int, alpha float64) ([]float64, error) {
	x := o.X()
	if !aid && !firstOrder {
		w.unroll.Steps, w.unroll.Alpha = steps, alpha
		if err := w.unroll.Forward(o, x, y0); err != nil {
			return nil, err
		}
		if _, err := w.unroll.Backward(dx, dy0, o, nil); err != nil {
			return nil, err
		}
		return w.unroll.Final(), nil
	}
	y, err := w.descend(o, y0, steps, alpha)
	if err != nil {
		return nil, err
	}
	if firstOrder {
		o.GradF(dx, dy0, x, y, nil)
		return y, nil
	}
	w.v, w.fy, w.mx = grow(w.v, len(y)), grow(w.fy, len(y)), grow(w.mx, len(dx))
	clear(w.v)
	op := implicit.HVPOperator(o, x, y, nil)
	st, err := implicit.Estimate(dx, w.v, implicit.System{
		Gradient: func(gx, gy []float64) { o.GradF(gx, gy, x, y, nil) },
		Solve:    func(v, b []float64) (implicit.Stats, error) { return w.cg.Solve(v, op, b) },
		Cross:    func(dst, v []float64) { o.MixedXY(dst, x, y, v, nil) },
	}, w.fy, w.mx)
	if b := floats.Norm(w.fy, 2); b > 0 {
		w.cgRel = st.Residual / b
	}
	return y, err
}

func grow(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float64, n)
}

func finite(v []float64) bool {
	var s float64
	for _, x := range v {
		s += x
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

func newWorkers(n int, cnn models.CNNSettings, ways int, f32 bool) []*worker {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{cnn: cnn, ways: ways, f32: f32, sets: map[[2]int]*taskProblems{}}
	}
	return ws
}

// problems returns the compiled problems for tasks of ns support and nq
// query images, compiling them on first use: the probes and the head, and
// the problem named by n.
func (w *worker) problems(ns, nq int, n need) (*taskProblems, error) {
	key := [2]int{ns, nq}
	tp, ok := w.sets[key]
	if !ok {
		feats, err := models.CNNFeatures(w.cnn)
		if err != nil {
			return nil, err
		}
		tp = &taskProblems{ns: ns, nq: nq}
		if tp.ps, err = newProbe(ns, w.cnn, w.f32); err != nil {
			return nil, err
		}
		if tp.pq, err = newProbe(nq, w.cnn, w.f32); err != nil {
			return nil, err
		}
		if tp.headProblem, err = newHead(ns, nq, w.ways, w.cnn, w.f32); err != nil {
			return nil, err
		}
		tp.feats = make([]float64, (ns+nq)*feats)
		tp.adj = make([]float64, (ns+nq)*feats)
		tp.tmp = make([]float64, tp.ps.p.DimX())
		w.sets[key] = tp
	}
	if n == needHead || n == needCNN && tp.cnn != nil || n == needInit && tp.init != nil {
		return tp, nil
	}
	side := w.cnn.Side
	if side == 0 {
		side = 28
	}
	d := side * side
	support := models.Data{X: make([]float64, ns*d), N: ns, D: d, Labels: make([]int, ns)}
	query := models.Data{X: make([]float64, nq*d), N: nq, D: d, Labels: make([]int, nq)}
	var err error
	if n == needCNN {
		if tp.cm, err = models.CNN(support, query, w.ways, w.cnn); err != nil {
			return nil, err
		}
		tp.cnn, err = compile(&tp.cm.Model, w.f32)
	} else {
		if tp.im, err = models.CNNInit(support, query, w.ways, w.cnn); err != nil {
			return nil, err
		}
		tp.init, err = compile(&tp.im.Model, w.f32)
	}
	if err != nil {
		return nil, err
	}
	return tp, nil
}

// parallel runs f(w, i) for i = 0, …, n−1 on the workers, one goroutine
// each, and returns the error of the smallest i that failed.
func parallel(ws []*worker, n int, f func(w *worker, i int) error) error {
	return run(len(ws), n, func(g, i int) error { return f(ws[g], i) })
}

// parallelIndices runs f(i) for i = 0, …, n−1 on g goroutines and returns
// the error of the smallest i that failed.
func parallelIndices(g, n int, f func(i int) error) error {
	return run(g, n, func(_, i int) error { return f(i) })
}

// run runs f(g, i) for i = 0, …, n−1 on goroutines g = 0, …, workers−1,
// each taking the next index, and returns the error of the smallest i
// that failed; a panic of f is an error.
func run(workers, n int, f func(g, i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				errs[i] = safely(func() error { return f(g, i) })
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// safely turns a panic of f (a graph/ kernel, say) into an error, so that
// one worker's failure does not take the program down without a message.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("meta: %v", r)
		}
	}()
	return f()
}
