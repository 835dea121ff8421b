package optim

import (
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// ITDBiO is ITD-BiO, the iterative-differentiation method of paper 003
// (Ji, Yang, Liang 2021, Algorithm 1, ITD branch). Iteration k runs D inner
// gradient steps y_k^t = y_k^{t−1} − α ∇y g(x_k, y_k^{t−1}) from the warm
// start y_k^0 = y_{k−1}^D, storing y_k^0..y_k^{D−1}, and differentiates
// f(x_k, y_k^D(x_k)) through them by the reverse sweep of Proposition 2:
//
//	∂f(x, y^D)/∂x = ∇x f(x, y^D) − α Σ_{t=0}^{D−1} ∇xy g(x, y^t) Π_{j=t+1}^{D−1} (I − α ∇yy g(x, y^j)) ∇y f(x, y^D),
//
// computed as a ← ∇y f(x, y^D), then for t = D−1..0: ĥ ← ĥ − α ∇xy g(x, y^t) a
// and, if t > 0, a ← a − α ∇yy g(x, y^t) a. The warm start y^0 is treated as
// independent of x, as in the paper. Then x_{k+1} = x_k − β ĥ (or the Outer
// step).
//
// The forward pass and the sweep are unroll.Unroller (plain gradient
// descent, no truncation), whose Batch hook draws the inner batches from the
// run's stream in step order, so the sweep replays them. On a problem that
// declares oracles at a fixed outer point (oracle.Capabilities.FixX, as
// graph.Problem does), the steps on the whole data set (InnerBatch 0) use
// them: the part of g that does not depend on y (a representation layer)
// is evaluated once per iteration, and the sweep sums the mixed products
// where it meets the rest and goes back through it once. The result
// equals the per-step sweep's up to rounding and the oracle counts are
// the same.
//
// Oracle calls per iteration: D GradG, 1 GradF, D MixedXY and D−1 HVPs;
// memory (D+1)·DimY floats for the stored iterates. With InnerBatch > 0 each
// inner step draws a fresh batch and the sweep reuses it at that step, so
// the result is the exact derivative of the minibatch unrolled map. A
// non-finite inner iterate or derivative fails the iteration with the
// Unroller's *unroll.NonFiniteError, and Solve names the oracle that
// produced it, if one did.
type ITDBiO struct {
	// Alpha is the inner step size α; 0 means 1/L with L estimated as for
	// AIDBiO.Alpha.
	Alpha float64
	// D is the number of unrolled inner steps; 0 means 10.
	D int
	// InnerBatch is the lower-level batch size of each inner step; 0 means
	// the whole data set.
	InnerBatch int
	// UpperBatch is the upper-level batch size for ∇f; 0: whole data set.
	UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = ITDBiO{}

// Init implements Method.
func (m ITDBiO) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "ITDBiO", checks: []error{
		checkStep("ITDBiO.Alpha", m.Alpha),
		checkCount("ITDBiO.D", m.D),
		checkBatch(p, "ITDBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "ITDBiO.UpperBatch", m.UpperBatch, Upper),
		noProjectY("ITDBiO", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Alpha}}.run(p, st)
}

// Iterate implements Method.
func (m ITDBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	u := unroll.Unroller{
		Steps: count(m.D, 10),
		Alpha: stepOrDefault(m.Alpha, st),
		Batch: func(int) []int { return st.Batch(p, Lower, m.InnerBatch) },
	}
	if err := u.Forward(p, st.X, st.Y); err != nil {
		return Iteration{}, err
	}
	copy(st.Y, u.Final())
	h := st.Work("itd.h", p.DimX())
	if _, err := u.Backward(h, nil, p, st.Batch(p, Upper, m.UpperBatch)); err != nil {
		return Iteration{}, err
	}
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
