package optim

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Tests of NBO-GD and NSBO-SGD (paper 002) and of the baselines SOBA,
// AmIGO, BSA and TTSA, on the quadratic problems of quadratic_test.go.

// nboStep runs one iteration of m from the state (x, y, v) with the given
// seed and returns the state after it. v = nil lets m.Init allocate it.
func nboStep(t *testing.T, p oracle.Problem, m Method, x, y, v []float64, seed uint64) *State {
	t.Helper()
	st := NewState(x, y, seed)
	if v != nil {
		st.V = append([]float64(nil), v...)
	}
	res, err := Resume(p, st, &Settings{MaxIter: 1, EvalEvery: -1}, m)
	if err != nil {
		t.Fatal(err)
	}
	return res.State
}

// nboRandVec returns n standard normal numbers.
func nboRandVec(rnd *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rnd.NormFloat64()
	}
	return v
}

// nboRelDist returns ‖a − b‖ / max(1, ‖b‖).
func nboRelDist(a, b []float64) float64 {
	return floats.Distance(a, b, 2) / math.Max(1, floats.Norm(b, 2))
}

// TestNBOConvergence: on the deterministic quadratic (dx = 3, dy = 5,
// eig(A) in [1, 2], μ = 0.5, L_Φ ≈ 4.06, ‖x*‖ ≈ 0.84), from x0 = 0, y0 = 0,
// with SGD β = 1/(2 L_Φ) and inner steps 1/2 = 1/L, each method reaches
// ‖x − x*‖ ≤ 1e-6 within its stated budget (measured first iteration in
// parentheses): NBO-GD T = 1: 200 (160); T = 3: 200 (151); T = 1 with the
// default γ = 1/L from Lanczos: 200 (160); T = 1 with BOX 1 (N0 = Q0 = 20):
// 200 (153); T = 0 and SOBA: 400 (302, the same run); AmIGO D = Q = 10:
// 200 (157).
//
// β = 1/L_Φ is too large for NBO and SOBA (measured: both diverge). Their
// d_x^k uses u^k, which was built from y^{k−1} (Algorithm 1 uses the values
// before the update), so x follows gradient descent on a hypergradient
// that lags by up to two iterations, and delayed gradient descent is
// stable only for β·λ_max(∇²Φ) < 2 sin(π/10) ≈ 0.62 at a lag of two.
// AmIGO updates y and v before using them and converges with β = 1/L_Φ
// too.
//
// BSA and TTSA use the randomized Neumann estimate of Ghadimi and Wang,
// which is random even with full batches, so they get a looser target:
// ‖x − x*‖ ≤ 0.15 after 2000 iterations with η = 1/4, N = 20, decaying
// steps (BSA: β_k = β/√(k+1); TTSA: its own (k+1)^(−3/5), (k+1)^(−2/5));
// measured over seeds 0..19: worst 0.087 (BSA), 0.062 (TTSA).
func TestNBOConvergence(t *testing.T) {
	p := testProblem(t)
	xs, _ := p.solution()
	sgd := SGD{LR: 1 / (2 * p.phiLipschitz())}
	for _, c := range []struct {
		name   string
		m      Method
		budget int
		tol    float64
	}{
		{"NBO-GD T=1", NBOGD{Gamma: 0.5, Outer: sgd}, 200, 1e-6},
		{"NBO-GD T=3", NBOGD{Gamma: 0.5, Updates: 4, Outer: sgd}, 200, 1e-6},
		{"NBO-GD default γ", NBOGD{Outer: sgd}, 200, 1e-6},
		{"NBO-GD BOX 1", NBOGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 20, Q0: 20}, Outer: sgd}, 200, 1e-6},
		{"NBO-GD T=0", NBOGD{Gamma: 0.5, Updates: 1, Outer: sgd}, 400, 1e-6},
		{"SOBA", SOBA{Rho: 0.5, Outer: sgd}, 400, 1e-6},
		{"AmIGO", AmIGO{Alpha: 0.5, Eta: 0.5, D: 10, Q: 10, Outer: sgd}, 200, 1e-6},
		{"BSA", BSA{Alpha: 0.5, D: 5, Eta: 0.25, N: 20, OuterDecay: 0.5, Outer: sgd}, 2000, 0.15},
		{"TTSA", TTSA{Beta: 0.5, Eta: 0.25, N: 20, Outer: sgd}, 2000, 0.15},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &MemoryRecorder{}
			res, err := Solve(p, make([]float64, 3), make([]float64, 5),
				&Settings{MaxIter: c.budget, Seed: 1, Metrics: distMetric(xs), Recorder: rec}, c.m)
			if err != nil {
				t.Fatal(err)
			}
			d := floats.Distance(res.X, xs, 2)
			if c.tol < 1e-3 { // deterministic methods: reached, and stays
				k := firstBelow(rec.Records, c.tol)
				if k < 0 || d > c.tol {
					t.Fatalf("‖x − x*‖ = %.3g after %d iterations, want ≤ %g", d, res.Iter, c.tol)
				}
				t.Logf("‖x − x*‖ ≤ %g at iteration %d; final %.3g", c.tol, k, d)
				return
			}
			if d > c.tol {
				t.Fatalf("‖x − x*‖ = %.3g after %d iterations, want ≤ %g", d, res.Iter, c.tol)
			}
			t.Logf("final ‖x − x*‖ = %.3g", d)
		})
	}
}

