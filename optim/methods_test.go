package optim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
)

// distMetric returns a Metrics hook giving ‖x − x*‖ as "err".
func distMetric(xs []float64) func(x, y []float64) map[string]float64 {
	return func(x, y []float64) map[string]float64 {
		return map[string]float64{"err": floats.Distance(x, xs, 2)}
	}
}

// firstBelow returns the first iteration whose recorded "err" is ≤ tol, or −1.
func firstBelow(recs []Record, tol float64) int {
	for _, r := range recs {
		if r.Metrics["err"] <= tol {
			return r.Iter
		}
	}
	return -1
}

// TestDeterministicConvergence: on the deterministic quadratic (dx = 3,
// dy = 5, eig(A) in [1, 2], μ = 0.5, L_Φ ≈ 4.06) with SGD β = 1/L_Φ from
// x0 = 0 (‖x*‖ ≈ 0.84), AID-BiO and ITD-BiO reach ‖x − x*‖ ≤ 1e-6 within
// 100 outer iterations (measured: 75; 36 with momentum 0.5).
//
// ITD-BiO's fixed point differs from x* by O((1 − αμ)^D): at a fixed point
// the reverse sweep gives ∇x f − ∇xy g H⁻¹(I − (I − αH)^D) ∇y f. With α = 1/2
// and μ_A = 1 that is a factor 2^−D: measured final ‖x − x*‖ is 3.8e-3 for
// D = 5, 1.1e-4 for D = 10, 1.1e-7 for D = 20 and 1.1e-10 for D = 30, so
// the test uses D = 30.
func TestDeterministicConvergence(t *testing.T) {
	p := testProblem(t)
	xs, _ := p.solution()
	beta := 1 / p.phiLipschitz()
	const budget, tol = 100, 1e-6
	for _, c := range []struct {
		name string
		m    Method
	}{
		{"AID-BiO", AIDBiO{Alpha: 0.5, D: 10, N: 10, Outer: SGD{LR: beta}}},
		{"AID-BiO default α=1/L", AIDBiO{D: 10, N: 10, Outer: SGD{LR: beta}}},
		{"AID-BiO-increasing c=3", AIDBiO{Alpha: 0.5, IncreasingD: 3, N: 10, Outer: SGD{LR: beta}}},
		{"AID-BiO momentum", AIDBiO{Alpha: 0.5, D: 10, N: 10, Outer: SGD{LR: beta, Momentum: 0.5}}},
		{"AID-BiO Adam", AIDBiO{Alpha: 0.5, D: 10, N: 10, Outer: Adam{LR: 0.01}}},
		{"ITD-BiO D=30", ITDBiO{Alpha: 0.5, D: 30, Outer: SGD{LR: beta}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &MemoryRecorder{}
			mi := budget
			if strings.Contains(c.name, "Adam") {
				mi = 3000 // Adam with a constant step converges slowly near x*
			}
			res, err := Solve(p, make([]float64, 3), make([]float64, 5),
				&Settings{MaxIter: mi, Metrics: distMetric(xs), Recorder: rec}, c.m)
			if err != nil {
				t.Fatal(err)
			}
			k := firstBelow(rec.Records, tol)
			if k < 0 {
				t.Fatalf("‖x − x*‖ = %.3g after %d iterations, want ≤ %g", floats.Distance(res.X, xs, 2), res.Iter, tol)
			}
			t.Logf("‖x − x*‖ ≤ %g at iteration %d; final %.3g", tol, k, floats.Distance(res.X, xs, 2))
		})
	}
}

