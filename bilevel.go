package bilevel

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/optimize"
)

// Method selects how Hypergradient differentiates y*(x).
type Method int

const (
	// AID differentiates implicitly at the inner solution:
	// ∇x f − ∇xy g·v with ∇yy g·v = ∇y f, solved by implicit.CG.
	AID Method = iota
	// ITD differentiates through the gradient-descent iterations that
	// reach the tolerance from Settings.Y0 (unroll.Unroller).
	ITD
)

func (m Method) String() string {
	switch m {
	case AID:
		return "AID"
	case ITD:
		return "ITD"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Inner selects the solver of the lower level.
type Inner int

const (
	// NewtonCG is the truncated Newton method: CG on the Hessian-vector
	// products of g (the problem's linearized operator where it declares
	// one), about ten Newton steps in all. It was 2 to 6 times faster
	// than L-BFGS on every lower level measured (docs/design.md).
	NewtonCG Inner = iota
	// LBFGS is gonum/optimize's limited-memory BFGS: one value and one
	// gradient of g per iteration and no Hessian-vector products, for
	// lower levels whose Hessian-vector products are costly or whose
	// Hessian is indefinite far from y*.
	LBFGS
)

func (in Inner) String() string {
	switch in {
	case LBFGS:
		return "L-BFGS"
	case NewtonCG:
		return "Newton-CG"
	}
	return fmt.Sprintf("Inner(%d)", int(in))
}

// Default settings.
const (
	DefaultTol       = 1e-8  // Settings.Tol
	DefaultLinearTol = 1e-10 // Settings.LinearTol
)

// Default iteration limits by solver (Settings.MaxInner).
const (
	DefaultMaxNewtonCG = 200
	DefaultMaxLBFGS    = 10000
	DefaultMaxDescent  = 1000
)

// curvatureSteps bounds the Lanczos steps of a curvature estimate, as
// optim's default step sizes do.
const curvatureSteps = 30

// Settings configures SolveLower and Hypergradient. The zero value (or a
// nil *Settings) means every default.
type Settings struct {
	// Method is AID (the zero value) or ITD.
	Method Method
	// Inner is the solver of the lower level: NewtonCG (the zero value) or
	// LBFGS. ITD descends by gradient steps, which its reverse sweep
	// differentiates; it uses Inner to find y* for its step size.
	Inner Inner
	// Tol is the tolerance on ‖∇y g(x, y)‖₂ at the returned y; 0 means
	// DefaultTol. It must be finite and not negative.
	Tol float64
	// MaxInner caps the inner iterations: Newton-CG or L-BFGS iterations,
	// or ITD's gradient steps, whose iterates ITD stores (ITD's solve for
	// y* keeps its solver's default). 0 means DefaultMaxNewtonCG,
	// DefaultMaxLBFGS or DefaultMaxDescent.
	MaxInner int
	// LinearTol is AID's tolerance on the residual of ∇yy g·v = ∇y f
	// relative to ‖∇y f‖; 0 means DefaultLinearTol.
	LinearTol float64
	// MaxLinear caps AID's CG iterations; 0 means 2·DimY.
	MaxLinear int
	// Y0 is the starting y (length DimY); nil means zero. A graph.Problem
	// gives its inner variables' values as Y0(nil).
	Y0 []float64
}

// Result is the outcome of SolveLower or Hypergradient.
type Result struct {
	// Y is the inner solution y*(x) with ‖∇y g(x, Y)‖₂ ≤ Tol; for ITD the
	// last iterate y_T of the descent it differentiated. After an error it
	// is the last iterate reached.
	Y []float64
	// Grad is the hypergradient ∇Φ(x) (length DimX); nil from SolveLower
	// and after an error.
	Grad []float64
	Stats
}

// Stats reports the work of a call and the quality of its answer.
type Stats struct {
	// InnerIterations counts the lower level's iterations: Newton-CG or
	// L-BFGS iterations, or ITD's gradient steps T (the solve ITD makes
	// for its step size is counted in Calls only).
	InnerIterations int
	// InnerResidual is ‖∇y g(x, Y)‖₂.
	InnerResidual float64
	// Linear is AID's solve of ∇yy g·v = ∇y f: CG iterations, Hessian-vector
	// products and the residual ‖∇y f − ∇yy g·v‖₂.
	Linear implicit.Stats
	// Curvature is ITD's estimate of λmax(∇yy g), the larger of the
	// Lanczos estimates at Y0 and at y*, and StepSize its gradient step
	// 1/Curvature.
	Curvature, StepSize float64
	// Calls counts every oracle call, Lanczos and CG products included.
	Calls oracle.Calls
	// Runtime is the wall time of the call.
	Runtime time.Duration
}

// Lower is the part of a problem that SolveLower and Curvature use: g,
// ∇y g and ∇yy g·v with the optional linearized operator.
type Lower interface {
	oracle.Dims
	oracle.LowerValue
	oracle.LowerGradient
	oracle.Hessian
	oracle.Declarer
}

// SolveLower minimizes y ↦ g(x, y) on the whole lower data set from
// s.Y0 with s.Inner until ‖∇y g(x, y)‖₂ ≤ s.Tol, and returns y*(x) in
// Result.Y. It uses Inner, Tol, MaxInner and Y0 of s, which may be nil.
// Invalid input (a nil problem, x of the wrong length or not finite,
// settings out of their domain) is an error before any oracle call; a
// solve that stops above the tolerance is a *ToleranceError, with the
// last iterate in Result.Y.
func SolveLower(p Lower, x []float64, s *Settings) (*Result, error) {
	c, err := newCall(p, x, s)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	start := time.Now()
	r.Y, r.InnerIterations, r.InnerResidual, err = c.lower(c.s.MaxInner)
	c.finish(r, start)
	return r, err
}

// Hypergradient solves the lower level at x as SolveLower does and
// returns y*(x) and the hypergradient
//
//	∇Φ(x) = ∇x f(x, y*) − ∇xy g(x, y*)·v,   ∇yy g(x, y*)·v = ∇y f(x, y*)
//
// computed by s.Method: AID solves for v by implicit.CG to s.LinearTol;
// ITD runs T gradient steps of size 1/λ̂ from s.Y0, T the first at which
// ‖∇y g‖ ≤ s.Tol (at most s.MaxInner) and λ̂ the Lanczos estimate of
// λmax(∇yy g) at Y0 and y*, and differentiates through them
// (unroll.Unroller), storing T+1 iterates. Objectives and derivatives are
// on the whole data sets. s may be nil.
//
// Invalid input is an error before any oracle call. A solve that stops
// above its tolerance is a *ToleranceError saying by how much; a failure
// of the hypergradient core keeps its type (*implicit.CurvatureError
// inside the ToleranceError of a linear system whose operator is not
// positive definite, *unroll.NonFiniteError). After an error Result holds
// the work done and the last iterate, and Grad is nil.
func Hypergradient(p oracle.Problem, x []float64, s *Settings) (*Result, error) {
	if p == nil || isNilPointer(p) {
		return nil, errors.New("bilevel: the problem is nil")
	}
	c, err := newCall(p, x, s)
	if err != nil {
		return nil, err
	}
	c.full = p
	r := &Result{}
	start := time.Now()
	if c.s.Method == ITD {
		err = c.itd(r)
	} else {
		err = c.aid(r)
	}
	c.finish(r, start)
	return r, err
}

// call is one SolveLower or Hypergradient call: its problem, point,
// settings with the defaults filled in, and oracle counts.
type call struct {
	p     Lower
	full  oracle.Problem // p for Hypergradient, nil for SolveLower
	x     []float64
	y0    []float64
	s     Settings
	calls oracle.Calls
}

// newCall checks the input and fills in the defaults.
func newCall(p Lower, x []float64, s *Settings) (*call, error) {
	if p == nil || isNilPointer(p) {
		return nil, errors.New("bilevel: the problem is nil")
	}
	c := &call{p: p}
	if s != nil {
		c.s = *s
	}
	dx, dy := p.DimX(), p.DimY()
	if dx < 1 || dy < 1 {
		return nil, fmt.Errorf("bilevel: the problem has DimX = %d and DimY = %d; both must be at least 1", dx, dy)
	}
	if len(x) != dx {
		return nil, fmt.Errorf("bilevel: x has length %d; the problem's DimX is %d", len(x), dx)
	}
	if err := checkFinite("x", x); err != nil {
		return nil, err
	}
	c.x = append([]float64{}, x...)
	st := &c.s
	switch {
	case st.Method != AID && st.Method != ITD:
		return nil, fmt.Errorf("bilevel: Settings.Method = %v; use AID or ITD", st.Method)
	case st.Inner != LBFGS && st.Inner != NewtonCG:
		return nil, fmt.Errorf("bilevel: Settings.Inner = %v; use NewtonCG or LBFGS", st.Inner)
	case !(st.Tol >= 0) || math.IsInf(st.Tol, 1):
		return nil, fmt.Errorf("bilevel: Settings.Tol = %v; give a finite tolerance ≥ 0 (0: %g)", st.Tol, DefaultTol)
	case !(st.LinearTol >= 0) || math.IsInf(st.LinearTol, 1):
		return nil, fmt.Errorf("bilevel: Settings.LinearTol = %v; give a finite tolerance ≥ 0 (0: %g)", st.LinearTol, DefaultLinearTol)
	case st.MaxInner < 0:
		return nil, fmt.Errorf("bilevel: Settings.MaxInner = %d; give a count ≥ 1, or 0 for the default", st.MaxInner)
	case st.MaxLinear < 0:
		return nil, fmt.Errorf("bilevel: Settings.MaxLinear = %d; give a count ≥ 1, or 0 for 2·DimY", st.MaxLinear)
	}
	if st.Tol == 0 {
		st.Tol = DefaultTol
	}
	if st.LinearTol == 0 {
		st.LinearTol = DefaultLinearTol
	}
	if st.Y0 == nil {
		c.y0 = make([]float64, dy)
	} else {
		if len(st.Y0) != dy {
			return nil, fmt.Errorf("bilevel: Settings.Y0 has length %d; the problem's DimY is %d", len(st.Y0), dy)
		}
		if err := checkFinite("Settings.Y0", st.Y0); err != nil {
			return nil, err
		}
		c.y0 = append([]float64{}, st.Y0...)
	}
	return c, nil
}

// isNilPointer reports whether v holds a nil pointer, such as a
// (*graph.Problem)(nil), whose methods would panic.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

func checkFinite(name string, v []float64) error {
	for i, e := range v {
		if math.IsNaN(e) || math.IsInf(e, 0) {
			return fmt.Errorf("bilevel: %s[%d] = %v; it must be finite", name, i, e)
		}
	}
	return nil
}

// finish records the counts and the runtime in r.
func (c *call) finish(r *Result, start time.Time) {
	r.Calls = c.calls
	r.Runtime = time.Since(start)
}

// gradientNorm is the Converger of the inner solve: it stops once
// ‖∇y g‖₂ ≤ tol.
type gradientNorm float64

var _ optimize.Converger = gradientNorm(0)

func (gradientNorm) Init(int) {}

func (tol gradientNorm) Converged(loc *optimize.Location) optimize.Status {
	if floats.Norm(loc.Gradient, 2) <= float64(tol) {
		return optimize.GradientThreshold
	}
	return optimize.NotTerminated
}

// lower minimizes g(x, ·) from Y0 with the Inner solver under gonum's
// Minimize, for at most limit iterations (0: the solver's default), and
// returns the last major iterate, its iteration count and ‖∇y g‖ there.
func (c *call) lower(limit int) (y []float64, iters int, residual float64, err error) {
	prob := optimize.Problem{
		Func: func(y []float64) float64 { c.calls.G++; return c.p.G(c.x, y, nil) },
		Grad: func(dst, y []float64) { c.calls.GradG++; c.p.GradG(nil, dst, c.x, y, nil) },
	}
	var method optimize.Method = &newtonCG{c: c}
	def := DefaultMaxNewtonCG
	if c.s.Inner == LBFGS {
		method = &optimize.LBFGS{Linesearcher: &wolfeSearch{}, GradStopThreshold: math.NaN()}
		def = DefaultMaxLBFGS
	}
	if limit == 0 {
		limit = def
	}
	// The starting point is the first major iteration.
	set := &optimize.Settings{Converger: gradientNorm(c.s.Tol), MajorIterations: limit + 1}
	res, err := optimize.Minimize(prob, c.y0, set, method)
	if res == nil {
		return c.y0, 0, math.NaN(), fmt.Errorf("bilevel: %v of the lower level: %w", c.s.Inner, err)
	}
	y, iters = res.X, max(res.MajorIterations-1, 0)
	residual = math.NaN()
	if res.Gradient != nil {
		residual = floats.Norm(res.Gradient, 2)
	}
	if residual <= c.s.Tol {
		return y, iters, residual, nil
	}
	switch {
	case res.Status == optimize.IterationLimit:
		err = nil
	case res.Status == optimize.FunctionNegativeInfinity:
		err = errors.New("g(x, ·) reached −Inf: it is not bounded below")
	case err == nil:
		err = res.Status.Err()
	}
	return y, iters, residual, &ToleranceError{Solve: "lower level", Solver: c.s.Inner.String(),
		Iterations: iters, Residual: residual, Tol: c.s.Tol, Err: err}
}

// aid is Hypergradient by implicit differentiation: the inner solve, then
// implicit.Estimate with CG on the problem's Hessian operator at y*.
func (c *call) aid(r *Result) error {
	var err error
	if r.Y, r.InnerIterations, r.InnerResidual, err = c.lower(c.s.MaxInner); err != nil {
		return err
	}
	p, x, y := c.full, c.x, r.Y
	grad := make([]float64, len(x))
	cg := &implicit.CG{Tol: c.s.LinearTol, MaxIter: c.s.MaxLinear}
	op := implicit.HVPOperator(p, x, y, nil)
	var bnorm float64
	st, err := implicit.Estimate(grad, make([]float64, len(y)), implicit.System{
		Gradient: func(gx, gy []float64) {
			c.calls.GradF++
			p.GradF(gx, gy, x, y, nil)
			bnorm = floats.Norm(gy, 2)
		},
		Solve: func(v, b []float64) (implicit.Stats, error) { return cg.Solve(v, op, b) },
		Cross: func(dst, v []float64) { c.calls.MixedXY++; p.MixedXY(dst, x, y, v, nil) },
	}, nil, nil)
	r.Linear = st
	c.calls.HVP += int64(st.HVP)
	if err != nil || !st.Converged {
		return &ToleranceError{Solve: "linear system", Solver: "CG", Iterations: st.Iterations,
			Residual: st.Residual, Tol: c.s.LinearTol * bnorm, Err: err}
	}
	r.Grad = grad
	return nil
}

// itd is Hypergradient by iterative differentiation: the step size from
// the curvature at Y0 and y*, the number of steps T from a descent that
// reaches the tolerance, then unroll's forward pass and reverse sweep.
func (c *call) itd(r *Result) error {
	ystar, iters, residual, err := c.lower(0) // MaxInner caps the descent
	r.Y, r.InnerIterations, r.InnerResidual = ystar, iters, residual
	if err != nil {
		return err
	}
	p, x := c.full, c.x
	for _, y := range [][]float64{c.y0, ystar} {
		l, applied, err := curvature(p, x, y)
		c.calls.HVP += int64(applied)
		if err != nil {
			return err
		}
		r.Curvature = math.Max(r.Curvature, l)
	}
	r.StepSize = 1 / r.Curvature
	steps, last, err := c.descentSteps(r.StepSize)
	if err != nil {
		r.Y, r.InnerIterations, r.InnerResidual = last, steps, err.(*ToleranceError).Residual
		return err
	}
	u := unroll.Unroller{Steps: steps, Alpha: r.StepSize}
	grad := make([]float64, len(x))
	ur, err := u.Hypergradient(grad, p, x, c.y0, nil)
	c.calls = c.calls.Add(ur.Calls)
	r.InnerIterations = steps
	if err != nil {
		return fmt.Errorf("bilevel: ITD: %w", err)
	}
	r.Y = append([]float64{}, u.Final()...)
	gy := make([]float64, len(r.Y))
	c.calls.GradG++
	p.GradG(nil, gy, x, r.Y, nil)
	r.InnerResidual = floats.Norm(gy, 2)
	if r.InnerResidual > c.s.Tol {
		return &ToleranceError{Solve: "lower level", Solver: "gradient descent", Iterations: steps,
			Residual: r.InnerResidual, Tol: c.s.Tol, Err: errors.New("the unrolled descent did not repeat the counting descent")}
	}
	r.Grad = grad
	return nil
}

// Curvature estimates λmax(∇yy g(x, y)), the curvature of the lower level
// at (x, y) on the whole lower data set, by min(30, DimY) Lanczos steps
// (implicit.LargestEigenvalue, as many Hessian-vector products) from a
// fixed start. The estimate never exceeds λmax and is usually within a
// few percent of it. Gradient descent on g(x, ·) converges for steps
// below 2/λmax along its path: ITD takes 1/Curvature at Y0 and y*, and a
// solver of package optim with a fixed inner step can take 1/Curvature
// where g is most curved. An estimate that is not positive and finite is
// an error: g(x, ·) is then not strongly convex at y.
func Curvature(p Lower, x, y []float64) (float64, error) {
	if p == nil || isNilPointer(p) {
		return 0, errors.New("bilevel: the problem is nil")
	}
	if len(x) != p.DimX() || len(y) != p.DimY() {
		return 0, fmt.Errorf("bilevel: Curvature at x and y of lengths %d and %d; the problem has DimX = %d, DimY = %d", len(x), len(y), p.DimX(), p.DimY())
	}
	if err := checkFinite("x", x); err != nil {
		return 0, err
	}
	if err := checkFinite("y", y); err != nil {
		return 0, err
	}
	l, _, err := curvature(p, x, y)
	return l, err
}

// curvature is Curvature on checked input; it also returns the number of
// Hessian-vector products.
func curvature(p Lower, x, y []float64) (float64, int, error) {
	op := implicit.HVPOperator(p, x, y, nil)
	applied := 0
	l, err := implicit.LargestEigenvalue(func(dst, v []float64) { applied++; op(dst, v) }, p.DimY(), curvatureSteps, 1)
	switch {
	case err != nil:
		return 0, applied, fmt.Errorf("bilevel: the curvature estimate of ∇yy g: %w", err)
	case !(l > 0) || math.IsInf(l, 1):
		return 0, applied, fmt.Errorf("bilevel: the curvature estimate λmax(∇yy g) = %v is not positive and finite: g(x, ·) is not strongly convex at this y, and gradient descent on it has no step size", l)
	}
	return l, applied, nil
}

// descentSteps returns the number T of gradient steps of size alpha from
// Y0 after which ‖∇y g‖ ≤ Tol, computed with the step of unroll's forward
// pass, so that the Unroller of T steps ends where this descent did, and
// the last iterate. It fails with a *ToleranceError.
func (c *call) descentSteps(alpha float64) (int, []float64, error) {
	y, g := append([]float64{}, c.y0...), make([]float64, len(c.y0))
	limit := c.s.MaxInner
	if limit == 0 {
		limit = DefaultMaxDescent
	}
	for t := 0; ; t++ {
		c.calls.GradG++
		c.p.GradG(nil, g, c.x, y, nil)
		residual := floats.Norm(g, 2)
		switch {
		case residual <= c.s.Tol:
			return t, y, nil
		case t == limit || math.IsNaN(residual) || math.IsInf(residual, 0):
			err := fmt.Errorf("the step limit %d (ITD stores an iterate of y per step: raise Settings.MaxInner, or Tol)", limit)
			if t < limit {
				err = fmt.Errorf("‖∇y g‖ = %v at step %d", residual, t)
			}
			return t, y, &ToleranceError{Solve: "lower level", Solver: "gradient descent", Iterations: t,
				Residual: residual, Tol: c.s.Tol, Err: err}
		}
		for i, gi := range g {
			y[i] -= alpha * gi
		}
	}
}