// TestNBOStochasticConvergence: on the stochastic quadratic (200 lower and
// 100 upper samples, relative noise 0.3, the means of the deterministic
// one), with SGD β = 1/(16 L_Φ) after 1000 iterations NSBO-SGD (T = 1,
// γ = 1/2, |B_1^{t,k}| = |B_1^k| = |B_4^k| = 64, |B_2^k| = 128,
// |B_3^k| = 50), SOBA (ρ = 1/2, batches 64 and 50) and AmIGO (D = Q = 5,
// batches 64 and 50) reach ‖x − x*‖ ≤ 5e-2; measured over seeds 0..19:
// worst 0.021, 0.023 and 0.021. BSA (D = 5) and TTSA, with η = 1/4, N = 20,
// batches 64 and 50, β = 1/(2 L_Φ) and decaying steps, reach ≤ 0.15 after
// 2000 iterations; measured worst 0.072 and 0.060.
func TestNBOStochasticConvergence(t *testing.T) {
	p := stochasticProblem(t)
	xs, _ := p.solution()
	lphi := p.phiLipschitz()
	small, large := SGD{LR: 1 / (16 * lphi)}, SGD{LR: 1 / (2 * lphi)}
	for _, c := range []struct {
		name  string
		m     Method
		iters int
		tol   float64
	}{
		{"NSBO-SGD", NSBOSGD{Gamma: 0.5, HessianBatch: 64, ResidualBatch: 64, GradBatch: 128, MixedBatch: 64, UpperBatch: 50, Outer: small}, 1000, 5e-2},
		{"SOBA", SOBA{Rho: 0.5, InnerBatch: 64, UpperBatch: 50, Outer: small}, 1000, 5e-2},
		{"AmIGO", AmIGO{Alpha: 0.5, Eta: 0.5, D: 5, Q: 5, InnerBatch: 64, HessianBatch: 64, MixedBatch: 64, UpperBatch: 50, Outer: small}, 1000, 5e-2},
		{"BSA", BSA{Alpha: 0.5, D: 5, Eta: 0.25, N: 20, OuterDecay: 0.5, InnerBatch: 64, HessianBatch: 64, MixedBatch: 64, UpperBatch: 50, Outer: large}, 2000, 0.15},
		{"TTSA", TTSA{Beta: 0.5, Eta: 0.25, N: 20, InnerBatch: 64, HessianBatch: 64, MixedBatch: 64, UpperBatch: 50, Outer: large}, 2000, 0.15},
	} {
		for _, seed := range []uint64{1, 2, 3} {
			res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: c.iters, Seed: seed, EvalEvery: -1}, c.m)
			if err != nil {
				t.Fatal(err)
			}
			d := floats.Distance(res.X, xs, 2)
			if d > c.tol {
				t.Errorf("%s seed %d: ‖x − x*‖ = %.3g after %d iterations, want ≤ %g", c.name, seed, d, c.iters, c.tol)
			}
			t.Logf("%s seed %d: ‖x − x*‖ = %.3g", c.name, seed, d)
		}
	}
}