// TestStocBiOConvergence: on the stochastic quadratic (200 lower and 100
// upper samples, relative noise 0.1, same means as the deterministic one),
// stocBiO with D = 5, Q = 20, η = α = 1/2, batches 64 (lower) and 50
// (upper), SGD β = 1/(16 L_Φ) reaches ‖x − x*‖ ≤ 1e-2 after 1000
// iterations (5000 GradG, 20000 HVP, 1000 MixedXY, 1000 GradF). Measured
// over seeds 0..19: worst 6.9e-3.
func TestStocBiOConvergence(t *testing.T) {
	p := newQuadratic(t, 3, 5, 200, 100, 0.1, 1, 2, 0.5, 1)
	xs, _ := p.solution()
	m := StocBiO{Alpha: 0.5, D: 5, Eta: 0.5, Q: 20, InnerBatch: 64, HessianBatch: 64, MixedBatch: 64, UpperBatch: 50,
		Outer: SGD{LR: 1 / (16 * p.phiLipschitz())}}
	for _, seed := range []uint64{1, 2, 3} {
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 1000, Seed: seed, EvalEvery: -1}, m)
		if err != nil {
			t.Fatal(err)
		}
		d := floats.Distance(res.X, xs, 2)
		if d > 1e-2 {
			t.Errorf("seed %d: ‖x − x*‖ = %.3g after 1000 iterations, want ≤ 1e-2", seed, d)
		}
		want := oracle.Calls{GradG: 5000, HVP: 20000, MixedXY: 1000, GradF: 1000}
		if res.Calls != want {
			t.Errorf("seed %d: calls %+v, want %+v", seed, res.Calls, want)
		}
		t.Logf("seed %d: ‖x − x*‖ = %.3g", seed, d)
	}
}

// capture is an Optimizer that records the hypergradient and leaves x alone.
type capture struct{ grad []float64 }

func (c *capture) Step(_ *OptState, _, grad []float64) { c.grad = append(c.grad[:0], grad...) }
func (c *capture) Validate() error                     { return nil }

// hypergradOf runs one iteration of m from (x, y) and returns its estimate.
func hypergradOf(t *testing.T, p oracle.Problem, x, y []float64, seed uint64, m func(o Optimizer) Method) []float64 {
	t.Helper()
	c := &capture{}
	if _, err := Solve(p, x, y, &Settings{MaxIter: 1, Seed: seed, EvalEvery: -1}, m(c)); err != nil {
		t.Fatal(err)
	}
	return c.grad
}

// TestHypergradients checks one-iteration estimates against references:
// AID-BiO (N = dy CG steps) and stocBiO with full batches and Q = 200 from
// y = y*(x) against the closed-form ∇Φ(x); ITD-BiO against central finite
// differences of the unrolled map x ↦ f(x, y^D(x)) (Proposition 2), also
// with minibatches, whose batches are replayed from the seed.
func TestHypergradients(t *testing.T) {
	p := stochasticProblem(t)
	x := []float64{0.3, -1.2, 0.7}
	ys := make([]float64, 5)
	{ // y*(x) = A⁻¹Bx by many GD steps on the full data.
		g := make([]float64, 5)
		for range 200 {
			p.GradG(nil, g, x, ys, nil)
			floats.AddScaled(ys, -0.5, g)
		}
	}
	want := p.hypergrad(x)
	for _, c := range []struct {
		name string
		m    func(o Optimizer) Method
	}{
		{"AID-BiO", func(o Optimizer) Method { return AIDBiO{Alpha: 0.5, D: 1, N: 5, Outer: o} }},
		{"stocBiO", func(o Optimizer) Method { return StocBiO{Alpha: 0.5, D: 1, Eta: 0.5, Q: 200, Outer: o} }},
	} {
		got := hypergradOf(t, p, x, ys, 0, c.m)
		if d := floats.Distance(got, want, 2); d > 1e-10 {
			t.Errorf("%s: ‖ĥ − ∇Φ‖ = %.3g, want ≤ 1e-10 (ĥ = %v, ∇Φ = %v)", c.name, d, got, want)
		}
	}

	y0 := []float64{1, -1, 0.5, 2, 0}
	const d, alpha = 7, 0.5
	for _, batch := range []int{0, 20} {
		var batches [][]int
		src := NewState(nil, nil, 9) // Solve's stream with Seed 9 draws the inner batches first
		for range d {
			batches = append(batches, src.Batch(p, Lower, batch))
		}
		unrolled := func(x []float64) float64 {
			y, g := append([]float64(nil), y0...), make([]float64, 5)
			for t := range d {
				p.GradG(nil, g, x, y, batches[t])
				floats.AddScaled(y, -alpha, g)
			}
			return p.F(x, y, nil)
		}
		ref := fd.Gradient(nil, unrolled, x, &fd.Settings{Formula: fd.Central, Step: 1e-5})
		got := hypergradOf(t, p, x, y0, 9, func(o Optimizer) Method {
			return ITDBiO{Alpha: alpha, D: d, InnerBatch: batch, Outer: o}
		})
		if dist := floats.Distance(got, ref, 2); dist > 1e-7 {
			t.Errorf("ITD-BiO batch %d: ‖ĥ − fd‖ = %.3g, want ≤ 1e-7 (ĥ = %v, fd = %v)", batch, dist, got, ref)
		}
	}
}

