package optim

import (
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// The NBO framework of paper 002 (Dong, Yang, Yao, Zhang, "Efficient
// Curvature-Aware Hypergradient Approximation for Bilevel Optimization",
// ICML 2025, shared/papers/002_c6d05c6ad678f1f0.txt), Algorithm 1. At
// (x^k, y^k) the two linear systems that share the Hessian H_k = ∇22 g(x^k, y^k),
//
//	H_k v = ∇2 g(x^k, y^k)   (the Newton step on y, quadratic (8)),
//	H_k w = H_k u^k − ∇2 f(x^k, y^k)   (the warm-started correction of u, quadratic (10)),
//
// are solved inexactly by one inner solver run on both right-hand sides
// together, and then
//
//	y^{k+1} = y^k − v^k,   u^{k+1} = u^k − w^k,
//	d_x^k = ∇1 f(x^k, y^k) − ∇12 g(x^k, y^k) u^k,   x^{k+1} = x^k − α_k d_x^k.
//
// d_x^k uses y^k and u^k, not the updated values (Algorithm 1 step 5, the
// Jacobi order of the paper). u is State.V: u ≈ H⁻¹ ∇2 f, the sign
// convention of this package (∇Φ = ∇x f − ∇xy g v).
//
// An iteration composes implicit.Estimate at u^k (no solve) for d_x and
// two runs of implicit.FixedPoint, the inner solver of both systems, on one
// per-step source whose round t draws the batch that v and w share.

// NBOWarmup is the initialization of paper 002, Appendix D (BOX 1 for
// NBO-GD, BOX 2 for NSBO-SGD). Before the first iteration, at fixed x^0, it
// runs N0 gradient steps on y and then Q0 gradient steps on u for the
// quadratic (9):
//
//	y^{n+1,0} = y^{n,0} − β0 ∇2 g(x^0, y^{n,0}),                       n < N0
//	u^{q+1,0} = u^{q,0} − β0 (∇22 g(x^0, y^0) u^{q,0} − ∇2 f(x^0, y^0)),  q < Q0, from u^{0,0} = 0
//
// so that (y^0, u^0) lands in the neighbourhood of (y*(x^0), u*(x^0)) that
// Theorems 3.2 and 3.7 assume. The paper's N0, Q0 = Θ(κ log κ) formulas
// need constants (μ, L_{g,2}, L_1) a solver does not know, so they are set
// here as counts. The zero value does no warm-up, as in the paper's
// experiments ("we do not follow the initialization", Appendix C.2).
type NBOWarmup struct {
	// N0 and Q0 are the numbers of warm-up steps on y and on u.
	N0, Q0 int
	// Beta0 is the warm-up step β0; 0 means 1/L, with L estimated as for
	// AIDBiO.Alpha. BOX 1 and BOX 2 print β0 ≤ 1/L_{f,1}, but the proof of
	// Lemma D.1 (paper 002, just before eq. 19: "β0 ≤ 1/L_{g,1} ≤
	// 2/(μ + L_{g,1})") needs the smoothness of g: a typo, and the default
	// follows the proof.
	Beta0 float64
}

// active reports whether the warm-up does anything.
func (w NBOWarmup) active() bool { return w.N0 > 0 || w.Q0 > 0 }

// beta0 returns the warm-up step as a setting whose zero value means 1/L:
// Beta0, or 1 (no default needed) when the warm-up does nothing.
func (w NBOWarmup) beta0() float64 {
	if !w.active() {
		return 1
	}
	return w.Beta0
}

func (w NBOWarmup) validate(method string) error {
	return firstErr(
		checkCount(method+".Warmup.N0", w.N0),
		checkCount(method+".Warmup.Q0", w.Q0),
		checkStep(method+".Warmup.Beta0", w.Beta0),
	)
}

// NBOGD is NBO-GD, paper 002 Algorithm 2 with the subroutine GD(x^k, y^k,
// u^k; T) of Algorithm 3. Iteration k:
//
//	d_y = ∇2 g(x^k, y^k),   d_u = H_k u^k − ∇2 f(x^k, y^k)          (Sec. 2.3)
//	[v, w] ← 0;  for t = −1, 0, ..., T−1:  [v, w] ← (I − γ H_k)[v, w] + γ [d_y, d_u]   (eq. 11)
//	y^{k+1} = y^k − v,  u^{k+1} = u^k − w,  x^{k+1} = x^k − α d_x^k  (or the Outer step)
//
// Eq. 11 is printed with γ[d_u, d_u]; the v-update uses d_y = ∇2 g, as the
// proof of Lemma E.3 (paper 002, eq. 41's derivation) shows, and so does
// this code. v is the (T+1)-term Neumann approximation γ Σ_{j=0}^{T} (I −
// γH)^j d_y of the Newton step H⁻¹ ∇2 g.
//
// The first update (t = −1) starts from zero and costs no HVP, so an
// iteration calls 1 GradG (d_y), 1 GradF (∇1 f and ∇2 f at (x^k, y^k) in
// one call), 1 MixedXY (d_x) and 1 + 2T HVPs (H_k u^k for d_u, then H_k v
// and H_k w in each of the T remaining rounds): 2 gradients, 1
// Jacobian-vector product and 1 + 2T Hessian-vector products, the
// per-iteration cost behind Theorem 3.2(b) (K = O(κ³/ε) iterations with
// T = Θ(κ) give O(κ³/ε) gradients and O(κ⁴/ε) HVPs). H_k u^k is computed
// even when u^k = 0 (k = 0 without warm-up), unlike AIDBiO's cold start, so
// every iteration costs the same. A block HVP on [v, w] would make the 2T
// into T calls; this package's Problem has single-vector HVPs. The
// warm-up, if any, is a one-time cost in Init.
//
// With T = 0 (Updates = 1) this is the single-loop method of Dagréou et al.
// 2022 (paper 002 Remark 2.1(i)), the same step as SOBA with Rho = Gamma.
//
// Every oracle uses the whole data sets; NSBOSGD is the minibatch version
// and equals NBOGD when all its batch sizes are 0.
type NBOGD struct {
	// Gamma is the inner step γ of eq. 11. 0 means 1/L, with L the largest
	// eigenvalue of ∇yy g at (x0, y0) estimated as for AIDBiO.Alpha:
	// Theorem 3.2 takes γ ≤ 1/L_{g,1}.
	Gamma float64
	// Updates is T+1, the number of GD updates of Algorithm 3
	// (t = −1..T−1); an iteration costs T = Updates−1 HVP rounds. 0 means 2
	// (T = 1, the setting of all of paper 002's experiments, Sec. 4.1).
	// Theorem 3.2 asks for T ≥ Θ(κ).
	Updates int
	// Outer updates x with d_x; nil means Adam{} (LR 1e-3). The paper's
	// step x ← x − α d_x is SGD{LR: α} (Theorem 3.2: α = Θ(κ⁻³); Sec. 4.1
	// uses α = 1 on its synthetic problem). d_x^k uses u^k, which was built
	// from y^{k−1}, so x sees a hypergradient that lags by up to two
	// iterations and α must stay below AIDBiO's 1/L_Φ: on the quadratic of
	// the tests α = 1/L_Φ diverges and α = 1/(2 L_Φ) converges.
	Outer Optimizer
	// Warmup is the BOX 1 initialization (Appendix D); the zero value does
	// none.
	Warmup NBOWarmup
}

var _ Method = NBOGD{}

// T returns the number T of HVP rounds of Algorithm 3, Updates − 1.
func (m NBOGD) T() int { return nboUpdates(m.Updates) - 1 }

// Init implements Method. It allocates State.V (u) and, if Warmup is set,
// runs BOX 1 on a fresh run (State.V missing); a resumed run is left alone.
func (m NBOGD) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "NBOGD", checks: []error{
		checkStep("NBOGD.Gamma", m.Gamma),
		checkCount("NBOGD.Updates", m.Updates),
		m.Warmup.validate("NBOGD"),
		noProjectY("NBOGD", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Gamma, m.Warmup.beta0()}}.run(p, st)
	if err != nil {
		return err
	}
	return nboWarmup(p, st, m.Warmup, 0, 0)
}

