package optim

import (
	"math"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// penaltySolution returns x*_λ, the minimizer of F2SA's L*_λ on the
// quadratic: with y_λ(x) = (I + λA)⁻¹(c + λBx) and y*(x) = A⁻¹Bx,
// ∇L*_λ(x) = μx − λBᵀ(y_λ(x) − y*(x)) = 0 is the linear system
//
//	[μI + λBᵀ(A⁻¹ − λ(I + λA)⁻¹)B] x = λBᵀ(I + λA)⁻¹c.
func (p *quadratic) penaltySolution(lambda float64) []float64 {
	var ainv, m mat.Dense
	if err := ainv.Inverse(p.a); err != nil {
		panic(err)
	}
	m.Scale(lambda, p.a)
	for i := range p.dy {
		m.Set(i, i, m.At(i, i)+1)
	}
	if err := m.Inverse(&m); err != nil {
		panic(err)
	}
	var d, h, bt mat.Dense
	d.Scale(-lambda, &m)
	d.Add(&d, &ainv)
	bt.CloneFrom(p.b.T())
	h.Product(&bt, &d, p.b)
	h.Scale(lambda, &h)
	for i := range p.dx {
		h.Set(i, i, h.At(i, i)+p.mu)
	}
	var mc, rhs, x mat.VecDense
	mc.MulVec(&m, mat.NewVecDense(p.dy, p.c))
	rhs.MulVec(&bt, &mc)
	rhs.ScaleVec(lambda, &rhs)
	if err := x.SolveVec(&h, &rhs); err != nil {
		panic(err)
	}
	return mat.Col(nil, 0, &x)
}

// TestF2SAPenaltySolution: with a constant multiplier λ, F2SA on the
// deterministic quadratic converges to x*_λ, the stationary point of
// L*_λ (penaltySolution), not to x*: from x0 = 0 with T = 10, the default
// steps (γ = 1/L = 1/2, α = γ/(2λ)) and SGD at 1/L_Φ on x, ‖x − x*_λ‖ ≤
// 1e-12 after 300 iterations for λ = 10 (measured: 1e-8 at iteration 104,
// final 1.1e-15), with z (LowerIterate) at y*(x) and y at y_λ(x), the
// minimizer of f + λg, to 1e-12: Algorithm 1's updates to rounding. x*_λ is
// O(1/λ) from x*: λ‖x*_λ − x*‖ is 0.216, 0.224, 0.225 for λ = 10, 100,
// 1000.
func TestF2SAPenaltySolution(t *testing.T) {
	p := testProblem(t)
	xs, _ := p.solution()
	xl := p.penaltySolution(10)
	res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 300, EvalEvery: -1},
		F2SA{Lambda: 10, T: 10, Outer: SGD{LR: 1 / p.phiLipschitz()}})
	if err != nil {
		t.Fatal(err)
	}
	if d := floats.Distance(res.X, xl, 2); d > 1e-12 {
		t.Errorf("λ = 10: ‖x − x*_λ‖ = %.3g after 300 iterations, want ≤ 1e-12", d)
	}
	// z is y*(x) = A⁻¹Bx; y is y_λ(x) = (I + λA)⁻¹(c + λBx).
	var ys, yl, bx mat.VecDense
	bx.MulVec(p.b, mat.NewVecDense(3, res.X))
	if err := ys.SolveVec(p.a, &bx); err != nil {
		t.Fatal(err)
	}
	var m mat.Dense
	m.Scale(10, p.a)
	for i := range 5 {
		m.Set(i, i, m.At(i, i)+1)
	}
	bx.ScaleVec(10, &bx)
	bx.AddVec(&bx, mat.NewVecDense(5, p.c))
	if err := yl.SolveVec(&m, &bx); err != nil {
		t.Fatal(err)
	}
	if dz, dy := floats.Distance(F2SA{}.LowerIterate(res.State), ys.RawVector().Data, 2), floats.Distance(res.Y, yl.RawVector().Data, 2); dz > 1e-12 || dy > 1e-12 {
		t.Errorf("‖z − y*(x)‖ = %.3g, ‖y − y_λ(x)‖ = %.3g, want ≤ 1e-12", dz, dy)
	}
	for _, lambda := range []float64{10, 100, 1000} {
		if e := lambda * floats.Distance(p.penaltySolution(lambda), xs, 2); e < 0.2 || e > 0.23 {
			t.Errorf("λ = %g: λ‖x*_λ − x*‖ = %.4g, want in [0.2, 0.23] (O(1/λ))", lambda, e)
		}
	}
}