// TestOracleCountsPerIteration checks each iteration's oracle calls against
// paper 003: AID-BiO D GradG, 1 GradF, 1 MixedXY and N HVPs at k = 0 (cold
// start v = 0), N+1 afterwards (the extra one is the initial CG residual);
// ITD-BiO D GradG, 1 GradF, D MixedXY, D−1 HVPs; stocBiO D GradG, 1 GradF,
// Q HVPs, 1 MixedXY. No method calls F, G or MixedYX.
func TestOracleCountsPerIteration(t *testing.T) {
	p := stochasticProblem(t)
	aidInc := AIDBiO{Alpha: 0.5, IncreasingD: 2, N: 3}
	for _, c := range []struct {
		name string
		m    Method
		want func(k int) oracle.Calls
	}{
		{"AID-BiO D=4 N=3", AIDBiO{Alpha: 0.5, D: 4, N: 3, InnerBatch: 10, HessianBatch: 10, UpperBatch: 10}, func(k int) oracle.Calls {
			return oracle.Calls{GradG: 4, GradF: 1, MixedXY: 1, HVP: int64(3 + min(k, 1))}
		}},
		{"AID-BiO-increasing c=2", aidInc, func(k int) oracle.Calls {
			d, _ := aidInc.InnerSteps(k)
			return oracle.Calls{GradG: int64(d), GradF: 1, MixedXY: 1, HVP: int64(3 + min(k, 1))}
		}},
		{"ITD-BiO D=6", ITDBiO{Alpha: 0.5, D: 6, InnerBatch: 10}, func(int) oracle.Calls {
			return oracle.Calls{GradG: 6, GradF: 1, MixedXY: 6, HVP: 5}
		}},
		{"stocBiO D=5 Q=7", StocBiO{Alpha: 0.5, Eta: 0.5, D: 5, Q: 7, InnerBatch: 8, HessianBatch: 8, MixedBatch: 8, UpperBatch: 8}, func(int) oracle.Calls {
			return oracle.Calls{GradG: 5, GradF: 1, HVP: 7, MixedXY: 1}
		}},
	} {
		rec := &MemoryRecorder{}
		_, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 20, Recorder: rec}, withSGD(c.m))
		if err != nil {
			t.Fatal(err)
		}
		var prev oracle.Calls
		for _, r := range rec.Records {
			if got, want := r.Calls.Sub(prev), c.want(r.Iter); got != want {
				t.Errorf("%s, iteration %d: calls %+v, want %+v", c.name, r.Iter, got, want)
			}
			prev = r.Calls
		}
	}
	var got []int
	for _, k := range []int{0, 1, 15} {
		d, err := aidInc.InnerSteps(k)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if got[0] != 2 || got[1] != 3 || got[2] != 4 {
		t.Errorf("D_k = ⌈2 (k+1)^(1/4)⌉ for k = 0, 1, 15: got %v, want [2 3 4]", got)
	}

	// The default step size costs min(30, dy) = 5 Lanczos HVPs once, in Init.
	rec := &MemoryRecorder{}
	res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 4, Recorder: rec},
		StocBiO{D: 2, Q: 3, Outer: SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls.HVP != 5+4*3 {
		t.Errorf("stocBiO with default α, η: %d HVPs in 4 iterations, want 5 (Init) + 12", res.Calls.HVP)
	}
	if l := res.State.Scalars[keyCurvature]; math.Abs(l-2) > 1e-12 {
		t.Errorf("estimated L = %v, want 2 (the largest eigenvalue of A)", l)
	}
}