// TestNBOOracleCounts checks each iteration's oracle calls against the
// papers:
//
//   - NBO-GD (paper 002 Algorithms 2–3): 1 GradG (∇2 g), 1 GradF (∇1 f and
//     ∇2 f together), 1 MixedXY and 1 + 2T HVPs: H u^k for d_u, then H v
//     and H w in each of the T rounds after the free first update. That is
//     paper 002's "2 gradients, 1 Jacobian-vector product, 1 + 2T HVPs".
//   - NSBO-SGD (Algorithms 4–5): the same, each HVP round on its own batch.
//   - SOBA (Dagréou et al. 2022): 1 GradG, 1 GradF, 1 HVP, 1 MixedXY (= NBO
//     with T = 0).
//   - AmIGO (Arbel and Mairal 2022): D GradG, 1 GradF, Q HVPs, 1 MixedXY.
//   - BSA (Ghadimi and Wang 2018): D GradG, 1 GradF, 1 MixedXY and p HVPs
//     with p uniform in {0..N−1} (mean (N−1)/2).
//   - TTSA (Hong et al. 2020): 1 GradG, 1 GradF, 1 MixedXY, p HVPs as BSA.
//
// None calls F, G or MixedYX. With explicit step sizes Init calls nothing,
// so iteration 0's record is the iteration alone.
func TestNBOOracleCounts(t *testing.T) {
	p := stochasticProblem(t)
	nbo := func(tt int) oracle.Calls { return oracle.Calls{GradG: 1, GradF: 1, MixedXY: 1, HVP: int64(1 + 2*tt)} }
	const bsaN = 6
	for _, c := range []struct {
		name   string
		m      Method
		want   oracle.Calls // HVP is the maximum for BSA and TTSA
		random bool         // HVP count drawn uniformly from 0..want.HVP
	}{
		{"NBO-GD T=0", NBOGD{Gamma: 0.5, Updates: 1, Outer: SGD{LR: 0.1}}, nbo(0), false},
		{"NBO-GD T=1 (default)", NBOGD{Gamma: 0.5, Outer: SGD{LR: 0.1}}, nbo(1), false},
		{"NBO-GD T=3", NBOGD{Gamma: 0.5, Updates: 4, Outer: SGD{LR: 0.1}}, nbo(3), false},
		{"NSBO-SGD T=2", NSBOSGD{Gamma: 0.5, Updates: 3, HessianBatch: 8, ResidualBatch: 8, GradBatch: 16, MixedBatch: 8, UpperBatch: 8, Outer: SGD{LR: 0.1}}, nbo(2), false},
		{"SOBA", SOBA{Rho: 0.5, InnerBatch: 8, UpperBatch: 8, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 1, GradF: 1, HVP: 1, MixedXY: 1}, false},
		{"AmIGO D=4 Q=3", AmIGO{Alpha: 0.5, Eta: 0.5, D: 4, Q: 3, InnerBatch: 8, HessianBatch: 8, MixedBatch: 8, UpperBatch: 8, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 4, GradF: 1, HVP: 3, MixedXY: 1}, false},
		{"BSA D=3 N=6", BSA{Alpha: 0.5, Eta: 0.5, D: 3, N: bsaN, InnerBatch: 8, HessianBatch: 8, MixedBatch: 8, UpperBatch: 8, Outer: SGD{LR: 0.01}}, oracle.Calls{GradG: 3, GradF: 1, HVP: bsaN - 1, MixedXY: 1}, true},
		{"TTSA N=6", TTSA{Beta: 0.5, Eta: 0.5, N: bsaN, InnerBatch: 8, HessianBatch: 8, MixedBatch: 8, UpperBatch: 8, Outer: SGD{LR: 0.01}}, oracle.Calls{GradG: 1, GradF: 1, HVP: bsaN - 1, MixedXY: 1}, true},
	} {
		const iters = 200
		rec := &MemoryRecorder{}
		_, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: iters, Seed: 5, Recorder: rec, EvalEvery: -1}, c.m)
		if err != nil {
			t.Fatal(err)
		}
		var prev oracle.Calls
		var hvps int64
		seen := map[int64]bool{}
		for _, r := range rec.Records {
			got := r.Calls.Sub(prev)
			prev = r.Calls
			if c.random {
				if got.HVP < 0 || got.HVP > c.want.HVP {
					t.Errorf("%s, iteration %d: %d HVPs, want 0..%d", c.name, r.Iter, got.HVP, c.want.HVP)
				}
				hvps += got.HVP
				seen[got.HVP] = true
				got.HVP = c.want.HVP
			}
			if got != c.want {
				t.Errorf("%s, iteration %d: calls %+v, want %+v", c.name, r.Iter, got, c.want)
				break
			}
		}
		if c.random {
			// The mean of 200 draws from Uniform{0..5} is 2.5 ± 0.12 (one
			// standard deviation), and every value should occur.
			if mean := float64(hvps) / iters; math.Abs(mean-2.5) > 0.5 || len(seen) != bsaN {
				t.Errorf("%s: mean %.3g HVPs per iteration over %d, %d distinct counts; want ≈ 2.5 and all %d", c.name, mean, iters, len(seen), bsaN)
			}
		}
	}
	if got := (NBOGD{}).T(); got != 1 {
		t.Errorf("NBOGD{}.T() = %d, want 1", got)
	}
	if got := (NSBOSGD{Updates: 1}).T(); got != 0 {
		t.Errorf("NSBOSGD{Updates: 1}.T() = %d, want 0", got)
	}

	// The warm-up of Appendix D runs in Init, once: BOX 1 costs N0 GradG,
	// Q0 HVPs and one GradF (∇2 f(x^0, y^0) is fixed); BOX 2 with an upper
	// batch draws ∇2 F afresh at each u-step (Q0 GradF). A resumed run does
	// not repeat it.
	for _, c := range []struct {
		name string
		m    Method
		want oracle.Calls
	}{
		{"BOX 1", NBOGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 7, Q0: 4, Beta0: 0.5}, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 7, HVP: 4, GradF: 1}},
		{"BOX 2", NSBOSGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 7, Q0: 4, Beta0: 0.5}, WarmupBatch: 20, WarmupUpperBatch: 10, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 7, HVP: 4, GradF: 4}},
		{"BOX 2 default β0", NSBOSGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 7, Q0: 4}, WarmupBatch: 20, Outer: SGD{LR: 0.1}}, oracle.Calls{GradG: 7, HVP: 4 + 5, GradF: 1}},
	} {
		st := NewState(make([]float64, 3), make([]float64, 5), 1)
		if err := c.m.Init(newCounter(p, &st.Calls), st); err != nil {
			t.Fatal(err)
		}
		if st.Calls != c.want {
			t.Errorf("%s: Init calls %+v, want %+v", c.name, st.Calls, c.want)
		}
		before := st.Calls
		if err := c.m.Init(newCounter(p, &st.Calls), st); err != nil {
			t.Fatal(err)
		}
		if st.Calls != before {
			t.Errorf("%s: a second Init (as on Resume) made calls %+v", c.name, st.Calls.Sub(before))
		}
	}
}

