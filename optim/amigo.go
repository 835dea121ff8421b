package optim

import (
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// AmIGO is the amortized implicit gradient optimizer of Arbel and Mairal,
// "Amortized implicit differentiation for stochastic bilevel optimization"
// (ICLR 2022, Algorithm 1 with SGD inner solvers, "AmIGO-GD"). That paper
// is not in shared/papers; paper 002 (Sec. 4.1, Table 1) compares against
// it. Iteration k, warm-starting both inner problems from iteration k−1:
//
//	y ← y − α ∇y G(x_k, y; S_t),                 t = 1..D   (SGD on g(x_k, ·))
//	b = ∇y F(x_k, y; D_F)
//	v ← v − η (∇yy G(x_k, y; B_i) v − b),        i = 1..Q   (SGD on ½ vᵀHv − bᵀv)
//	ĥ = ∇x F(x_k, y; D_F) − ∇xy G(x_k, y; D_G) v
//	x_{k+1} = x_k − β ĥ   (or the Outer step)
//
// The y-steps come before the v-steps and ĥ uses the updated y and v
// (unlike NBO, which uses the values before its inner loop). Arbel and
// Mairal write z ≈ −H⁻¹∇y f and add the mixed product; this package's
// v = State.V is +H⁻¹ ∇y f. Every S_t, B_i and D_G is a fresh lower batch
// and D_F an upper batch, drawn in the order S_1..S_D, D_F, B_1..B_Q, D_G;
// ∇y F is sampled once per iteration and shared by the Q v-steps.
//
// It composes the inner loop (unroll.Descend), the estimate
// implicit.Estimate with Q steps of implicit.FixedPoint (SGD on the
// quadratic, warm-started) on a per-step source that draws B_i, and the
// outer optimizer. Oracle calls per iteration: D GradG, 1 GradF, Q HVPs,
// 1 MixedXY. Paper 002 runs it with D = Q ("AmIGO with Q = 10" and Q = 1,
// Sec. 4.1).
type AmIGO struct {
	// Alpha is the inner SGD step α on y; 0 means 1/L with L estimated as
	// for AIDBiO.Alpha.
	Alpha float64
	// Eta is the SGD step η on the linear system; 0 means 1/L.
	Eta float64
	// D and Q are the numbers of SGD steps on y and on v; 0 means 10 (the
	// Bilevel Optimization Benchmark's setting used by paper 002, App. C.2).
	D, Q int
	// InnerBatch is |S_t|, HessianBatch |B_i| and MixedBatch |D_G|, all
	// lower-level; UpperBatch is |D_F|, upper-level. 0 means the whole data
	// set.
	InnerBatch, HessianBatch, MixedBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). AmIGO's step is
	// SGD{LR: β}.
	Outer Optimizer
}

var _ Method = AmIGO{}

// Init implements Method. It allocates State.V (zeros) if missing.
func (m AmIGO) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "AmIGO", checks: []error{
		checkStep("AmIGO.Alpha", m.Alpha),
		checkStep("AmIGO.Eta", m.Eta),
		checkCount("AmIGO.D", m.D),
		checkCount("AmIGO.Q", m.Q),
		checkBatch(p, "AmIGO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "AmIGO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "AmIGO.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "AmIGO.UpperBatch", m.UpperBatch, Upper),
		noProjectY("AmIGO", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Alpha, m.Eta}, v: true}.run(p, st)
}

// Iterate implements Method.
func (m AmIGO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	sgd := &implicit.FixedPoint{Eta: stepOrDefault(m.Eta, st), MaxIter: count(m.Q, 10), Tol: -1, MaxGrowth: math.Inf(1)}
	return aidStep{steps: count(m.D, 10), alpha: stepOrDefault(m.Alpha, st), innerBatch: m.InnerBatch, upperBatch: m.UpperBatch,
		solve: solveWith(sgd, hessianSteps(p, st, m.HessianBatch)), cross: mixedFresh(p, st, m.MixedBatch),
		scale: 1, outer: m.Outer,
	}.iterate(p, st)
}