// withSGD sets an SGD outer optimizer on the paper-003 methods.
func withSGD(m Method) Method {
	o := SGD{LR: 0.1}
	switch m := m.(type) {
	case AIDBiO:
		m.Outer = o
		return m
	case ITDBiO:
		m.Outer = o
		return m
	case StocBiO:
		m.Outer = o
		return m
	}
	return m
}

// nanProblem returns NaN from the named oracle at outer iteration at,
// which it tracks by counting GradF calls (one per iteration, made before
// the HVPs and mixed products).
type nanProblem struct {
	*quadratic
	oracle string
	at     int
	gradF  int
}

func (p *nanProblem) GradF(dx, dy, x, y []float64, batch []int) {
	p.gradF++
	p.quadratic.GradF(dx, dy, x, y, batch)
}

func (p *nanProblem) poison(oracle string, dst []float64) {
	if oracle == p.oracle && p.gradF-1 == p.at {
		dst[1] = math.NaN()
	}
}

func (p *nanProblem) MixedXY(dst, x, y, v []float64, batch []int) {
	p.quadratic.MixedXY(dst, x, y, v, batch)
	p.poison("MixedXY", dst)
}

func (p *nanProblem) HVP(dst, x, y, v []float64, batch []int) {
	p.quadratic.HVP(dst, x, y, v, batch)
	p.poison("HVP", dst)
}

// TestNaNGuard: an oracle returning NaN at iteration 5 gives a
// *NonFiniteError naming iteration 5 and the oracle, and a Result holding
// the finite state before iteration 5. A solver that met the NaN reports
// it too, as its typed error (errors.As finds both), and no destination
// is set to NaN for the guard's sake: the state is named only when the NaN
// reached it by an update (the mixed product into x).
func TestNaNGuard(t *testing.T) {
	for _, c := range []struct {
		oracle string
		m      Method
		vr     string // the non-finite state variable named, if any
		solver any    // the solver's error, a pointer to its type; nil: none
	}{
		{"MixedXY", AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.1}}, "x", nil},
		{"HVP", AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.1}}, "", new(*implicit.BreakdownError)},
		{"HVP", StocBiO{Alpha: 0.5, Eta: 0.5, D: 3, Q: 3, InnerBatch: 5, HessianBatch: 5, Outer: SGD{LR: 0.1}}, "", new(*implicit.BreakdownError)},
		{"MixedXY", ITDBiO{Alpha: 0.5, D: 3, Outer: SGD{LR: 0.1}}, "", new(*unroll.NonFiniteError)},
		{"HVP", AmIGO{Alpha: 0.5, Eta: 0.5, D: 2, Q: 3, Outer: SGD{LR: 0.1}}, "", new(*implicit.BreakdownError)},
	} {
		p := &nanProblem{quadratic: stochasticProblem(t), oracle: c.oracle, at: 5}
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 20}, c.m)
		var nf *NonFiniteError
		if !errors.As(err, &nf) {
			t.Fatalf("%T/%s: error %v, want *NonFiniteError", c.m, c.oracle, err)
		}
		msg := err.Error()
		if nf.Iter != 5 || nf.Oracle != c.oracle || !strings.Contains(msg, "iteration 5") || !strings.Contains(msg, c.oracle) {
			t.Errorf("%T/%s: error %q (Iter %d, Oracle %q), want iteration 5 and %s", c.m, c.oracle, msg, nf.Iter, nf.Oracle, c.oracle)
		}
		if nf.Var != c.vr {
			t.Errorf("%T/%s: error %q names state variable %q, want %q", c.m, c.oracle, msg, nf.Var, c.vr)
		}
		if c.solver != nil && !errors.As(err, c.solver) {
			t.Errorf("%T/%s: error %q does not carry the solver's %T", c.m, c.oracle, msg, c.solver)
		}
		if res == nil || res.Status != Failure || res.State.Iter != 5 || res.Iter != 5 {
			t.Fatalf("%T/%s: result %+v, want Failure with the state after 5 iterations", c.m, c.oracle, res)
		}
		if name, _, _ := res.State.nonFinite(); name != "" {
			t.Errorf("%T/%s: Result.State has non-finite %s", c.m, c.oracle, name)
		}
		t.Log(msg)
	}
}
