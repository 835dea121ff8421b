package optim

import (
	"fmt"

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
// Oracle calls per iteration: D GradG, 1 GradF, D MixedXY and D−1 HVPs;
// memory D·DimY floats for the stored iterates. With InnerBatch > 0 each
// inner step draws a fresh batch and the sweep reuses it at that step, so
// the result is the exact derivative of the minibatch unrolled map.
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
		checkBatch("ITDBiO.InnerBatch", m.InnerBatch, p.NumLower(), Lower),
		checkBatch("ITDBiO.OuterBatch", m.OuterBatch, p.NumUpper(), Upper),
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

// Iterate implements Method.
func (m ITDBiO) Iterate(p Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	alpha := stepOrDefault(m.Alpha, st)
	d := m.D
	if d == 0 {
		d = 10
	}
	iterates := st.Work("itd.iterates", d*dy)
	batches := make([][]int, d)
	gy := st.Work("itd.gy", dy)
	for t := range d {
		copy(iterates[t*dy:(t+1)*dy], y)
		batches[t] = st.Batch(p, Lower, m.InnerBatch)
		p.GradG(nil, gy, x, y, batches[t])
		floats.AddScaled(y, -alpha, gy)
	}

	h, a := st.Work("itd.h", dx), st.Work("itd.a", dy)
	p.GradF(h, a, x, y, st.Batch(p, Upper, m.OuterBatch))
	w, ha := st.Work("itd.w", dx), st.Work("itd.ha", dy)
	for t := d - 1; t >= 0; t-- {
		yt := iterates[t*dy : (t+1)*dy]
		p.MixedXY(w, x, yt, a, batches[t])
		floats.AddScaled(h, -alpha, w)
		if t > 0 {
			p.HVP(ha, x, yt, a, batches[t])
			floats.AddScaled(a, -alpha, ha)
		}
	}
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
