package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// SOBA is the single-loop stochastic bilevel method of Dagréou, Ablin,
// Vaiter and Moreau, "A framework for bilevel optimization that enables
// stochastic and global variance reduction algorithms" (NeurIPS 2022,
// Sec. 3: the framework's joint update of (y, v, x) along the directions
// D_y, D_v, D_x, with plain SGD estimates of them). That paper is not in
// shared/papers; paper 002 Remark 2.1(i) states the same update as NBO-GD
// with T = 0. Iteration k draws one lower batch B and one upper batch B'
// and moves y, v and x together from (x^k, y^k, v^k):
//
//	D_y = ∇y G(x, y; B)
//	D_v = ∇yy G(x, y; B) v − ∇y F(x, y; B')
//	D_x = ∇x F(x, y; B') − ∇xy G(x, y; B) v
//	y ← y − ρ_k D_y,   v ← v − ρ_k D_v,   x ← x − γ_k D_x   (or the Outer step on s_k D_x)
//
// Dagréou et al. write v ≈ −H⁻¹ ∇y F and add the mixed product; this
// package's v is +H⁻¹ ∇y f (∇Φ = ∇x f − ∇xy g v), so D_v and D_x carry the
// opposite signs and the iterates are the same up to v ↦ −v. One batch B
// feeds ∇y G, the HVP and the mixed product (one inner sample index per
// iteration in Dagréou et al.; one jax.vjp in the Bilevel Optimization
// Benchmark's SOBA). v is State.V, warm-started (from 0).
//
// Step sizes: ρ_k = Rho·(k+1)^(−InnerDecay) and the direction handed to
// Outer is scaled by s_k = (k+1)^(−OuterDecay), so with Outer = SGD{LR: γ}
// the outer step is γ_k = γ (k+1)^(−OuterDecay). Their convergence theorem
// uses decreasing steps ρ_t ∝ t^(−2/5), γ_t ∝ t^(−3/5) (InnerDecay = 0.4,
// OuterDecay = 0.6; recalled from the paper, not checked against it here);
// the zero values give constant steps.
//
// It composes the estimate implicit.Estimate at v^k (no solve), one step
// of implicit.FixedPoint on v, one inner step on y (unroll.Descend) and the
// outer optimizer. Oracle calls per iteration: 1 GradG, 1 GradF, 1 HVP,
// 1 MixedXY.
type SOBA struct {
	// Rho is ρ, the step of y and v; 0 means 1/L with L estimated as for
	// AIDBiO.Alpha.
	Rho float64
	// InnerDecay and OuterDecay are the exponents of the step decays
	// described above; 0 means constant steps.
	InnerDecay, OuterDecay float64
	// InnerBatch is |B| (lower level), UpperBatch |B'| (upper level); 0
	// means the whole data set.
	InnerBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). SOBA's step is
	// SGD{LR: γ}.
	Outer Optimizer
}

var _ Method = SOBA{}

// Init implements Method. It allocates State.V (zeros) if missing.
func (m SOBA) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "SOBA", checks: []error{
		checkStep("SOBA.Rho", m.Rho),
		checkBaselineDecay("SOBA.InnerDecay", m.InnerDecay),
		checkBaselineDecay("SOBA.OuterDecay", m.OuterDecay),
		checkBatch(p, "SOBA.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "SOBA.UpperBatch", m.UpperBatch, Upper),
		noProjectY("SOBA", st),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Rho}, v: true}.run(p, st)
}

// Iterate implements Method.
func (m SOBA) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	k := st.Iter
	rho := stepOrDefault(m.Rho, st) * baselineDecay(k, m.InnerDecay)
	b := st.Batch(p, Lower, m.InnerBatch)
	// D_x at (x^k, y^k, v^k), on B' and B.
	h, err := estimate(st, st.V, implicit.System{Gradient: upperGradient(p, st, m.UpperBatch), Cross: mixedOn(p, st, b)})
	if err != nil {
		return Iteration{}, err
	}
	// v ← v − ρ D_v: one step on ∇yy G(B) v = ∇y F(B'), whose right-hand
	// side the estimate left in its scratch.
	step := &implicit.FixedPoint{Eta: rho, MaxIter: 1, Tol: -1, MaxGrowth: math.Inf(1)}
	hvp := func(dst, v []float64) { p.HVP(dst, st.X, st.Y, v, b) }
	if _, err := step.Solve(st.V, hvp, st.Work("optim.fy", p.DimY())); err != nil {
		return Iteration{}, err
	}
	// y ← y − ρ D_y, on B.
	if err := unroll.Descend(p, st.X, st.Y, 1, rho, func(int) []int { return b }, st.Work("optim.gy", p.DimY())); err != nil {
		return Iteration{}, err
	}
	norm := floats.Norm(h, 2)
	if s := baselineDecay(k, m.OuterDecay); s != 1 {
		floats.Scale(s, h)
	}
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}

// baselineDecay returns (k+1)^(−e), the decay factor of a step at
// iteration k (from 0); e = 0 gives exactly 1.
func baselineDecay(k int, e float64) float64 {
	if e == 0 {
		return 1
	}
	return math.Pow(float64(k+1), -e)
}

// checkBaselineDecay validates a step-decay exponent (0: constant steps).
func checkBaselineDecay(name string, e float64) error {
	if !(e >= 0) || math.IsInf(e, 1) {
		return fmt.Errorf("%s = %v: set a finite exponent ≥ 0 (0 keeps the step constant)", name, e)
	}
	return nil
}