// Iterate implements Method.
func (m NBOGD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	return nboIterate(p, st, stepOrDefault(m.Gamma, st), nboUpdates(m.Updates), nboBatches{}, orDefault(m.Outer))
}

// NSBOSGD is NSBO-SGD, paper 002 Algorithm 4 with the subroutine SGD(x^k,
// y^k, u^k; T) of Algorithm 5: NBO-GD with minibatch oracles. Iteration k
// draws the lower-level batches B_1^k, B_2^k, B_4^k and the upper-level
// batch B_3^k, and then
//
//	D_y = ∇2 G(x^k, y^k; B_2^k)                                   (eq. 13)
//	D_u = ∇22 G(x^k, y^k; B_1^k) u^k − ∇2 F(x^k, y^k; B_3^k)       (eq. 14)
//	D_x = ∇1 F(x^k, y^k; B_3^k) − ∇12 G(x^k, y^k; B_4^k) u^k       (eq. 15)
//	[v, w] ← 0;  for t = −1..T−1:  [v, w] ← (I − γ H^{t,k})[v, w] + γ [D_y, D_u],
//	                H^{t,k} = ∇22 G(x^k, y^k; B_1^{t,k})              (eq. 16)
//	y^{k+1} = y^k − v,  u^{k+1} = u^k − w,  x^{k+1} = x^k − α D_x   (or the Outer step)
//
// Each HVP round draws a fresh Hessian batch B_1^{t,k}, shared by v and w.
// The round t = −1 multiplies zero, so its batch is never drawn. Batches
// are drawn in the order B_1^k, B_2^k, B_3^k, B_4^k, B_1^{0,k}..B_1^{T−1,k}.
// B_3^k feeds both D_u and D_x, as in eqs. 14–15.
//
// Oracle calls per iteration are those of NBOGD: 1 GradG, 1 GradF,
// 1 MixedXY, 1 + 2T HVPs. With every batch size 0 it is NBOGD, bit for bit.
type NSBOSGD struct {
	// Gamma is the inner step γ of eq. 16; 0 means 1/L as for NBOGD.Gamma
	// (Theorem 3.7: γ ≤ 1/L_{g,1}).
	Gamma float64
	// Updates is T+1 as for NBOGD.Updates; 0 means 2 (T = 1, Sec. 4.2).
	Updates int
	// HessianBatch is |B_1^{t,k}| (each HVP round), ResidualBatch |B_1^k|
	// (the HVP in D_u), GradBatch |B_2^k| (D_y) and MixedBatch |B_4^k|
	// (D_x), all lower-level; UpperBatch is |B_3^k|, upper-level. 0 means
	// the whole data set. Paper 002 Sec. 4.2 uses |B_2^k| = 256 and 64 for
	// the others; Theorem 3.7 wants |B_2^k| the largest.
	HessianBatch, ResidualBatch, GradBatch, MixedBatch, UpperBatch int
	// Outer updates x with D_x; nil means Adam{} (LR 1e-3). The paper's
	// step is SGD{LR: α}.
	Outer Optimizer
	// Warmup is the BOX 2 initialization (Appendix D); the zero value does
	// none. Its y-steps draw a lower batch of WarmupBatch samples each
	// (|B_{0,n}|); each u-step draws WarmupBatch lower samples for the HVP
	// (|B_{0,q}|) and WarmupUpperBatch upper samples for ∇2 F (|B'_{0,q}|).
	// 0 means the whole data set (then ∇2 f is computed once).
	Warmup                        NBOWarmup
	WarmupBatch, WarmupUpperBatch int
}

