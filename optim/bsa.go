package optim

import (
	"math"

	"github.com/gobilevel/bilevel/oracle"
)

// BSA is the bilevel stochastic approximation method of Ghadimi and Wang,
// "Approximation methods for bilevel programming" (arXiv:1802.02246, 2018,
// Algorithm 2 with the Hessian-inverse estimate of their Algorithm 3).
// That paper is not in shared/papers; paper 000 (STABLE, Table 1 and
// Sec. 5) and paper 003 (Table 2) use it as a baseline, and paper 004's
// eq. 9b is the same estimate (with its projection V2 = I and c̃ = 1).
// Iteration k:
//
//	y ← y − α ∇y G(x_k, y; S_t),  t = 1..D   (SGD on g(x_k, ·), warm-started)
//	p ~ Uniform{0, ..., N−1}
//	v = N η Π_{n=1}^{p} (I − η ∇yy G(x_k, y; B_n)) ∇y F(x_k, y; D_F)     (randomized Neumann)
//	ĥ = ∇x F(x_k, y; D_F) − ∇xy G(x_k, y; D_G) v
//	x_{k+1} = x_k − β_k ĥ   (or the Outer step on s_k ĥ)
//
// Over the draw of p and independent B_n, E[v] = η Σ_{j=0}^{N−1} (I − η
// H)^j ∇y F, the N-term Neumann series of H⁻¹ ∇y F (η ≤ 1/L; Ghadimi and
// Wang take η = 1/L_g), with bias (I − ηH)^N H⁻¹ ∇y F. The estimate is
// random even with full batches, so BSA needs a decreasing outer step (or a
// small constant one) to converge. v is stored in State.V (not
// warm-started).
//
// It composes the inner loop (unroll.Descend), the estimate
// implicit.Estimate with implicit.Neumann's randomized truncation
// (Neumann.Truncate) on a per-step source that draws B_n, and the outer
// optimizer. Batches are drawn in the order S_1..S_D, D_F, then p,
// B_1..B_p, D_G.
// Oracle calls per iteration: D GradG, 1 GradF, p HVPs (random, mean
// (N−1)/2), 1 MixedXY. Ghadimi and Wang use single samples (batch sizes 1)
// and let D grow with k; here D is fixed.
type BSA struct {
	// Alpha is the inner SGD step α; 0 means 1/L with L estimated as for
	// AIDBiO.Alpha.
	Alpha float64
	// D is the number of inner SGD steps; 0 means 10.
	D int
	// Eta is the Neumann step η (1/L_g in Ghadimi and Wang); 0 means 1/L.
	Eta float64
	// N bounds the number of Neumann factors, p ≤ N−1; 0 means 10.
	N int
	// OuterDecay scales the direction handed to Outer by (k+1)^(−OuterDecay),
	// so that Outer = SGD{LR: β} gives β_k = β (k+1)^(−OuterDecay); 0 means
	// a constant step (Ghadimi and Wang's nonconvex analysis fixes β ∝ 1/√K
	// over a horizon of K iterations; OuterDecay = 0.5 is the anytime form).
	OuterDecay float64
	// InnerBatch is |S_t|, HessianBatch |B_n| and MixedBatch |D_G|, all
	// lower-level; UpperBatch is |D_F|, upper-level. 0 means the whole data
	// set.
	InnerBatch, HessianBatch, MixedBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). BSA's step is
	// SGD{LR: β} (projected onto Settings.ProjectX).
	Outer Optimizer
}

var _ Method = BSA{}

// Init implements Method. It allocates State.V if missing.
func (m BSA) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "BSA", checks: []error{
		checkStep("BSA.Alpha", m.Alpha),
		checkStep("BSA.Eta", m.Eta),
		checkCount("BSA.D", m.D),
		checkCount("BSA.N", m.N),
		checkBaselineDecay("BSA.OuterDecay", m.OuterDecay),
		checkBatch(p, "BSA.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "BSA.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "BSA.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "BSA.UpperBatch", m.UpperBatch, Upper),
		noProjectY("BSA", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Alpha, m.Eta}, v: true}.run(p, st)
}

// Iterate implements Method.
func (m BSA) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	a := bsaStep(p, st, stepOrDefault(m.Eta, st), count(m.N, 10), m.HessianBatch, m.MixedBatch)
	a.steps, a.alpha, a.innerBatch, a.upperBatch = count(m.D, 10), stepOrDefault(m.Alpha, st), m.InnerBatch, m.UpperBatch
	a.scale, a.outer = baselineDecay(st.Iter, m.OuterDecay), m.Outer
	return a.iterate(p, st)
}

// bsaStep is the estimate part of an iteration of BSA and TTSA: the
// hypergradient estimate of Ghadimi and Wang 2018 (Algorithm 3) at the
// state's (x, y), from a cold v: it draws D_F (upper), then
// p ~ Uniform{0..n−1} from st.Rand, then p Hessian batches and the mixed
// batch, and stores v = n η Π_{i=1}^{p} (I − η H_i) ∇y F in st.V.
// Averaged over p this is the n-term Neumann series of H⁻¹ ∇y F.
func bsaStep(p oracle.Problem, st *State, eta float64, n, hessBatch, mixedBatch int) aidStep {
	return aidStep{solve: neumannSeries(n, eta, math.Inf(1), st.Rand().IntN, hessianSteps(p, st, hessBatch)),
		cross: mixedFresh(p, st, mixedBatch), cold: true}
}