// TestNBOZeroIsSOBA: NBO-GD with T = 0 (Updates = 1) performs SOBA's step.
// Algorithm 3 with T = 0 is the single update t = −1 from [v, w] = 0, so
// v = γ ∇2 g, w = γ (H u − ∇2 f) and no HVP round: y ← y − γ ∇2 g,
// u ← u − γ (H u − ∇2 f), x ← x − α (∇1 f − ∇12 g u), all evaluated at the
// old (x, y, u) — SOBA's simultaneous step with ρ = γ (paper 002 Remark
// 2.1(i)). The identity needs SOBA's constant steps (InnerDecay =
// OuterDecay = 0), the same outer optimizer and full batches (SOBA draws
// one lower batch for ∇y G, the HVP and the mixed product, NSBO-SGD four
// independent ones). From random states (x, y, u), one iteration of each
// gives the same state to 1e-15 (relative; the arithmetic is the same, so
// in fact bit for bit), also after 50 iterations and with Adam.
func TestNBOZeroIsSOBA(t *testing.T) {
	p := testProblem(t)
	rnd := rand.New(rand.NewPCG(11, 12))
	for _, outer := range []Optimizer{SGD{LR: 0.1}, SGD{LR: 0.1, Momentum: 0.5}, Adam{LR: 0.05}} {
		nbo := NBOGD{Gamma: 0.4, Updates: 1, Outer: outer}
		soba := SOBA{Rho: 0.4, Outer: outer}
		for trial := range 5 {
			x, y, u := nboRandVec(rnd, 3), nboRandVec(rnd, 5), nboRandVec(rnd, 5)
			a := nboStep(t, p, nbo, x, y, u, 1)
			b := nboStep(t, p, soba, x, y, u, 1)
			for _, c := range []struct {
				name       string
				got, other []float64
			}{{"x", a.X, b.X}, {"y", a.Y, b.Y}, {"u", a.V, b.V}} {
				if d := nboRelDist(c.got, c.other); d > 1e-15 {
					t.Errorf("%T trial %d: %s differs by %.3g (NBO %v, SOBA %v)", outer, trial, c.name, d, c.got, c.other)
				}
			}
			if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.V, b.V) {
				t.Logf("%T trial %d: equal to 1e-15 but not bit for bit", outer, trial)
			}
			if a.Calls != b.Calls {
				t.Errorf("%T trial %d: calls %+v vs %+v", outer, trial, a.Calls, b.Calls)
			}
		}
		x0 := nboRandVec(rnd, 3)
		ra, err := Solve(p, x0, make([]float64, 5), &Settings{MaxIter: 50, EvalEvery: -1}, nbo)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := Solve(p, x0, make([]float64, 5), &Settings{MaxIter: 50, EvalEvery: -1}, soba)
		if err != nil {
			t.Fatal(err)
		}
		if d := nboRelDist(ra.X, rb.X); d > 1e-15 || nboRelDist(ra.State.V, rb.State.V) > 1e-15 {
			t.Errorf("%T: after 50 iterations x differs by %.3g", outer, d)
		}
	}
}

