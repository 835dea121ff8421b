package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"gonum.org/v1/gonum/floats"
)

// AIDBiO is AID-BiO, the approximate-implicit-differentiation method of
// paper 003 (Ji, Yang, Liang 2021, Algorithm 1, AID branch). Iteration k:
//
//	y_k^0 = y_{k−1}^D (warm start),   y_k^t = y_k^{t−1} − α ∇y g(x_k, y_k^{t−1}),  t = 1..D
//	v_k^N = N steps of CG on ∇yy g(x_k, y_k^D) v = ∇y f(x_k, y_k^D) from v_k^0 = v_{k−1}^N
//	ĥ∇Φ(x_k) = ∇x f(x_k, y_k^D) − ∇xy g(x_k, y_k^D) v_k^N          (eq. 3)
//	x_{k+1} = x_k − β ĥ∇Φ(x_k)   (or the step of the Outer optimizer)
//
// v_k^N is kept in State.V. Oracle calls per iteration: D GradG, 1 GradF,
// 1 MixedXY and N+1 HVPs: N for the CG steps and 1 for the initial residual
// ∇y f − ∇yy g v_k^0, which is skipped while v_k^0 = 0 (at k = 0), so
// iteration 0 costs N. CG stops earlier only when the residual reaches
// CGTol (or exactly 0). CG is implicit.CG on the operator
// implicit.HVPOperator; if it breaks down on a NaN or ±Inf, v is set to NaN
// and Solve reports the oracle and restores the state before the iteration.
//
// With the batch sizes left at 0 this is the deterministic algorithm of the
// paper; setting them gives a minibatch variant (the CG system and the mixed
// product share one batch per iteration, since CG needs a fixed operator).
type AIDBiO struct {
	// Alpha is the inner step size α. 0 means 1/L, with L the largest
	// eigenvalue of ∇yy g at (x0, y0) on the whole lower data set, estimated
	// in Init by min(30, DimY) Lanczos steps (as many HVPs, once per run).
	Alpha float64
	// D is the number of inner gradient steps; 0 means 10.
	D int
	// IncreasingD, if > 0, replaces D by D_k = ⌈c (k+1)^{1/4}⌉ with
	// c = IncreasingD ("AID-BiO-increasing", paper 003 Sec. 5).
	IncreasingD float64
	// N is the number of CG steps; 0 means 10.
	N int
	// CGTol stops CG once ‖∇y f − ∇yy g v‖ ≤ CGTol·‖∇y f‖; 0 runs all N steps.
	CGTol float64
	// InnerBatch is the lower-level batch size of each inner step (a fresh
	// batch per step); 0 means the whole data set.
	InnerBatch int
	// HessianBatch is the size of the lower-level batch drawn once per
	// iteration for the CG HVPs and the mixed product; 0: whole data set.
	HessianBatch int
	// OuterBatch is the upper-level batch size for ∇f; 0: whole data set.
	OuterBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = AIDBiO{}

// Init implements Method. It allocates State.V (zeros) if missing.
func (m AIDBiO) Init(p Problem, st *State) error {
	err := firstErr(
		checkStep("AIDBiO.Alpha", m.Alpha),
		checkCount("AIDBiO.D", m.D),
		checkCount("AIDBiO.N", m.N),
		checkBatch(p, "AIDBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "AIDBiO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "AIDBiO.OuterBatch", m.OuterBatch, Upper),
		noProjectY("AIDBiO", st),
	)
	if err != nil {
		return err
	}
	if !(m.IncreasingD >= 0) || math.IsInf(m.IncreasingD, 1) {
		return fmt.Errorf("AIDBiO.IncreasingD = %v: set c > 0 for D_k = ⌈c (k+1)^(1/4)⌉, or 0 for constant D", m.IncreasingD)
	}
	if !(m.CGTol >= 0) || math.IsInf(m.CGTol, 1) {
		return fmt.Errorf("AIDBiO.CGTol = %v: set a finite tolerance ≥ 0 (0 runs all N steps)", m.CGTol)
	}
	if err := orDefault(m.Outer).Validate(); err != nil {
		return fmt.Errorf("AIDBiO.Outer: %w", err)
	}
	if m.Alpha == 0 {
		if _, err := curvature(p, st); err != nil {
			return err
		}
	}
	if st.V == nil {
		st.V = make([]float64, p.DimY())
	}
	return nil
}

// InnerSteps returns D_k, the number of inner steps at iteration k.
func (m AIDBiO) InnerSteps(k int) int {
	if m.IncreasingD > 0 {
		return int(math.Ceil(m.IncreasingD * math.Pow(float64(k+1), 0.25)))
	}
	if m.D == 0 {
		return 10
	}
	return m.D
}

// Iterate implements Method.
func (m AIDBiO) Iterate(p Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	alpha := stepOrDefault(m.Alpha, st)
	gy := st.Work("aid.gy", dy)
	for range m.InnerSteps(st.Iter) {
		p.GradG(nil, gy, x, y, st.Batch(p, Lower, m.InnerBatch))
		floats.AddScaled(y, -alpha, gy)
	}

	h, fy := st.Work("aid.h", dx), st.Work("aid.fy", dy)
	p.GradF(h, fy, x, y, st.Batch(p, Upper, m.OuterBatch))
	hb := st.Batch(p, Lower, m.HessianBatch)
	n := m.N
	if n == 0 {
		n = 10
	}
	_, err := conjugateGradient(implicit.HVPOperator(p, x, y, hb), st.V, fy, n, m.CGTol)
	if err != nil {
		poisonOnBreakdown(st.V, err)
		return Iteration{}, err
	}
	w := st.Work("aid.w", dx)
	p.MixedXY(w, x, y, st.V, hb)
	floats.Sub(h, w) // eq. 3
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
