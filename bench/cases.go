package bench

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
)

// Spec is a benchmark problem: multinomial logistic regression with one
// learned L2 penalty per feature (models.LogisticRegression),
//
//	g(λ, W) = CE(XW, Y) + (1/(c·d)) Σ_j e^{λ_j} Σ_k W_jk²,   f(λ, W) = CE(X'W, Y'),
//
// or, with Hidden > 0, the hyper-representation MLP of models.MLP (tanh
// hidden layer of Hidden units, the first layer outer, the head inner, no
// biases, μ = MLPMu),
//
//	g(W1, W2) = CE(tanh(XW1)W2, Y) + ½μ‖W2‖²,   f(W1, W2) = CE(tanh(X'W1)W2, Y'),
//
// with X (N×D) and X' (NVal×D) uniform with mean 0 and variance 1, labels
// uniform in [0, C).
type Spec struct {
	Name          string
	ID            uint64 // streams 100·ID + 1, … (see Arrays)
	N, D, C, NVal int
	Hidden        int // the MLP's hidden width; 0 for logistic regression
}

// MLPMu is the head penalty μ of the MLP problems.
const MLPMu = 0.1

// The problems of the benchmark: MNIST-sized logistic regression, a small
// one with d ≤ 100, a wide MLP (a hidden layer of 256 units) and logistic
// regression with a thousand classes — the last two products that go to
// graph's general product rather than its narrow kernels.
var (
	Large = Spec{Name: "large", ID: 1, N: 20000, D: 784, C: 10, NVal: 1000}
	Small = Spec{Name: "small", ID: 2, N: 1000, D: 100, C: 10, NVal: 100}
	MLP   = Spec{Name: "mlp", ID: 5, N: 10000, D: 784, C: 10, NVal: 1000, Hidden: 256}
	Wide  = Spec{Name: "wide", ID: 6, N: 5000, D: 512, C: 1000, NVal: 500}
)

// Specs lists the problems in table order.
var Specs = []Spec{Large, Small, MLP, Wide}

// Arrays holds a problem's data and the point (x, y) and vector v at which
// every row is evaluated.
type Arrays struct {
	X, XVal           []float64 // row-major N×D, NVal×D
	Labels, LabelsVal []int
	// Outer is x: λ (D, uniform in [−1, 1)), or the MLP's W1 (D×Hidden,
	// row-major, uniform with variance 1/D).
	Outer []float64
	// Inner is y: W (D×C), or the MLP's W2 (Hidden×C), uniform in
	// [−0.01, 0.01).
	Inner []float64
	V     []float64 // the shape of Inner, uniform in [−1, 1)
}

// Arrays generates s's arrays from streams 100·ID + 1…7 (X, labels,
// X', labels', x, y, v), as torch_ref.py does.
func (s Spec) Arrays() Arrays {
	b := 100 * s.ID
	sq3 := math.Sqrt(3)
	a := Arrays{
		X: Symmetric(b+1, s.N*s.D, sq3), Labels: Labels(b+2, s.N, s.C),
		XVal: Symmetric(b+3, s.NVal*s.D, sq3), LabelsVal: Labels(b+4, s.NVal, s.C),
	}
	if s.Hidden > 0 {
		a.Outer = Symmetric(b+5, s.D*s.Hidden, sq3/math.Sqrt(float64(s.D)))
		a.Inner, a.V = Symmetric(b+6, s.Hidden*s.C, 0.01), Symmetric(b+7, s.Hidden*s.C, 1)
		return a
	}
	a.Outer = Symmetric(b+5, s.D, 1)
	a.Inner, a.V = Symmetric(b+6, s.D*s.C, 0.01), Symmetric(b+7, s.D*s.C, 1)
	return a
}

// Instance is a compiled problem with its evaluation point.
type Instance struct {
	Spec
	Arrays
	P *graph.Problem
	// F32 is set when the problem computes in float32
	// (graph.Objective.Float32): the rows named spec/f32/…. Data32 is then
	// the same problem with its data in float32 and float64 arithmetic
	// (graph.Objective.Float32Data), for the row spec/f32d/grad.
	F32    bool
	Data32 *graph.Problem
}