// TestNSBOFullBatchIsNBOGD: NSBO-SGD with every batch size 0 is NBO-GD,
// bit for bit, including the BOX 2 warm-up with whole-data batches, which
// is BOX 1.
func TestNSBOFullBatchIsNBOGD(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := []float64{0.3, -0.2, 1}, []float64{1, 0, -1, 0.5, 0}
	w := NBOWarmup{N0: 3, Q0: 4}
	a, err := Solve(p, x0, y0, &Settings{MaxIter: 30, EvalEvery: -1}, NBOGD{Updates: 3, Warmup: w, Outer: SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Solve(p, x0, y0, &Settings{MaxIter: 30, EvalEvery: -1, Seed: 9}, NSBOSGD{Updates: 3, Warmup: w, Outer: SGD{LR: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.State.V, b.State.V) || a.Calls != b.Calls {
		t.Errorf("NSBO-SGD with full batches: x = %v, NBO-GD x = %v; calls %+v vs %+v", b.X, a.X, b.Calls, a.Calls)
	}
}

// TestNBOStep checks one NBO-GD iteration on the quadratic (H = A, ∇2 g =
// Ay − Bx, ∇2 f = y − c) against closed forms:
//
//   - Algorithm 3 returns v = S_T (Ay − Bx) and w = S_T (Au − ∇2 f) with
//     S_T = γ Σ_{j=0}^{T} (I − γA)^j, for T = 0..3 (to 1e-13);
//   - with T = 80 and γ = 1/2 (‖I − γA‖ = 1/2) S_T = A⁻¹ to rounding, so
//     y^{k+1} = y*(x^k) (one exact Newton step on a quadratic lands on the
//     minimizer) and u^{k+1} = A⁻¹ ∇2 f(x^k, y^k);
//   - at y = y*(x), u = u*(x) = A⁻¹ ∇2 f(x, y*(x)), d_x = ∇Φ(x).
func TestNBOStep(t *testing.T) {
	p := testProblem(t)
	rnd := rand.New(rand.NewPCG(3, 4))
	x, y, u := nboRandVec(rnd, 3), nboRandVec(rnd, 5), nboRandVec(rnd, 5)
	gy, fy, au := make([]float64, 5), make([]float64, 5), make([]float64, 5)
	p.GradG(nil, gy, x, y, nil)
	p.GradF(nil, fy, x, y, nil)
	p.HVP(au, x, y, u, nil)
	du := make([]float64, 5)
	floats.SubTo(du, au, fy)
	const gamma = 0.5
	for _, tt := range []int{0, 1, 2, 3, 80} {
		// S_T = γ Σ_{j=0}^{T} (I − γA)^j, by S ← γI + (I − γA) S.
		var s, m, tmp mat.Dense
		eye := mat.NewDiagDense(5, []float64{1, 1, 1, 1, 1})
		m.Scale(-gamma, p.a)
		m.Add(&m, eye)
		s.Scale(gamma, eye)
		for range tt {
			tmp.Mul(&m, &s)
			s.Scale(gamma, eye)
			s.Add(&s, &tmp)
		}
		wantY, wantU := make([]float64, 5), make([]float64, 5)
		var sv mat.VecDense
		sv.MulVec(&s, mat.NewVecDense(5, append([]float64(nil), gy...)))
		floats.SubTo(wantY, y, sv.RawVector().Data)
		sv.MulVec(&s, mat.NewVecDense(5, append([]float64(nil), du...)))
		floats.SubTo(wantU, u, sv.RawVector().Data)

		st := nboStep(t, p, NBOGD{Gamma: gamma, Updates: tt + 1, Outer: SGD{LR: 0.1}}, x, y, u, 1)
		if d := nboRelDist(st.Y, wantY); d > 1e-13 {
			t.Errorf("T = %d: y^{k+1} off the closed form by %.3g", tt, d)
		}
		if d := nboRelDist(st.V, wantU); d > 1e-13 {
			t.Errorf("T = %d: u^{k+1} off the closed form by %.3g", tt, d)
		}
		if tt != 80 {
			continue
		}
		var ystar, ustar mat.VecDense
		bx := make([]float64, 5)
		matVec(bx, 1, p.b.RawMatrix().Data, 5, 3, x)
		if err := ystar.SolveVec(p.a, mat.NewVecDense(5, bx)); err != nil {
			t.Fatal(err)
		}
		if err := ustar.SolveVec(p.a, mat.NewVecDense(5, append([]float64(nil), fy...))); err != nil {
			t.Fatal(err)
		}
		if d := nboRelDist(st.Y, ystar.RawVector().Data); d > 1e-13 {
			t.Errorf("T = 80: ‖y^{k+1} − y*(x^k)‖ = %.3g, want an exact Newton step", d)
		}
		if d := nboRelDist(st.V, ustar.RawVector().Data); d > 1e-13 {
			t.Errorf("T = 80: ‖u^{k+1} − A⁻¹∇2 f‖ = %.3g", d)
		}
	}

	// d_x at (x, y*(x), u*(x)) is the exact hypergradient.
	ys, us := make([]float64, 5), make([]float64, 5)
	{
		bx := make([]float64, 5)
		matVec(bx, 1, p.b.RawMatrix().Data, 5, 3, x)
		var v mat.VecDense
		if err := v.SolveVec(p.a, mat.NewVecDense(5, bx)); err != nil {
			t.Fatal(err)
		}
		copy(ys, v.RawVector().Data)
		p.GradF(nil, fy, x, ys, nil)
		if err := v.SolveVec(p.a, mat.NewVecDense(5, append([]float64(nil), fy...))); err != nil {
			t.Fatal(err)
		}
		copy(us, v.RawVector().Data)
	}
	c := &capture{}
	nboStep(t, p, NBOGD{Gamma: gamma, Outer: c}, x, ys, us, 1)
	if d := floats.Distance(c.grad, p.hypergrad(x), 2); d > 1e-12 {
		t.Errorf("d_x at (y*, u*) is %v, ∇Φ = %v", c.grad, p.hypergrad(x))
	}
}

// TestBaselineHypergradients: from y = y*(x), SOBA's and NBO's x-direction
// at v = u*(x) and AmIGO's after Q = 200 steps from v = 0 equal ∇Φ(x) (to
// 1e-10), which pins the sign conventions (v ≈ +H⁻¹∇y f). The BSA/TTSA
// estimate averaged over its random number of factors p is the N-term
// Neumann series: for every p the estimate is N η (I − ηA)^p ∇y f, and
// the mean over p = 0..N−1 equals η Σ_{j<N} (I − ηA)^j ∇y f (to 1e-13).
func TestBaselineHypergradients(t *testing.T) {
	p := stochasticProblem(t)
	x := []float64{0.3, -1.2, 0.7}
	ys := make([]float64, 5)
	g := make([]float64, 5)
	for range 200 {
		p.GradG(nil, g, x, ys, nil)
		floats.AddScaled(ys, -0.5, g)
	}
	want := p.hypergrad(x)
	got := hypergradOf(t, p, x, ys, 0, func(o Optimizer) Method { return AmIGO{Alpha: 0.5, Eta: 0.5, D: 1, Q: 200, Outer: o} })
	if d := floats.Distance(got, want, 2); d > 1e-10 {
		t.Errorf("AmIGO: ‖ĥ − ∇Φ‖ = %.3g", d)
	}
	// u*(x) from AmIGO's converged v.
	st := nboStep(t, p, AmIGO{Alpha: 0.5, Eta: 0.5, D: 1, Q: 200, Outer: &capture{}}, x, ys, nil, 0)
	for _, m := range []func(o Optimizer) Method{
		func(o Optimizer) Method { return SOBA{Rho: 0.5, Outer: o} },
		func(o Optimizer) Method { return NBOGD{Gamma: 0.5, Outer: o} },
		func(o Optimizer) Method { return NSBOSGD{Gamma: 0.5, Outer: o} },
	} {
		c := &capture{}
		nboStep(t, p, m(c), x, ys, st.V, 0)
		if d := floats.Distance(c.grad, want, 2); d > 1e-10 {
			t.Errorf("%T: ‖d_x − ∇Φ‖ = %.3g", m(c), d)
		}
	}

	// The randomized Neumann estimate, factor count by factor count.
	const n, eta = 7, 0.3
	b := nboRandVec(rand.New(rand.NewPCG(5, 6)), 5)
	hvp := func(dst, v []float64) { p.HVP(dst, x, ys, v, nil) }
	mean, series, r, hr, dst := make([]float64, 5), make([]float64, 5), make([]float64, 5), make([]float64, 5), make([]float64, 5)
	copy(r, b)
	for j := range n {
		draw := func(m int) int {
			if m != n {
				t.Fatalf("draw from {0..%d}, want {0..%d}", m-1, n-1)
			}
			return j
		}
		clear(dst) // a cold start
		if _, err := neumannSeries(n, eta, math.Inf(1), draw, implicit.Fixed(hvp))(dst, b); err != nil {
			t.Fatal(err)
		}
		floats.AddScaled(mean, 1.0/n, dst)
		floats.Add(series, r) // series = Σ_{i≤j} (I − ηA)^i b
		hvp(hr, r)
		floats.AddScaled(r, -eta, hr)
	}
	floats.Scale(eta, series)
	if d := nboRelDist(mean, series); d > 1e-13 {
		t.Errorf("mean of the randomized Neumann estimate over p = 0..%d is off the %d-term series by %.3g", n-1, n, d)
	}
}

// TestNBOWarmup: BOX 1 with N0 = Q0 = 40 and β0 = 1/2 (‖I − β0 A‖ ≤ 1/2)
// puts (y^0, u^0) at (y*(x^0), u*(x^0)) to 1e-10 before the first
// iteration.
func TestNBOWarmup(t *testing.T) {
	p := testProblem(t)
	x0 := []float64{0.5, -0.5, 1}
	st := NewState(x0, make([]float64, 5), 0)
	m := NBOGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 40, Q0: 40, Beta0: 0.5}, Outer: SGD{LR: 0.1}}
	if err := m.Init(p, st); err != nil {
		t.Fatal(err)
	}
	bx := make([]float64, 5)
	matVec(bx, 1, p.b.RawMatrix().Data, 5, 3, x0)
	var ys, us mat.VecDense
	if err := ys.SolveVec(p.a, mat.NewVecDense(5, bx)); err != nil {
		t.Fatal(err)
	}
	fy := make([]float64, 5)
	p.GradF(nil, fy, x0, ys.RawVector().Data, nil)
	if err := us.SolveVec(p.a, mat.NewVecDense(5, fy)); err != nil {
		t.Fatal(err)
	}
	if d := floats.Distance(st.Y, ys.RawVector().Data, 2); d > 1e-10 {
		t.Errorf("‖y^0 − y*(x^0)‖ = %.3g after BOX 1", d)
	}
	if d := floats.Distance(st.V, us.RawVector().Data, 2); d > 1e-10 {
		t.Errorf("‖u^0 − u*(x^0)‖ = %.3g after BOX 1", d)
	}
}

// nboResumeCases are runs that exercise every part of the State for the
// methods of this file: the random stream (minibatches, shuffled epochs,
// the random Neumann length), optimizer memories, u/v, the cached default
// step, the warm-up in Init (which a resumed run must not repeat) and the
// step schedules that depend on State.Iter.
func nboResumeCases() []struct {
	name   string
	m      Method
	s      Settings
	random bool // the run depends on the seed
} {
	return []struct {
		name   string
		m      Method
		s      Settings
		random bool
	}{
		{"NSBO-SGD Adam shuffled default γ BOX 2", NSBOSGD{Updates: 3, HessianBatch: 30, ResidualBatch: 30, GradBatch: 60, MixedBatch: 30, UpperBatch: 20,
			Warmup: NBOWarmup{N0: 5, Q0: 5}, WarmupBatch: 20, WarmupUpperBatch: 10, Outer: Adam{LR: 0.05}}, Settings{Seed: 42, Sampling: Shuffled}, true},
		{"NBO-GD momentum BOX 1", NBOGD{Gamma: 0.5, Warmup: NBOWarmup{N0: 3, Q0: 3}, Outer: SGD{LR: 0.1, Momentum: 0.9}}, Settings{Seed: 7}, false},
		{"SOBA decaying minibatch", SOBA{Rho: 0.5, InnerDecay: 0.4, OuterDecay: 0.6, InnerBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.2}}, Settings{Seed: 3}, true},
		{"AmIGO momentum minibatch", AmIGO{Alpha: 0.5, Eta: 0.5, D: 3, Q: 3, InnerBatch: 16, HessianBatch: 16, MixedBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.1, Momentum: 0.5}}, Settings{Seed: 4}, true},
		{"BSA decaying projected", BSA{D: 3, N: 8, OuterDecay: 0.5, InnerBatch: 16, HessianBatch: 16, MixedBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.2}},
			Settings{Seed: 5, ProjectX: mustBall([]float64{0, 0, 0}, 0.3)}, true},
		{"TTSA Adam full batch", TTSA{Beta: 0.5, Eta: 0.5, N: 8, Outer: Adam{LR: 0.05}}, Settings{Seed: 6}, true},
		{"TTSA horizon shuffled", TTSA{N: 5, Horizon: 20, InnerBatch: 16, HessianBatch: 16, MixedBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.5}}, Settings{Seed: 8, Sampling: Shuffled}, true},
	}
}