// TestFirstOrderConvergence: on the deterministic quadratic (x0 = 0,
// ‖x*‖ ≈ 0.84), F2SA with a growing multiplier λ_k = 10 (k+1)^(1/2),
// α_k ∝ (k+1)^(−1/2) (AlphaDecay = LambdaGrowth = 1/2: α_k λ_k constant),
// T = 10 and SGD at 1/L_Φ reaches ‖x − x*‖ ≤ 1e-3 within 1000 iterations
// (measured: 783); BOME with T = 10 and SGD ξ = 0.01 on both variables
// reaches ‖x − x*‖ ≤ 1e-2 within 1000 (measured: 825; 7.2e-3 at 1000):
// its error settles at about 0.56ξ (5.6e-3 for ξ = 0.01, 1.7e-2 for
// 0.03, 5.2e-2 for 0.1 after 10⁴ iterations), the bias of a constant
// step. On the stochastic quadratic (relative noise 0.1, batches of 20 of
// 200 lower and 100 upper samples) F2SA with the schedule of the paper's
// analysis for noise in both levels (a = 5/7, c = 4/7, λ_k ∝ k^(1/7)) and
// BOME as above reach ‖x − x*‖ ≤ 0.05 after 3000 iterations for seeds
// 1..3 (measured worst: 0.022 and 0.024). With λ_k ∝ k^(1/2) instead,
// F2SA's stochastic runs end at 0.47–0.78: λ_k multiplies the noise of
// y − z.
func TestFirstOrderConvergence(t *testing.T) {
	det, sto := testProblem(t), newQuadratic(t, 3, 5, 200, 100, 0.1, 1, 2, 0.5, 1)
	xs, _ := det.solution()
	beta := 1 / det.phiLipschitz()
	for _, c := range []struct {
		name  string
		p     oracle.Problem
		m     Method
		seeds []uint64
		iters int
		tol   float64
	}{
		{"F2SA deterministic", det, F2SA{Lambda: 10, AlphaDecay: 0.5, LambdaGrowth: 0.5, T: 10, Outer: SGD{LR: beta}}, []uint64{0}, 1000, 1e-3},
		{"BOME deterministic", det, BOME{T: 10, Outer: SGD{LR: 0.01}}, []uint64{0}, 1000, 1e-2},
		{"F2SA stochastic", sto, F2SA{Lambda: 10, AlphaDecay: 5. / 7, GammaDecay: 4. / 7, LambdaGrowth: 1. / 7, T: 10, LowerBatch: 20, UpperBatch: 20, Outer: SGD{LR: beta}}, []uint64{1, 2, 3}, 3000, 0.05},
		{"BOME stochastic", sto, BOME{T: 10, LowerBatch: 20, UpperBatch: 20, Outer: SGD{LR: 0.01}}, []uint64{1, 2, 3}, 3000, 0.05},
	} {
		for _, seed := range c.seeds {
			rec := &MemoryRecorder{}
			res, err := Solve(c.p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: c.iters, Seed: seed, Metrics: distMetric(xs), Recorder: rec}, c.m)
			if err != nil {
				t.Fatalf("%s seed %d: %v", c.name, seed, err)
			}
			d := floats.Distance(res.X, xs, 2)
			if d > c.tol {
				t.Errorf("%s seed %d: ‖x − x*‖ = %.3g after %d iterations, want ≤ %g", c.name, seed, d, c.iters, c.tol)
			}
			t.Logf("%s seed %d: ‖x − x*‖ = %.3g, first ≤ %g at iteration %d", c.name, seed, d, c.tol, firstBelow(rec.Records, c.tol))
		}
	}
}