// NewInstance generates s's data and compiles its problem, computed in
// float32 when f32 is set.
func NewInstance(s Spec, f32 bool) (*Instance, error) {
	a := s.Arrays()
	train := models.Data{X: a.X, N: s.N, D: s.D, Labels: a.Labels}
	val := models.Data{X: a.XVal, N: s.NVal, D: s.D, Labels: a.LabelsVal}
	var obj *graph.Objective
	if s.Hidden > 0 {
		m, err := models.MLP(train, val, s.C, models.MLPSettings{Hidden: s.Hidden, Activation: models.Tanh, Mu: MLPMu})
		if err != nil {
			return nil, err
		}
		obj = &m.Objective
	} else {
		m, err := models.LogisticRegression(train, val, s.C, models.LogisticSettings{})
		if err != nil {
			return nil, err
		}
		obj = &m.Objective
	}
	obj.Float32 = f32
	p, err := graph.Compile(*obj)
	if err != nil {
		return nil, err
	}
	if p.DimX() != len(a.Outer) || p.DimY() != len(a.Inner) {
		return nil, fmt.Errorf("bench: %s compiled with d_x = %d, d_y = %d", s.Name, p.DimX(), p.DimY())
	}
	in := &Instance{Spec: s, Arrays: a, P: p, F32: f32}
	if f32 {
		obj.Float32, obj.Float32Data = false, true
		if in.Data32, err = graph.Compile(*obj); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// linearized serves the Hessian and mixed products of oracle.Implicit from
// one graph.Linearization (every call is at its point).
type linearized struct {
	*graph.Problem
	lin *graph.Linearization
}

func (l linearized) HVP(dst, _, _, v []float64, _ []int)     { l.lin.HVP(dst, v) }
func (l linearized) MixedXY(dst, _, _, v []float64, _ []int) { l.lin.MixedXY(dst, v) }

// unlinearized is the Problem without its declared optional oracles: no
// linearized HVP (HVPAt), so that every product runs the full HVP
// program, and no oracles at a fixed outer point (FixX), so that ITD's
// sweep takes one full mixed product per step.
type unlinearized struct{ *graph.Problem }

func (unlinearized) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// Grad returns ∇_y g.
func (in *Instance) Grad(dst []float64) { in.P.GradG(nil, dst, in.Outer, in.Inner, nil) }

// HVP returns ∇_yy g · v by the full HVP program.
func (in *Instance) HVP(dst []float64) { in.P.HVP(dst, in.Outer, in.Inner, in.V, nil) }

// Mixed returns ∇_xy g · v = ∇_x ⟨∇_y g, v⟩.
func (in *Instance) Mixed(dst []float64) { in.P.MixedXY(dst, in.Outer, in.Inner, in.V, nil) }

// AID returns the AID hypergradient at (x, y) with steps CG steps from
// v = 0 (no tolerance test); with lin the products come from one
// Linearization made inside the call.
func (in *Instance) AID(dst []float64, cg *implicit.CG, lin bool) error {
	// Without lin, a fresh HVP per product: the Problem without its HVPAt,
	// which implicit would otherwise use.
	var p oracle.Implicit = unlinearized{in.P}
	if lin {
		p = linearized{in.P, in.P.Linearize(in.Outer, in.Inner, nil)}
	}
	_, err := implicit.Hypergradient(dst, p, in.Outer, in.Inner, &implicit.Settings{Solver: cg})
	return err
}

// ITD returns the ITD hypergradient through steps steps of gradient descent
// with step Alpha from y, with a new Unroller (so that its storage of
// (steps+1)·|y| floats is allocated inside the call). With perStep the
// Problem's oracles at a fixed outer point are hidden: every oracle call
// computes the part of g without y again and every mixed product goes back
// through it, as before the sweep summed them (the itd-t10-per-step rows).
func (in *Instance) ITD(dst []float64, steps int, perStep bool) error {
	var p oracle.Unrolled = in.P
	if perStep {
		p = unlinearized{in.P}
	}
	u := &unroll.Unroller{Steps: steps, Alpha: Alpha}
	_, err := u.Hypergradient(dst, p, in.Outer, in.Inner, nil)
	return err
}

// Case is one row of the table timed on the Go side.
type Case struct {
	Name  string // spec/f64/what, as in torch_ref.py
	Heavy bool   // tens of seconds per call: BenchmarkRows makes no warm-up call
	Op    func() error
}

// prefix returns the rows' names' common part: spec/f64/ or spec/f32/.
func (in *Instance) prefix() string {
	if in.F32 {
		return in.Name + "/f32/"
	}
	return in.Name + "/f64/"
}

// Cases returns the rows of in: in float32, the four oracle rows and the
// gradient with float32 data and float64 arithmetic (spec/f32d/grad). The
// programs every row uses are compiled here, so a row's first call does
// no compilation.
func (in *Instance) Cases() []Case {
	dy, dx := make([]float64, in.P.DimY()), make([]float64, in.P.DimX())
	lin := in.P.Linearize(in.Outer, in.Inner, nil)
	in.Grad(dy)
	in.HVP(dy)
	in.Mixed(dx)
	lin.HVP(dy, in.V)
	in.P.GradF(dx, dy, in.Outer, in.Inner, nil)
	in.P.F(in.Outer, in.Inner, nil)
	pre := in.prefix()
	nop := func(f func()) func() error { return func() error { f(); return nil } }
	cs := []Case{
		{Name: pre + "grad", Op: nop(func() { in.Grad(dy) })},
		{Name: pre + "hvp", Op: nop(func() { in.HVP(dy) })},
		{Name: pre + "mixed", Op: nop(func() { in.Mixed(dx) })},
		{Name: pre + "hvp-fixed", Op: nop(func() { lin.HVP(dy, in.V) })},
	}
	if in.F32 {
		data32 := func() { in.Data32.GradG(nil, dy, in.Outer, in.Inner, nil) }
		data32()
		return append(cs, Case{Name: in.Name + "/f32d/grad", Op: nop(data32)})
	}
	cgSteps := []int{10}
	if in.Spec == Small {
		cgSteps = append(cgSteps, 100)
	}
	for _, k := range cgSteps {
		cg := &implicit.CG{MaxIter: k, Tol: -1}
		cs = append(cs,
			Case{Name: fmt.Sprintf("%said-cg%d", pre, k), Op: func() error { return in.AID(dx, cg, false) }},
			Case{Name: fmt.Sprintf("%said-cg%d-lin", pre, k), Op: func() error { return in.AID(dx, cg, true) }})
	}
	steps := []int{10}
	if in.Spec == Large || in.Spec == Small {
		steps = append(steps, 100)
	}
	for _, t := range steps {
		cs = append(cs, Case{Name: fmt.Sprintf("%sitd-t%d", pre, t), Heavy: t == 100 && in.Spec == Large,
			Op: func() error { return in.ITD(dx, t, false) }})
	}
	cs = append(cs, Case{Name: pre + "itd-t10-per-step", Op: func() error { return in.ITD(dx, 10, true) }})
	return cs
}

// Results returns the vectors torch_ref.py writes for the cross-check:
// grad, hvp, mixed, aid-cg10 (the hypergradient) and itd-t10; in float32,
// f32-grad, f32-hvp and f32-mixed.
func (in *Instance) Results() (map[string][]float64, error) {
	r := map[string][]float64{}
	dy := func() []float64 { return make([]float64, in.P.DimY()) }
	dx := func() []float64 { return make([]float64, in.P.DimX()) }
	pre := ""
	if in.F32 {
		pre = "f32-"
	}
	r[pre+"grad"], r[pre+"hvp"], r[pre+"mixed"] = dy(), dy(), dx()
	in.Grad(r[pre+"grad"])
	in.HVP(r[pre+"hvp"])
	in.Mixed(r[pre+"mixed"])
	if in.F32 {
		return r, nil
	}
	r["aid-cg10"], r["itd-t10"] = dx(), dx()
	if err := in.AID(r["aid-cg10"], &implicit.CG{MaxIter: 10, Tol: -1}, true); err != nil {
		return nil, err
	}
	if err := in.ITD(r["itd-t10"], 10, false); err != nil {
		return nil, err
	}
	return r, nil
}
