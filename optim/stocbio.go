package optim

import (
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// StocBiO is stocBiO, the stochastic bilevel optimizer of paper 003 (Ji,
// Yang, Liang 2021, Algorithms 2 and 3). Iteration k:
//
//	y_k^t = y_k^{t−1} − α ∇y G(x_k, y_k^{t−1}; S_{t−1}),  t = 1..D, from y_k^0 = y_{k−1}^D
//	v_0 = ∇y F(x_k, y_k^D; D_F)
//	v_Q = η Σ_{i=0}^{Q} r_i,  r_Q = v_0,  r_{i−1} = r_i − η ∇yy G(x_k, y_k^D; B_i) r_i   (Algorithm 3, eq. 5)
//	ĥ∇Φ(x_k) = ∇x F(x_k, y_k^D; D_F) − ∇xy G(x_k, y_k^D; D_G) v_Q              (eq. 6)
//	x_{k+1} = x_k − β ĥ∇Φ(x_k)   (or the step of the Outer optimizer)
//
// Every S_t, B_i and D_G is a fresh, independent lower-level batch and D_F an
// upper-level batch, drawn in the order S_0..S_{D−1}, D_F, B_Q..B_1, D_G. v_Q
// is stored in State.V (not warm-started: Algorithm 3 restarts from v_0).
// Oracle calls per iteration: D GradG, 1 GradF, Q HVPs, 1 MixedXY.
//
// The series converges to (∇yy G)⁻¹ v_0 when 0 < η < 2/L; its truncation
// bias is (I − η∇yy G)^{Q+1} times the solution. Paper 003's analysis
// suggests |B_{Q−j}| decaying in j; here all B_i have HessianBatch samples.
// It composes the inner loop (unroll.Descend), the estimate
// implicit.Estimate with implicit.Neumann on a per-step source that draws
// B_i for each term, and the outer optimizer. The iteration fails with an
// *implicit.DivergenceError if a term grows beyond 10 times ‖v_0‖ (η too
// large for the batch Hessians), and with the solver's
// *implicit.BreakdownError on a NaN or ±Inf, whose oracle Solve names.
type StocBiO struct {
	// Alpha is the inner SGD step size α; 0 means 1/L with L estimated as
	// for AIDBiO.Alpha (on the whole lower data set, once per run).
	Alpha float64
	// D is the number of inner SGD steps; 0 means 10.
	D int
	// Eta is the Neumann step η; 0 means 1/L (estimated as for Alpha).
	Eta float64
	// Q is the number of Neumann terms (HVPs); 0 means 10.
	Q int
	// InnerBatch is |S_t|, HessianBatch |B_i| and MixedBatch |D_G|, all
	// lower-level; UpperBatch is |D_F|, upper-level. 0 means the whole data
	// set (which makes that part deterministic).
	InnerBatch, HessianBatch, MixedBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = StocBiO{}

// Init implements Method. It allocates State.V if missing.
func (m StocBiO) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "StocBiO", checks: []error{
		checkStep("StocBiO.Alpha", m.Alpha),
		checkStep("StocBiO.Eta", m.Eta),
		checkCount("StocBiO.D", m.D),
		checkCount("StocBiO.Q", m.Q),
		checkBatch(p, "StocBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "StocBiO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "StocBiO.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "StocBiO.UpperBatch", m.UpperBatch, Upper),
		noProjectY("StocBiO", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Alpha, m.Eta}, v: true}.run(p, st)
}

// Iterate implements Method.
func (m StocBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	neumann := &implicit.Neumann{Eta: stepOrDefault(m.Eta, st), Terms: count(m.Q, 10), LanczosSteps: -1}
	// Algorithm 3 starts from v = 0 (cold): a nonzero v would be a warm start.
	return aidStep{steps: count(m.D, 10), alpha: stepOrDefault(m.Alpha, st), innerBatch: m.InnerBatch, upperBatch: m.UpperBatch,
		solve: solveWith(neumann, hessianSteps(p, st, m.HessianBatch)), cross: mixedFresh(p, st, m.MixedBatch),
		cold: true, scale: 1, outer: m.Outer,
	}.iterate(p, st)
}
