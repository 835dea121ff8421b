package optim

import (
	"math"

	"github.com/gobilevel/bilevel/oracle"
)

// TTSA is the two-timescale stochastic approximation method of Hong, Wai,
// Wang and Yang, "A two-timescale stochastic algorithm framework for
// bilevel optimization: complexity analysis and application to
// actor-critic" (arXiv:2007.05170, 2020; SIAM J. Optim. 2023),
// Algorithm 1. That paper is not in shared/papers; paper 000 (STABLE)
// restates it as its eq. 7a. Iteration k, a single loop:
//
//	y^{k+1} = y^k − β_k ∇y G(x^k, y^k; S)
//	ĥ = the randomized-Neumann estimate of BSA at (x^k, y^{k+1})
//	x^{k+1} = P_X(x^k − α_k ĥ)   (or the Outer step on s_k ĥ)
//
// with the hypergradient estimate of Ghadimi and Wang (see BSA): p ~
// Uniform{0..N−1}, v = N η Π_{n=1}^{p} (I − η ∇yy G(B_n)) ∇y F(D_F),
// ĥ = ∇x F(D_F) − ∇xy G(D_G) v. Paper 000's eq. 7a evaluates ĥ at y^k;
// here it is evaluated at y^{k+1}, the order of Hong et al.'s Algorithm 1
// as recalled (the two differ by one inner step).
//
// The two timescales are those of Hong et al.'s analysis for a smooth
// (weakly convex) outer problem: α ∝ K^(−3/5) and β ∝ K^(−2/5), so that
// α_k/β_k → 0. With Horizon = K > 0 the steps are the constants
// β_k = Beta·K^(−2/5) and s_k = K^(−3/5) (the theorem's fixed-horizon
// form); with Horizon = 0 they decay, β_k = Beta·(k+1)^(−2/5) and
// s_k = (k+1)^(−3/5). The direction handed to Outer is s_k ĥ, so
// Outer = SGD{LR: α} gives α_k = α s_k.
//
// Batches are drawn in the order S, D_F, p, B_1..B_p, D_G. Oracle calls
// per iteration: 1 GradG, 1 GradF, p HVPs (random, mean (N−1)/2),
// 1 MixedXY. v is stored in State.V (not warm-started).
type TTSA struct {
	// Beta is the inner step scale β; 0 means 1/L with L estimated as for
	// AIDBiO.Alpha.
	Beta float64
	// Eta is the Neumann step η; 0 means 1/L.
	Eta float64
	// N bounds the number of Neumann factors (t_max in Hong et al.);
	// 0 means 10.
	N int
	// Horizon, if > 0, selects constant steps for a run of Horizon
	// iterations, as described above; 0 selects the decaying steps.
	Horizon int
	// InnerBatch is |S|, HessianBatch |B_n| and MixedBatch |D_G|, all
	// lower-level; UpperBatch is |D_F|, upper-level. 0 means the whole data
	// set. Hong et al. use single samples (batch sizes 1).
	InnerBatch, HessianBatch, MixedBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). TTSA's step is
	// SGD{LR: α} (projected onto Settings.ProjectX).
	Outer Optimizer
}

var _ Method = TTSA{}

// TTSA's step-size exponents (Hong et al. 2020, weakly convex outer
// problem): α ∝ K^(−3/5) outer, β ∝ K^(−2/5) inner.
const (
	ttsaInnerExponent = 0.4
	ttsaOuterExponent = 0.6
)

// Init implements Method. It allocates State.V if missing.
func (m TTSA) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "TTSA", checks: []error{
		checkStep("TTSA.Beta", m.Beta),
		checkStep("TTSA.Eta", m.Eta),
		checkCount("TTSA.N", m.N),
		checkCount("TTSA.Horizon", m.Horizon),
		checkBatch(p, "TTSA.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "TTSA.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "TTSA.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "TTSA.UpperBatch", m.UpperBatch, Upper),
		noProjectY("TTSA", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Beta, m.Eta}, v: true}.run(p, st)
}

// steps returns the inner step β_k and the outer scale s_k of iteration k.
func (m TTSA) steps(k int, st *State) (beta, scale float64) {
	t := float64(k + 1)
	if m.Horizon > 0 {
		t = float64(m.Horizon)
	}
	return stepOrDefault(m.Beta, st) * math.Pow(t, -ttsaInnerExponent), math.Pow(t, -ttsaOuterExponent)
}

// Iterate implements Method.
func (m TTSA) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	beta, scale := m.steps(st.Iter, st)
	a := bsaStep(p, st, stepOrDefault(m.Eta, st), count(m.N, 10), m.HessianBatch, m.MixedBatch)
	a.steps, a.alpha, a.innerBatch, a.upperBatch = 1, beta, m.InnerBatch, m.UpperBatch
	a.scale, a.outer = scale, m.Outer
	return a.iterate(p, st)
}
