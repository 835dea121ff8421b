package optim

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
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
// Batches are drawn in the order S_1..S_D, D_F, then p, B_1..B_p, D_G.
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
	// lower-level; OuterBatch is |D_F|, upper-level. 0 means the whole data
	// set.
	InnerBatch, HessianBatch, MixedBatch, OuterBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). BSA's step is
	// SGD{LR: β} (projected onto Settings.ProjectX).
	Outer Optimizer
}

var _ Method = BSA{}

// Init implements Method. It allocates State.V if missing.
func (m BSA) Init(p Problem, st *State) error {
	err := firstErr(
		checkStep("BSA.Alpha", m.Alpha),
		checkStep("BSA.Eta", m.Eta),
		checkCount("BSA.D", m.D),
		checkCount("BSA.N", m.N),
		checkBaselineDecay("BSA.OuterDecay", m.OuterDecay),
		checkBatch(p, "BSA.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "BSA.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "BSA.MixedBatch", m.MixedBatch, Lower),
		checkBatch(p, "BSA.OuterBatch", m.OuterBatch, Upper),
		noProjectY("BSA", st),
	)
	if err != nil {
		return err
	}
	if err := orDefault(m.Outer).Validate(); err != nil {
		return fmt.Errorf("BSA.Outer: %w", err)
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
func (m BSA) Iterate(p Problem, st *State) (Iteration, error) {
	dy := p.DimY()
	x, y := st.X, st.Y
	alpha := stepOrDefault(m.Alpha, st)
	d := m.D
	if d == 0 {
		d = 10
	}
	gy := st.Work("bsa.gy", dy)
	for range d {
		p.GradG(nil, gy, x, y, st.Batch(p, Lower, m.InnerBatch))
		floats.AddScaled(y, -alpha, gy)
	}
	h := bsaHypergrad(p, st, stepOrDefault(m.Eta, st), bsaNeumannTerms(m.N),
		m.HessianBatch, m.MixedBatch, m.OuterBatch)
	norm := floats.Norm(h, 2)
	if s := baselineDecay(st.Iter, m.OuterDecay); s != 1 {
		floats.Scale(s, h)
	}
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}

// bsaNeumannTerms returns N for a BSA or TTSA setting (0 means 10).
func bsaNeumannTerms(n int) int {
	if n == 0 {
		return 10
	}
	return n
}

// bsaHypergrad returns, in a Work buffer, the hypergradient
// estimate of Ghadimi and Wang 2018 (Algorithm 3) at the state's (x, y):
// it draws D_F (upper), then p ~ Uniform{0..n−1} from st.Rand, then p
// Hessian batches and the mixed batch, and stores v in st.V.
func bsaHypergrad(p Problem, st *State, eta float64, n, hessBatch, mixedBatch, outerBatch int) []float64 {
	dx, dy := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	h, fy := st.Work("gwneumann.h", dx), st.Work("gwneumann.fy", dy)
	p.GradF(h, fy, x, y, st.Batch(p, Upper, outerBatch))
	terms := st.Rand().IntN(n)
	hvp := func(dst, v []float64) { p.HVP(dst, x, y, v, st.Batch(p, Lower, hessBatch)) }
	bsaRandomNeumann(st.V, fy, eta, n, terms, hvp, st.Work("gwneumann.hr", dy))
	w := st.Work("gwneumann.w", dx)
	p.MixedXY(w, x, y, st.V, st.Batch(p, Lower, mixedBatch))
	floats.Sub(h, w)
	return h
}

// bsaRandomNeumann stores in dst the randomized-truncation estimate of
// H⁻¹ b of Ghadimi and Wang 2018 (Algorithm 3) for a given draw p:
//
//	dst = n η Π_{i=1}^{p} (I − η H_i) b,
//
// with H_i applied by hvp (one call per factor, a fresh batch each in the
// callers). Averaged over p uniform in {0..n−1} this is η Σ_{j=0}^{n−1}
// (I − ηH)^j b. hr is scratch; dst may not alias b.
func bsaRandomNeumann(dst, b []float64, eta float64, n, p int, hvp func(dst, v []float64), hr []float64) {
	copy(dst, b)
	for range p {
		hvp(hr, dst)
		floats.AddScaled(dst, -eta, hr)
	}
	floats.Scale(float64(n)*eta, dst)
}
