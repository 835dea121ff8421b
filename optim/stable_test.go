package optim

import (
	"math"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// TestSTABLEDeterministic: on the deterministic quadratic (dx = 3, dy = 5,
// eig(A) in [1, 2], μ = 0.5, L_Φ ≈ 4.06) from x0 = 0, y0 = 0 with α = 1/L_Φ
// and β = 1/2 (= 1/L), STABLE reaches ‖x − x*‖ ≤ 1e-6 within 100 iterations
// (measured: 75 for every variant below, the rate of exact gradient
// descent on Φ, since y is kept on y*(x) by the correction of eq. 8b), also
// with the decaying schedule of Theorem 3 (K0 = 1000; measured 78) and
// through HessYY and HessXY. STABLEMatrixFree with 2 CG steps does the same
// (measured 75).
func TestSTABLEDeterministic(t *testing.T) {
	p := testProblem(t)
	xs, _ := p.solution()
	alpha := 1 / p.phiLipschitz()
	const budget, tol = 100, 1e-6
	for _, c := range []struct {
		name string
		p    oracle.Problem
		m    Method
	}{
		{"STABLE", p, STABLE{Alpha: alpha, Beta: 0.5}},
		{"STABLE default β τ μ", p, STABLE{Alpha: alpha}},
		{"STABLE decaying", p, STABLE{Alpha: alpha, Beta: 0.5, Schedule: STABLEDecaying, K0: 1000}},
		{"STABLE dense oracles", denseQuadratic{p}, STABLE{Alpha: alpha, Beta: 0.5}},
		{"STABLEMatrixFree N=2", p, STABLEMatrixFree{Alpha: alpha, Beta: 0.5, N: 2}},
	} {
		rec := &MemoryRecorder{}
		res, err := Solve(c.p, make([]float64, 3), make([]float64, 5),
			&Settings{MaxIter: budget, Metrics: distMetric(xs), Recorder: rec}, c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		k := firstBelow(rec.Records, tol)
		if k < 0 {
			t.Errorf("%s: ‖x − x*‖ = %.3g after %d iterations, want ≤ %g", c.name, floats.Distance(res.X, xs, 2), res.Iter, tol)
			continue
		}
		t.Logf("%s: ‖x − x*‖ ≤ %g at iteration %d; final %.3g", c.name, tol, k, floats.Distance(res.X, xs, 2))
	}
}

// TestSTABLEStochastic: on the stochastic quadratic (200 lower and 100
// upper samples, relative noise 0.1, the means of the deterministic one)
// with batches of 10 lower and 10 upper samples (two "samples" per
// iteration of 10 each), after 2000 iterations ‖x − x*‖ ≤ 2e-2 for STABLE
// with the decaying schedule of Theorem 3 (α = 0.2, β = 0.5, K0 = 50;
// measured worst over seeds 0..9: 8.3e-3) and ≤ 5e-2 with constant steps
// (α = 0.05, β = 0.1; worst 2.8e-2, a noise floor) and for
// STABLEMatrixFree (worst 3.5e-2).
func TestSTABLEStochastic(t *testing.T) {
	p := newQuadratic(t, 3, 5, 200, 100, 0.1, 1, 2, 0.5, 1)
	xs, _ := p.solution()
	for _, c := range []struct {
		name string
		m    Method
		tol  float64
	}{
		{"STABLE decaying", STABLE{Alpha: 0.2, Beta: 0.5, Schedule: STABLEDecaying, K0: 50, LowerBatch: 10, UpperBatch: 10}, 2e-2},
		{"STABLE constant", STABLE{Alpha: 0.05, Beta: 0.1, LowerBatch: 10, UpperBatch: 10}, 5e-2},
		{"STABLEMatrixFree", STABLEMatrixFree{Alpha: 0.05, Beta: 0.1, N: 5, LowerBatch: 10, UpperBatch: 10}, 5e-2},
	} {
		for _, seed := range []uint64{1, 2, 3} {
			res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 2000, Seed: seed, EvalEvery: -1}, c.m)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			d := floats.Distance(res.X, xs, 2)
			if d > c.tol {
				t.Errorf("%s, seed %d: ‖x − x*‖ = %.3g after 2000 iterations, want ≤ %g", c.name, seed, d, c.tol)
			}
			t.Logf("%s, seed %d: ‖x − x*‖ = %.3g", c.name, seed, d)
		}
	}
}

