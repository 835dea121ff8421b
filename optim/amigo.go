package optim

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
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
// Oracle calls per iteration: D GradG, 1 GradF, Q HVPs, 1 MixedXY. Paper
// 002 runs it with D = Q ("AmIGO with Q = 10" and Q = 1, Sec. 4.1).
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
	// lower-level; OuterBatch is |D_F|, upper-level. 0 means the whole data
	// set.
	InnerBatch, HessianBatch, MixedBatch, OuterBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). AmIGO's step is
	// SGD{LR: β}.
	Outer Optimizer
}

var _ Method = AmIGO{}

// Init implements Method. It allocates State.V (zeros) if missing.
func (m AmIGO) Init(p Problem, st *State) error {
	err := firstErr(
		checkStep("AmIGO.Alpha", m.Alpha),
		checkStep("AmIGO.Eta", m.Eta),
		checkCount("AmIGO.D", m.D),
		checkCount("AmIGO.Q", m.Q),
		checkBatch(p, "AmIGO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "AmIGO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "AmIGO.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "AmIGO.OuterBatch", m.OuterBatch, Upper),
		noProjectY("AmIGO", st),
	)
	if err != nil {
		return err
	}
	if err := orDefault(m.Outer).Validate(); err != nil {
		return fmt.Errorf("AmIGO.Outer: %w", err)
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
func (m AmIGO) Iterate(p Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	x, y, v := st.X, st.Y, st.V
	alpha, eta := stepOrDefault(m.Alpha, st), stepOrDefault(m.Eta, st)
	d, q := m.D, m.Q
	if d == 0 {
		d = 10
	}
	if q == 0 {
		q = 10
	}
	gy := st.Work("amigo.gy", dy)
	for range d {
		p.GradG(nil, gy, x, y, st.Batch(p, Lower, m.InnerBatch))
		floats.AddScaled(y, -alpha, gy)
	}

	h, fy := st.Work("amigo.h", dx), st.Work("amigo.fy", dy)
	p.GradF(h, fy, x, y, st.Batch(p, Upper, m.OuterBatch))
	hv := st.Work("amigo.hv", dy)
	for range q {
		p.HVP(hv, x, y, v, st.Batch(p, Lower, m.HessianBatch))
		floats.Sub(hv, fy)
		floats.AddScaled(v, -eta, hv)
	}
	w := st.Work("amigo.w", dx)
	p.MixedXY(w, x, y, v, st.Batch(p, Lower, m.MixedBatch))
	floats.Sub(h, w)
	norm := floats.Norm(h, 2)
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}