// TestNBOReproducible: a fixed seed gives the same run twice, bit for bit
// (x, y, v and every record); a different seed gives a different run when
// the method is random.
func TestNBOReproducible(t *testing.T) {
	p := stochasticProblem(t)
	for _, c := range nboResumeCases() {
		run := func(seed uint64) (*Result, []Record) {
			s := c.s
			s.MaxIter, s.Seed = 30, seed
			rec := &MemoryRecorder{}
			s.Recorder = rec
			res, err := Solve(p, []float64{0.1, 0.2, 0.3}, make([]float64, 5), &s, c.m)
			if err != nil {
				t.Fatal(err)
			}
			return res, rec.Records
		}
		a, ra := run(c.s.Seed)
		b, rb := run(c.s.Seed)
		if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.State.V, b.State.V) || a.Calls != b.Calls {
			t.Errorf("%s: two runs with seed %d differ: x %v vs %v", c.name, c.s.Seed, a.X, b.X)
		}
		for k := range ra {
			if math.Float64bits(ra[k].HypergradNorm) != math.Float64bits(rb[k].HypergradNorm) || math.Float64bits(ra[k].Upper) != math.Float64bits(rb[k].Upper) {
				t.Errorf("%s: records differ at iteration %d", c.name, k)
				break
			}
		}
		if d, _ := run(c.s.Seed + 1); c.random == sameBits(a.X, d.X) {
			t.Errorf("%s: seeds %d and %d gave x %v and %v (random method: %v)", c.name, c.s.Seed, c.s.Seed+1, a.X, d.X, c.random)
		}
	}
}

