package bilevel_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
)

// settings are the three ways of computing a hypergradient that the
// closed-form tests check.
var settings = map[string]bilevel.Settings{
	"AID, Newton-CG": {},
	"AID, L-BFGS":    {Inner: bilevel.LBFGS},
	"ITD":            {Method: bilevel.ITD},
}

// quadratic returns the quadratic model of s and its compiled problem.
func quadratic(t testing.TB, s models.QuadraticSettings) (*models.QuadraticModel, *graph.Problem) {
	t.Helper()
	q, err := models.Quadratic(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return q, p
}

// relErr returns ‖got − want‖/max(‖want‖, 1e-300).
func relErr(got, want []float64) float64 {
	return floats.Distance(got, want, 2) / math.Max(floats.Norm(want, 2), 1e-300)
}

// checkCalls requires the counts of r to be those the graph counted.
func checkCalls(t *testing.T, p *graph.Problem, before graph.Stats, c oracle.Calls) {
	t.Helper()
	s := p.Stats()
	got := [6]int64{c.G, c.GradF, c.GradG, c.HVP, c.MixedXY, c.F}
	want := [6]int64{int64(s.LowerEvaluations - before.LowerEvaluations), int64(s.UpperGradients - before.UpperGradients),
		int64(s.LowerGradients - before.LowerGradients), int64(s.HessVecProducts - before.HessVecProducts),
		int64(s.MixedXYProducts - before.MixedXYProducts), int64(s.UpperEvaluations - before.UpperEvaluations)}
	if got != want {
		t.Errorf("Calls G, GradF, GradG, HVP, MixedXY, F = %v; the problem counted %v", got, want)
	}
}

// TestQuadraticClosedForm checks y*(x) and ∇Φ(x) against the quadratic
// model's closed forms. With ‖∇y g‖ ≤ Tol and λmin(∇yy g) = μ = 1,
// ‖y − y*‖ ≤ Tol; the hypergradient error is of the same order times
// ‖∇xy g‖·‖[∇yy g]⁻¹‖ (at most 100 here), plus CG's 1e-10.
func TestQuadraticClosedForm(t *testing.T) {
	q, p := quadratic(t, models.QuadraticSettings{DimX: 3, DimY: 20, Cond: 100, Rho: 0.1, Seed: 2})
	x := []float64{0.5, -1, 2}
	ystar, want := q.YStar(nil, x), q.HyperGrad(nil, x)
	lmax := 100.0 // μ·Cond
	for name, s := range settings {
		s.Tol = 1e-10
		if s.Method == bilevel.ITD {
			s.MaxInner = 5000 // about Cond·log(‖∇y g(y0)‖/Tol) gradient steps
		}
		before := p.Stats()
		r, err := bilevel.Hypergradient(p, x, &s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkCalls(t, p, before, r.Calls)
		if r.InnerResidual > s.Tol {
			t.Errorf("%s: InnerResidual %.2e above Tol", name, r.InnerResidual)
		}
		if e := floats.Distance(r.Y, ystar, 2); e > s.Tol {
			t.Errorf("%s: ‖y − y*‖ = %.2e > Tol/μ = %.0e", name, e, s.Tol)
		}
		if e := relErr(r.Grad, want); e > 1e-8 {
			t.Errorf("%s: relative error of ∇Φ %.2e > 1e-8", name, e)
		}
		if s.Method == bilevel.ITD {
			// Lanczos on 20 dimensions with 30 steps finds λmax exactly.
			if math.Abs(r.Curvature-lmax) > 1e-8*lmax || r.StepSize != 1/r.Curvature {
				t.Errorf("ITD: Curvature %v, StepSize %v; want λmax = %v and its inverse", r.Curvature, r.StepSize, lmax)
			}
		}
		t.Logf("%s: %d inner iterations, ‖y − y*‖ = %.1e, ∇Φ error %.1e, %+v",
			name, r.InnerIterations, floats.Distance(r.Y, ystar, 2), relErr(r.Grad, want), r.Calls)
	}
}

// TestRidgeClosedForm checks w*(λ) and ∇Φ(λ) against the ridge model's
// closed forms on random data, where the smallest eigenvalue of
// ∇ww g = XᵀX/n + diag(e^λ) is at least min e^λ_j ≈ 0.37.
func TestRidgeClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := func(n, d int) models.Data {
		m := models.Data{X: make([]float64, n*d), N: n, D: d, Targets: make([]float64, n)}
		for i := range m.X {
			m.X[i] = rng.NormFloat64()
		}
		for i := range m.Targets {
			m.Targets[i] = m.X[i*d] - 0.5*m.X[i*d+1] + 0.1*rng.NormFloat64()
		}
		return m
	}
	rm, err := models.RidgeRegression(data(60, 8), data(30, 8))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rm.Compile()
	if err != nil {
		t.Fatal(err)
	}
	lambda := make([]float64, 8)
	for i := range lambda {
		lambda[i] = -1 + 0.25*float64(i)
	}
	wstar, want := rm.WStar(nil, lambda), rm.HyperGrad(nil, lambda)
	for name, s := range settings {
		r, err := bilevel.Hypergradient(p, lambda, &s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e := floats.Distance(r.Y, wstar, 2); e > bilevel.DefaultTol/0.36 {
			t.Errorf("%s: ‖w − w*‖ = %.2e > Tol/μ", name, e)
		}
		if e := relErr(r.Grad, want); e > 1e-6 {
			t.Errorf("%s: relative error of ∇Φ %.2e > 1e-6", name, e)
		}
		t.Logf("%s: %d inner iterations, ‖w − w*‖ = %.1e, ∇Φ error %.1e", name, r.InnerIterations, floats.Distance(r.Y, wstar, 2), relErr(r.Grad, want))
	}
}

// TestLBFGSBeyondValueRounding solves a well-conditioned quadratic with
// d_y = 200 to ‖∇y g‖ ≤ 1e-10 by L-BFGS, below the 1.6e-6 at which
// gonum's value-only line searches stop (docs/design.md).
func TestLBFGSBeyondValueRounding(t *testing.T) {
	_, p := quadratic(t, models.QuadraticSettings{DimX: 20, DimY: 200, Cond: 100, Seed: 1})
	r, err := bilevel.SolveLower(p, p.X0(nil), &bilevel.Settings{Inner: bilevel.LBFGS, Tol: 1e-10})
	if err != nil {
		t.Fatal(err)
	}
	if r.InnerResidual > 1e-10 || r.Grad != nil {
		t.Errorf("residual %.2e, Grad %v", r.InnerResidual, r.Grad)
	}
}

// nonconvex returns the problem g(x, y) = Σ ¼y_i⁴ − ½y_i² + x_i y_i (a
// double well in each y_i, with a maximum at y = 0 when x = 0) and
// f(x, y) = ½‖y − 1‖² + ½‖x‖², or with unbounded set
// g(x, y) = −½‖y‖² + xᵀy.
func nonconvex(t *testing.T, unbounded bool) *graph.Problem {
	t.Helper()
	g := G.NewGraph()
	y := G.NewVector(g, G.Float64, G.WithShape(3), G.WithName("y"), G.WithInit(G.Zeroes()))
	x := G.NewVector(g, G.Float64, G.WithShape(3), G.WithName("x"), G.WithInit(G.Zeroes()))
	sq := G.Must(G.Square(y))
	var lower *G.Node
	if unbounded {
		lower = G.Must(G.Mul(G.NewConstant(-0.5), G.Must(G.Sum(sq))))
	} else {
		well := G.Must(G.Sub(G.Must(G.Mul(G.NewConstant(0.25), G.Must(G.Square(sq)))), G.Must(G.Mul(G.NewConstant(0.5), sq))))
		lower = G.Must(G.Sum(well))
	}
	lower = G.Must(G.Add(lower, G.Must(G.Sum(G.Must(G.HadamardProd(x, y))))))
	off := G.Must(G.Sub(y, G.NewConstant(1.0)))
	upper := G.Must(G.Mul(G.NewConstant(0.5), G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(off)))), G.Must(G.Sum(G.Must(G.Square(x))))))))
	p, err := graph.Compile(graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{x}, Inner: []*G.Node{y}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailuresReported requires every lower level that cannot be solved,
// or whose Hessian is not positive definite at the point found, to be a
// *ToleranceError with the residual reached, and no hypergradient.
func TestFailuresReported(t *testing.T) {
	_, ill := quadratic(t, models.QuadraticSettings{DimX: 2, DimY: 50, Cond: 1e8, Seed: 3})
	_, mid := quadratic(t, models.QuadraticSettings{DimX: 2, DimY: 50, Cond: 1e3, Seed: 3})
	for _, c := range []struct {
		name      string
		p         *graph.Problem
		x         []float64
		s         bilevel.Settings
		solve     string
		curvature bool // the error wraps an *implicit.CurvatureError
	}{
		{"ill-conditioned, Newton-CG", ill, []float64{1, 1}, bilevel.Settings{MaxInner: 3}, "lower level", false},
		{"ill-conditioned, L-BFGS", ill, []float64{1, 1}, bilevel.Settings{Inner: bilevel.LBFGS, MaxInner: 20}, "lower level", false},
		{"ill-conditioned, ITD", ill, []float64{1, 1}, bilevel.Settings{Method: bilevel.ITD, MaxInner: 100}, "lower level", false},
		{"CG capped", mid, []float64{1, 1}, bilevel.Settings{MaxLinear: 5}, "linear system", false},
		{"stationary at a maximum", nonconvex(t, false), []float64{0, 0, 0}, bilevel.Settings{}, "linear system", true},
		{"unbounded below, Newton-CG", nonconvex(t, true), []float64{1, 0, 0}, bilevel.Settings{}, "lower level", false},
		{"unbounded below, L-BFGS", nonconvex(t, true), []float64{1, 0, 0}, bilevel.Settings{Inner: bilevel.LBFGS}, "lower level", false},
	} {
		r, err := bilevel.Hypergradient(c.p, c.x, &c.s)
		var te *bilevel.ToleranceError
		if !errors.As(err, &te) {
			t.Errorf("%s: error %v; want a *ToleranceError", c.name, err)
			continue
		}
		if te.Solve != c.solve || !(te.Residual > te.Tol) || r.Grad != nil || len(r.Y) != c.p.DimY() {
			t.Errorf("%s: %+v, Grad %v, Y %v", c.name, te, r.Grad, r.Y)
		}
		var ce *implicit.CurvatureError
		if errors.As(err, &ce) != c.curvature {
			t.Errorf("%s: errors.As(*implicit.CurvatureError) = %v", c.name, !c.curvature)
		}
		t.Logf("%s: %v", c.name, err)
	}
}

// TestBadInput requires every invalid argument to be an error before any
// oracle call.
func TestBadInput(t *testing.T) {
	_, p := quadratic(t, models.QuadraticSettings{DimX: 2, DimY: 3, Seed: 1})
	ok := []float64{0, 0}
	for _, c := range []struct {
		name string
		p    oracle.Problem
		x    []float64
		s    *bilevel.Settings
	}{
		{"nil problem", nil, ok, nil},
		{"nil *graph.Problem", (*graph.Problem)(nil), ok, nil},
		{"short x", p, []float64{0}, nil},
		{"NaN in x", p, []float64{0, math.NaN()}, nil},
		{"Inf in x", p, []float64{math.Inf(-1), 0}, nil},
		{"NaN Tol", p, ok, &bilevel.Settings{Tol: math.NaN()}},
		{"Inf Tol", p, ok, &bilevel.Settings{Tol: math.Inf(1)}},
		{"negative Tol", p, ok, &bilevel.Settings{Tol: -1e-8}},
		{"NaN LinearTol", p, ok, &bilevel.Settings{LinearTol: math.NaN()}},
		{"negative MaxInner", p, ok, &bilevel.Settings{MaxInner: -1}},
		{"negative MaxLinear", p, ok, &bilevel.Settings{MaxLinear: -1}},
		{"unknown Method", p, ok, &bilevel.Settings{Method: 7}},
		{"unknown Inner", p, ok, &bilevel.Settings{Inner: 9}},
		{"long Y0", p, ok, &bilevel.Settings{Y0: make([]float64, 4)}},
		{"NaN in Y0", p, ok, &bilevel.Settings{Y0: []float64{0, math.NaN(), 0}}},
	} {
		before := p.Stats()
		r, err := bilevel.Hypergradient(c.p, c.x, c.s)
		if err == nil || r != nil {
			t.Errorf("%s: result %v, error %v; want only an error", c.name, r, err)
		}
		if p.Stats() != before {
			t.Errorf("%s: oracles were called", c.name)
		}
		if c.p != nil && c.s != nil {
			if _, err := bilevel.SolveLower(c.p, c.x, c.s); err == nil {
				t.Errorf("%s: SolveLower accepted it", c.name)
			}
		}
	}
}

// TestNewtonCGLinearized checks that Newton-CG gives the same solution
// with the problem's linearized operator as with plain HVPs, on the
// logistic-type lower level of the ridge model, within the tolerance.
func TestNewtonCGLinearized(t *testing.T) {
	a := mat.NewSymDense(3, []float64{4, 1, 0, 1, 3, 1, 0, 1, 2})
	b := mat.NewDense(3, 2, []float64{1, 0, 0, 1, 1, 1})
	q, err := models.QuadraticOf(a, b, []float64{1, -1, 0.5}, []float64{0, 1, 0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Compile()
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.3, -0.7}
	lin, err := bilevel.SolveLower(p, x, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := bilevel.SolveLower(plainHVP{p}, x, nil)
	if err != nil {
		t.Fatal(err)
	}
	ys := q.YStar(nil, x)
	for _, y := range [][]float64{lin.Y, plain.Y} {
		if e := floats.Distance(y, ys, 2); e > bilevel.DefaultTol/0.5 { // λmin(A) > 0.5
			t.Errorf("‖y − y*‖ = %.2e", e)
		}
	}
}

// plainHVP hides the problem's optional oracles.
type plainHVP struct{ *graph.Problem }

func (plainHVP) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// TestCurvature checks the Lanczos estimate against the quadratic model's
// λmax = μ·Cond and refuses a maximum and bad input.
func TestCurvature(t *testing.T) {
	_, p := quadratic(t, models.QuadraticSettings{DimX: 2, DimY: 40, Cond: 50, Seed: 4})
	x, y := []float64{1, 2}, make([]float64, 40)
	l, err := bilevel.Curvature(p, x, y)
	if err != nil || math.Abs(l-50) > 1e-3*50 {
		t.Errorf("Curvature = %v, %v; want λmax = 50 within 0.1%%", l, err)
	}
	if _, err := bilevel.Curvature(nonconvex(t, false), []float64{0, 0, 0}, []float64{0, 0, 0}); err == nil {
		t.Error("Curvature at the maximum of a double well (∇yy g = −I) gave no error")
	}
	for _, c := range []struct {
		name string
		x, y []float64
	}{{"short x", x[:1], y}, {"short y", x, y[:3]}, {"NaN in y", x, append([]float64{math.NaN()}, y[1:]...)}} {
		if _, err := bilevel.Curvature(p, c.x, c.y); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
