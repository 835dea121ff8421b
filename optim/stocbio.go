package optim

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
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
// The series is implicit.Neumann with one operator per term (Neumann.Term);
// the iteration fails with an *implicit.DivergenceError if a term grows
// beyond 10 times ‖v_0‖ (η too large for the batch Hessians), and on a NaN
// or ±Inf v is set to NaN so that Solve reports the oracle and restores the
// state before the iteration.
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
	// lower-level; OuterBatch is |D_F|, upper-level. 0 means the whole data
	// set (which makes that part deterministic).
	InnerBatch, HessianBatch, MixedBatch, OuterBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = StocBiO{}

// Init implements Method. It allocates State.V if missing.
func (m StocBiO) Init(p Problem, st *State) error {
	err := firstErr(
		checkStep("StocBiO.Alpha", m.Alpha),
		checkStep("StocBiO.Eta", m.Eta),
		checkCount("StocBiO.D", m.D),
		checkCount("StocBiO.Q", m.Q),
		checkBatch(p, "StocBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "StocBiO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "StocBiO.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "StocBiO.OuterBatch", m.OuterBatch, Upper),
		noProjectY("StocBiO", st),
	)
	if err != nil {
		return err
	}
	if err := orDefault(m.Outer).Validate(); err != nil {
		return fmt.Errorf("StocBiO.Outer: %w", err)
	}
	if m.Alpha == 0 || m.Eta == 0 {
		if _, err := curvature(p, st); err != nil {
			return err
		}
	}
	if st.V == nil {
		st.V = make([]float64, p.DimY())
	}
	return nil
}

// Iterate implements Method.
func (m StocBiO) Iterate(p Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	alpha, eta := stepOrDefault(m.Alpha, st), stepOrDefault(m.Eta, st)
	d, q := m.D, m.Q
	if d == 0 {
		d = 10
	}
	if q == 0 {
		q = 10
	}
	gy := st.Work("stocbio.gy", dy)
	for range d {
		p.GradG(nil, gy, x, y, st.Batch(p, Lower, m.InnerBatch))
		floats.AddScaled(y, -alpha, gy)
	}

	h, v0 := st.Work("stocbio.h", dx), st.Work("stocbio.v0", dy)
	p.GradF(h, v0, x, y, st.Batch(p, Upper, m.OuterBatch))
	hvp := func(dst, v []float64, _ int) { p.HVP(dst, x, y, v, st.Batch(p, Lower, m.HessianBatch)) }
	if err := neumann(st.V, v0, eta, q, hvp); err != nil {
		poisonOnBreakdown(st.V, err)
		return Iteration{}, err
	}
	w := st.Work("stocbio.w", dx)
	p.MixedXY(w, x, y, st.V, st.Batch(p, Lower, m.MixedBatch))
	floats.Sub(h, w) // eq. 6
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