// TestNBOResume: a run stopped after 7 iterations, its State encoded,
// decoded and resumed to 20 iterations gives the same x, y, v and oracle
// counts, bit for bit, as an uninterrupted 20-iteration run.
func TestNBOResume(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	for _, c := range nboResumeCases() {
		full := c.s
		full.MaxIter = 20
		want, err := Solve(p, x0, y0, &full, c.m)
		if err != nil {
			t.Fatal(err)
		}
		part := c.s
		part.MaxIter = 7
		first, err := Solve(p, x0, y0, &part, c.m)
		if err != nil {
			t.Fatal(err)
		}
		blob, err := first.State.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := st.UnmarshalBinary(blob); err != nil {
			t.Fatal(err)
		}
		rest := c.s
		rest.MaxIter = 20
		rest.Seed = 999 // ignored by Resume
		got, err := Resume(p, &st, &rest, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if got.Iter != 20 || !sameBits(got.X, want.X) || !sameBits(got.Y, want.Y) || !sameBits(got.State.V, want.State.V) {
			t.Errorf("%s: resumed x = %v, uninterrupted x = %v", c.name, got.X, want.X)
		}
		if got.Calls != want.Calls {
			t.Errorf("%s: resumed calls %+v, uninterrupted %+v", c.name, got.Calls, want.Calls)
		}
	}
}

// TestNBOBadSettings: invalid settings of the methods of this file fail
// before any oracle call, with an error naming the setting.
func TestNBOBadSettings(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := make([]float64, 3), make([]float64, 5)
	sgd := SGD{LR: 0.1}
	ball5 := mustBall(make([]float64, 5), 1)
	for _, c := range []struct {
		name string
		s    Settings
		m    Method
		want string
	}{
		{"NBO γ", Settings{}, NBOGD{Gamma: -1, Outer: sgd}, "NBOGD.Gamma = -1"},
		{"NBO updates", Settings{}, NBOGD{Updates: -1, Outer: sgd}, "NBOGD.Updates = -1"},
		{"NBO Q0", Settings{}, NBOGD{Warmup: NBOWarmup{Q0: -2}, Outer: sgd}, "NBOGD.Warmup.Q0 = -2"},
		{"NBO β0", Settings{}, NBOGD{Warmup: NBOWarmup{Beta0: math.NaN()}, Outer: sgd}, "NBOGD.Warmup.Beta0 = NaN"},
		{"NBO outer", Settings{}, NBOGD{Outer: SGD{}}, "NBOGD.Outer: SGD.LR = 0"},
		{"NBO ProjectY", Settings{ProjectY: ball5}, NBOGD{Outer: sgd}, "remove Settings.ProjectY"},
		{"NSBO batch", Settings{}, NSBOSGD{GradBatch: 201, Outer: sgd}, "NumLower() = 200"},
		{"NSBO warm-up batch", Settings{}, NSBOSGD{WarmupUpperBatch: 101, Outer: sgd}, "NSBOSGD.WarmupUpperBatch = 101"},
		{"SOBA decay", Settings{}, SOBA{InnerDecay: math.NaN(), Outer: sgd}, "SOBA.InnerDecay = NaN"},
		{"SOBA ρ", Settings{}, SOBA{Rho: math.Inf(1), Outer: sgd}, "SOBA.Rho = +Inf"},
		{"AmIGO Q", Settings{}, AmIGO{Q: -1, Outer: sgd}, "AmIGO.Q = -1"},
		{"AmIGO batch", Settings{}, AmIGO{UpperBatch: 101, Outer: sgd}, "NumUpper() = 100"},
		{"BSA N", Settings{}, BSA{N: -3, Outer: sgd}, "BSA.N = -3"},
		{"BSA decay", Settings{}, BSA{OuterDecay: -1, Outer: sgd}, "BSA.OuterDecay = -1"},
		{"TTSA horizon", Settings{}, TTSA{Horizon: -1, Outer: sgd}, "TTSA.Horizon = -1"},
		{"TTSA ProjectY", Settings{ProjectY: ball5}, TTSA{Outer: sgd}, "remove Settings.ProjectY"},
	} {
		res, err := Solve(p, x0, y0, &c.s, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
			continue
		}
		if res != nil && res.Calls != (oracle.Calls{}) {
			t.Errorf("%s: %+v oracle calls before the error", c.name, res.Calls)
		}
	}
}

// nboBatchLog records the batch of every call of a quadratic's oracles.
type nboBatchLog struct {
	*quadratic
	calls []string // oracle names, in order
	sizes []int    // their batch sizes
	hvp   [][]int  // the HVP batches, in order
}

func (p *nboBatchLog) log(name string, batch []int) {
	p.calls = append(p.calls, name)
	p.sizes = append(p.sizes, len(batch))
}

func (p *nboBatchLog) GradG(dx, dy, x, y []float64, batch []int) {
	p.log("GradG", batch)
	p.quadratic.GradG(dx, dy, x, y, batch)
}

func (p *nboBatchLog) GradF(dx, dy, x, y []float64, batch []int) {
	p.log("GradF", batch)
	p.quadratic.GradF(dx, dy, x, y, batch)
}

func (p *nboBatchLog) HVP(dst, x, y, v []float64, batch []int) {
	p.log("HVP", batch)
	p.hvp = append(p.hvp, append([]int(nil), batch...))
	p.quadratic.HVP(dst, x, y, v, batch)
}

func (p *nboBatchLog) MixedXY(dst, x, y, v []float64, batch []int) {
	p.log("MixedXY", batch)
	p.quadratic.MixedXY(dst, x, y, v, batch)
}

// TestNSBOBatches: one NSBO-SGD iteration with T = 3 uses each batch where
// Algorithm 5 and eqs. 13–16 put it: ∇2 G on |B_2^k| samples, ∇F on
// |B_3^k|, the HVP of D_u on |B_1^k|, the mixed product on |B_4^k|, and in
// each of the T rounds one fresh batch B_1^{t,k} shared by H v and H w.
func TestNSBOBatches(t *testing.T) {
	p := &nboBatchLog{quadratic: stochasticProblem(t)}
	m := NSBOSGD{Gamma: 0.5, Updates: 4, HessianBatch: 7, ResidualBatch: 11, GradBatch: 13, MixedBatch: 17, UpperBatch: 19, Outer: SGD{LR: 0.1}}
	if _, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 1, EvalEvery: -1, Seed: 2}, m); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(p.calls))
	for i, c := range p.calls {
		got[i] = c + ":" + strconv.Itoa(p.sizes[i])
	}
	want := "GradG:13 GradF:19 MixedXY:17 HVP:11 HVP:7 HVP:7 HVP:7 HVP:7 HVP:7 HVP:7"
	if strings.Join(got, " ") != want {
		t.Fatalf("calls %s, want %s", strings.Join(got, " "), want)
	}
	for r := range 3 {
		v, w := p.hvp[1+r], p.hvp[4+r] // the rounds of v, then those of w
		if !slices.Equal(v, w) {
			t.Errorf("round %d: H v on %v, H w on %v, want one batch", r, v, w)
		}
		if r > 0 && slices.Equal(v, p.hvp[r]) {
			t.Errorf("round %d reuses the batch of round %d", r, r-1)
		}
	}
}