var _ Method = NSBOSGD{}

// T returns the number T of HVP rounds of Algorithm 5, Updates − 1.
func (m NSBOSGD) T() int { return nboUpdates(m.Updates) - 1 }

// Init implements Method. It allocates State.V (u) and, if Warmup is set,
// runs BOX 2 on a fresh run (State.V missing); a resumed run is left alone.
func (m NSBOSGD) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "NSBOSGD", checks: []error{
		checkStep("NSBOSGD.Gamma", m.Gamma),
		checkCount("NSBOSGD.Updates", m.Updates),
		checkBatch(p, "NSBOSGD.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "NSBOSGD.ResidualBatch", m.ResidualBatch, Lower),
		checkBatch(p, "NSBOSGD.GradBatch", m.GradBatch, Lower),
		checkBatch(p, "NSBOSGD.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "NSBOSGD.UpperBatch", m.UpperBatch, Upper),
		m.Warmup.validate("NSBOSGD"),
		checkBatch(p, "NSBOSGD.WarmupBatch", m.WarmupBatch, Lower),
		checkBatch(p, "NSBOSGD.WarmupUpperBatch", m.WarmupUpperBatch, Upper),
		noProjectY("NSBOSGD", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Gamma, m.Warmup.beta0()}}.run(p, st)
	if err != nil {
		return err
	}
	return nboWarmup(p, st, m.Warmup, m.WarmupBatch, m.WarmupUpperBatch)
}

// Iterate implements Method.
func (m NSBOSGD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	b := nboBatches{
		hessian: m.HessianBatch, residual: m.ResidualBatch,
		grad: m.GradBatch, mixed: m.MixedBatch, upper: m.UpperBatch,
	}
	return nboIterate(p, st, stepOrDefault(m.Gamma, st), nboUpdates(m.Updates), b, orDefault(m.Outer))
}

// nboUpdates returns T+1 for the Updates setting (0 means 2).
func nboUpdates(u int) int { return count(u, 2) }

// nboBatches are the batch sizes of one NBO iteration (0: whole data set).
type nboBatches struct {
	hessian, residual, grad, mixed int // lower: B_1^{t,k}, B_1^k, B_2^k, B_4^k
	upper                          int // upper: B_3^k
}

// nboWarmup, on a fresh run (st.V == nil), allocates u = 0 and runs the
// warm-up w: N0 inner steps on y, then Q0 steps of implicit.FixedPoint on
// ∇yy g u = ∇y f, with a fresh lower batch per step and, when upperBatch >
// 0, a fresh upper batch for ∇y f per step (a per-step right-hand side);
// otherwise ∇2 f is computed once.
func nboWarmup(p oracle.Problem, st *State, w NBOWarmup, batch, upperBatch int) error {
	if st.V != nil {
		return nil
	}
	dy := p.DimY()
	st.V = make([]float64, dy)
	if !w.active() {
		return nil
	}
	beta := stepOrDefault(w.Beta0, st)
	if err := innerSteps(p, st, w.N0, beta, batch); err != nil {
		return err
	}
	if w.Q0 == 0 {
		return nil
	}
	fy := st.Work("nbo.warm.fy", dy)
	if upperBatch == 0 {
		p.GradF(nil, fy, st.X, st.Y, nil)
	}
	hvp := hessianSteps(p, st, batch)
	ops := func(k int) implicit.Operator {
		if upperBatch > 0 {
			p.GradF(nil, fy, st.X, st.Y, st.Batch(p, Upper, upperBatch))
		}
		return hvp(k)
	}
	sgd := &implicit.FixedPoint{Eta: beta, MaxIter: w.Q0, Tol: -1, MaxGrowth: math.Inf(1)}
	_, err := sgd.SolveSteps(st.V, ops, fy)
	return err
}

// nboIterate performs one iteration of Algorithm 4 (Algorithm 2 when every
// batch size is 0) with step gamma and updates = T+1 GD updates, returning
// ‖d_x‖.
func nboIterate(p oracle.Problem, st *State, gamma float64, updates int, b nboBatches, outer Optimizer) (Iteration, error) {
	dy := p.DimY()
	x, y, u := st.X, st.Y, st.V
	b1 := st.Batch(p, Lower, b.residual)
	b2 := st.Batch(p, Lower, b.grad)
	b3 := st.Batch(p, Upper, b.upper)
	b4 := st.Batch(p, Lower, b.mixed)

	dY := st.Work("nbo.dy", dy)
	p.GradG(nil, dY, x, y, b2) // D_y, eq. 13
	// D_x, eq. 15, at (x^k, y^k, u^k); the estimate leaves ∇2 F in optim.fy.
	h, err := estimate(st, u, implicit.System{
		Gradient: func(gx, gy []float64) { p.GradF(gx, gy, x, y, b3) },
		Cross:    mixedOn(p, st, b4),
	})
	if err != nil {
		return Iteration{}, err
	}
	dU := st.Work("nbo.du", dy)
	p.HVP(dU, x, y, u, b1)
	floats.Sub(dU, st.Work("optim.fy", dy)) // D_u, eq. 14

	// Algorithm 3/5: the update t = −1 from [v, w] = 0 is γ[D_y, D_u]; the
	// T rounds t = 0..T−1 are T steps of FixedPoint from there, v and w on
	// the same batch B_1^{t,k} of round t. The v-part uses D_y = ∇2 g,
	// although eq. 11 prints γ[d_u, d_u] (a typo, see the proof of Lemma E.3
	// in paper 002 and eq. 16).
	v, w := st.Work("nbo.v", dy), st.Work("nbo.w", dy)
	floats.ScaleTo(v, gamma, dY)
	floats.ScaleTo(w, gamma, dU)
	if updates > 1 {
		var rounds [][]int
		ops := func(t int) implicit.Operator {
			if t > len(rounds) { // the first ask for round t draws its batch
				rounds = append(rounds, st.Batch(p, Lower, b.hessian))
			}
			hb := rounds[t-1]
			return func(dst, v []float64) { p.HVP(dst, x, y, v, hb) }
		}
		gd := &implicit.FixedPoint{Eta: gamma, MaxIter: updates - 1, Tol: -1, MaxGrowth: math.Inf(1)}
		for _, sys := range [][2][]float64{{v, dY}, {w, dU}} {
			if _, err := gd.SolveSteps(sys[0], ops, sys[1]); err != nil {
				return Iteration{}, err
			}
		}
	}
	floats.Sub(y, v)
	floats.Sub(u, w)
	norm := floats.Norm(h, 2)
	st.StepX(outer, h)
	return Iteration{HypergradNorm: norm}, nil
}