// TestSTABLEStep checks one iteration against closed forms. From
// (x, y*(x)) with full batches the estimates are exact at k = 0, so the
// direction d^0 = (x^0 − x^1)/α is ∇Φ(x) (eq. 5 at y*), and because
// y*(x) = A⁻¹Bx is linear and ∇y g(x, y*) = 0, the correction of eq. 8b
// (feature F1) puts y^1 exactly on y*(x^1). STABLEMatrixFree with N = DimY
// CG steps gives the same step. State.V is (∇yy g)⁻¹ ∇y f.
func TestSTABLEStep(t *testing.T) {
	p := stochasticProblem(t)
	x := []float64{0.3, -1.2, 0.7}
	ystar := func(x []float64) []float64 {
		y, g := make([]float64, 5), make([]float64, 5)
		for range 300 {
			p.GradG(nil, g, x, y, nil)
			floats.AddScaled(y, -0.5, g)
		}
		return y
	}
	y := ystar(x)
	want := p.hypergrad(x)
	const alpha = 0.1
	for _, m := range []Method{
		STABLE{Alpha: alpha, Beta: 0.5},
		STABLEMatrixFree{Alpha: alpha, Beta: 0.5, N: 5},
	} {
		res, err := Solve(p, x, y, &Settings{MaxIter: 1, EvalEvery: -1}, m)
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float64, 3)
		floats.SubTo(d, x, res.X)
		floats.Scale(1/alpha, d)
		if e := floats.Distance(d, want, 2); e > 1e-9 {
			t.Errorf("%T: d^0 = %v, ∇Φ(x) = %v (‖Δ‖ = %.3g)", m, d, want, e)
		}
		if e := floats.Distance(res.Y, ystar(res.X), 2); e > 1e-12 {
			t.Errorf("%T: ‖y^1 − y*(x^1)‖ = %.3g, want ≤ 1e-12", m, e)
		}
		fy, av := make([]float64, 5), make([]float64, 5)
		p.GradF(nil, fy, x, y, nil)
		p.HVP(av, x, y, res.State.V, nil)
		if e := floats.Distance(av, fy, 2); e > 1e-12 {
			t.Errorf("%T: ‖∇yy g V − ∇y f‖ = %.3g", m, e)
		}
	}
}

// TestSTABLEMatrixFreeFollowsSTABLE: with full batches, N = DimY CG steps,
// and STABLE's recursion and projections inactive (τ = 1, μ below the
// spectrum, no C_gxy), the matrix-free variant follows STABLE: after 40
// iterations from (0, 0) the iterates agree to 1e-10.
func TestSTABLEMatrixFreeFollowsSTABLE(t *testing.T) {
	p := testProblem(t)
	s := &Settings{MaxIter: 40, EvalEvery: -1}
	a, err := Solve(p, make([]float64, 3), make([]float64, 5), s, STABLE{Alpha: 0.2, Beta: 0.4, Tau: 1, Mu: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Solve(p, make([]float64, 3), make([]float64, 5), s, STABLEMatrixFree{Alpha: 0.2, Beta: 0.4, N: 5})
	if err != nil {
		t.Fatal(err)
	}
	if dx, dy := floats.Distance(a.X, b.X, 2), floats.Distance(a.Y, b.Y, 2); dx > 1e-10 || dy > 1e-10 {
		t.Errorf("‖Δx‖ = %.3g, ‖Δy‖ = %.3g after 40 iterations, want ≤ 1e-10", dx, dy)
	}
}

// TestSTABLESchedules: STABLEConstant keeps the steps; STABLEDecaying with
// the defaults gives β_k = τ_k = 1/(K0 + k) with K0 = 1/β (eq. 30a) and
// α_k/β_k = α/β, and with τ set scales it by K0/(K0 + k).
func TestSTABLESchedules(t *testing.T) {
	st := NewState(nil, nil, 0)
	m := STABLE{Alpha: 0.05, Beta: 0.25}
	for _, k := range []int{0, 7} {
		if a, b, tau := m.Steps(k, st); a != 0.05 || b != 0.25 || tau != 0.25 {
			t.Errorf("constant, k = %d: α, β, τ = %v, %v, %v; want 0.05, 0.25, 0.25", k, a, b, tau)
		}
	}
	m.Schedule = STABLEDecaying
	for _, k := range []int{0, 1, 10, 1000} {
		a, b, tau := m.Steps(k, st)
		want := 1 / (4 + float64(k))
		if math.Abs(b-want) > 1e-15 || math.Abs(tau-want) > 1e-15 || math.Abs(a/b-0.2) > 1e-12 {
			t.Errorf("decaying, k = %d: α, β, τ = %v, %v, %v; want β = τ = %v, α = β/5", k, a, b, tau, want)
		}
	}
	m.K0, m.Tau = 10, 0.5
	if _, b, tau := m.Steps(10, st); math.Abs(b-0.125) > 1e-15 || math.Abs(tau-0.25) > 1e-15 {
		t.Errorf("decaying K0 = 10, k = 10: β, τ = %v, %v; want 0.125, 0.25", b, tau)
	}
}
