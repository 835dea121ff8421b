package optim

import (
	"errors"
	"fmt"

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
// run's stream in step order, so the sweep replays them.
//
// Oracle calls per iteration: D GradG, 1 GradF, D MixedXY and D−1 HVPs;
// memory (D+1)·DimY floats for the stored iterates. With InnerBatch > 0 each
// inner step draws a fresh batch and the sweep reuses it at that step, so
// the result is the exact derivative of the minibatch unrolled map. A
// non-finite inner iterate fails the iteration with the Unroller's
// *unroll.NonFiniteError (y left at y_k^0) unless an oracle's NaN explains
// it, in which case Solve reports that oracle.
type ITDBiO struct {
	// Alpha is the inner step size α; 0 means 1/L with L estimated as for
	// AIDBiO.Alpha.
	Alpha float64
	// D is the number of unrolled inner steps; 0 means 10.
	D int
	// InnerBatch is the lower-level batch size of each inner step; 0 means
	// the whole data set.
	InnerBatch int
	// OuterBatch is the upper-level batch size for ∇f; 0: whole data set.
	OuterBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = ITDBiO{}

// Init implements Method.
func (m ITDBiO) Init(p Problem, st *State) error {
	err := firstErr(
		checkStep("ITDBiO.Alpha", m.Alpha),
		checkCount("ITDBiO.D", m.D),
		checkBatch(p, "ITDBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "ITDBiO.OuterBatch", m.OuterBatch, Upper),
		noProjectY("ITDBiO", st),
	)
	if err != nil {
		return err
	}
	if err := orDefault(m.Outer).Validate(); err != nil {
		return fmt.Errorf("ITDBiO.Outer: %w", err)
	}
	if m.Alpha == 0 {
		if _, err := curvature(p, st); err != nil {
			return err
		}
	}
	return nil
}

// itdProblem adapts a Problem to unroll.Problem. The reverse sweep also
// returns f(x, y^D), which ITD-BiO does not use, so F is not evaluated (it
// returns 0): an iteration costs no F call.
type itdProblem struct{ Problem }

func (itdProblem) F(x, y []float64, batch []int) float64 { return 0 }

// Iterate implements Method.
func (m ITDBiO) Iterate(p Problem, st *State) (Iteration, error) {
	d := m.D
	if d == 0 {
		d = 10
	}
	u := unroll.Unroller{
		Steps: d,
		Alpha: stepOrDefault(m.Alpha, st),
		Batch: func(int) []int { return st.Batch(p, Lower, m.InnerBatch) },
	}
	if err := u.Forward(p, st.X, st.Y); err != nil {
		return Iteration{}, err
	}
	copy(st.Y, u.Final())
	h := st.Work("itd.h", p.DimX())
	_, err := u.Backward(h, itdProblem{p}, st.Batch(p, Upper, m.OuterBatch))
	var nf *unroll.NonFiniteError
	if err != nil && !errors.As(err, &nf) {
		return Iteration{}, err
	}
	// A non-finite derivative (nf != nil) goes on into x, so that Solve's
	// finite guard names the oracle that produced it, if any, and x.
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