// TestFirstOrderOracleCounts: per iteration, F2SA calls 2T + 2 GradG and
// T + 1 GradF, BOME T + 2 GradG and 1 GradF (and 2 G with BOMEValue), and
// neither calls HVP, a mixed product or a dense matrix, even for its
// default step sizes: Init estimates L by min(30, d_y) = 5 Lanczos steps on
// gradient differences (10 GradG), finding L = 2, the largest eigenvalue
// of A, to 1e-9.
func TestFirstOrderOracleCounts(t *testing.T) {
	p := stochasticProblem(t)
	for _, c := range []struct {
		name string
		m    Method
		init oracle.Calls
		iter oracle.Calls
	}{
		{"F2SA T=3 default steps", F2SA{T: 3, LowerBatch: 10, UpperBatch: 10, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 10}, oracle.Calls{GradG: 8, GradF: 4}},
		{"F2SA T=1 explicit steps", F2SA{Gamma: 0.5, Alpha: 0.02, T: 1, Outer: SGD{LR: 0.1}}, oracle.Calls{}, oracle.Calls{GradG: 4, GradF: 2}},
		{"BOME T=4 default α", BOME{T: 4, LowerBatch: 10, UpperBatch: 10, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 10}, oracle.Calls{GradG: 6, GradF: 1}},
		{"BOME T=2 value φ", BOME{Alpha: 0.5, T: 2, Phi: BOMEValue, Outer: SGD{LR: 0.1}}, oracle.Calls{}, oracle.Calls{GradG: 4, GradF: 1, G: 2}},
	} {
		rec := &MemoryRecorder{}
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 6, EvalEvery: -1, Recorder: rec}, c.m)
		if err != nil {
			t.Fatal(err)
		}
		prev := c.init
		for _, r := range rec.Records {
			if got := r.Calls.Sub(prev); got != c.iter {
				t.Errorf("%s, iteration %d: calls %+v, want %+v", c.name, r.Iter, got, c.iter)
			}
			prev = r.Calls
		}
		if l, ok := res.State.Scalars[keyCurvature]; c.init.GradG > 0 && (!ok || math.Abs(l-2) > 1e-9) {
			t.Errorf("%s: estimated L = %v, want 2", c.name, l)
		}
	}
}

// TestFirstOrderSettings: invalid settings fail in Init, before any
// oracle call, saying what to change.
func TestFirstOrderSettings(t *testing.T) {
	p := stochasticProblem(t)
	for _, c := range []struct {
		m    Method
		s    Settings
		want string
	}{
		{F2SA{Gamma: -1}, Settings{}, "F2SA.Gamma = -1"},
		{F2SA{Lambda: math.Inf(1)}, Settings{}, "F2SA.Lambda = +Inf"},
		{F2SA{T: -2}, Settings{}, "F2SA.T = -2"},
		{F2SA{GammaDecay: -0.5}, Settings{}, "F2SA.GammaDecay"},
		{F2SA{AlphaDecay: 0.2, LambdaGrowth: 0.3}, Settings{}, "LambdaGrowth ≤ AlphaDecay"},
		{F2SA{LowerBatch: 201}, Settings{}, "F2SA.LowerBatch = 201"},
		{F2SA{Outer: SGD{}}, Settings{}, "F2SA.Outer"},
		{F2SA{}, Settings{ProjectY: mustBall(make([]float64, 5), 1)}, "remove Settings.ProjectY"},
		{BOME{Eta: math.NaN()}, Settings{}, "BOME.Eta = NaN"},
		{BOME{Phi: 7}, Settings{}, "BOME.Phi = 7"},
		{BOME{UpperBatch: 101}, Settings{}, "BOME.UpperBatch = 101"},
		{BOME{Inner: SGD{Momentum: 2, LR: 1}}, Settings{}, "BOME.Inner"},
		{BOME{}, Settings{ProjectY: mustBall(make([]float64, 5), 1)}, "remove Settings.ProjectY"},
	} {
		s := c.s
		s.MaxIter = 2
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &s, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.m, err, c.want)
			continue
		}
		if res != nil && res.Calls != (oracle.Calls{}) {
			t.Errorf("%+v: %+v oracle calls before the error", c.m, res.Calls)
		}
	}
}
