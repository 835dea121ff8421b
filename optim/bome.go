package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// BOME is "Bilevel Optimization Made Easy" of Liu, Ye, Wright, Stone and
// Liu, "BOME! Bilevel optimization made easy: a simple first-order
// approach" (NeurIPS 2022, arXiv 2209.08709, Algorithm 1; not in
// shared/papers). It calls no second-order oracle: only ∇f and ∇g.
//
// The bilevel problem (the paper's eq. 1, outer variable v = x, inner
// θ = y) is the constrained problem min_{x,y} f(x, y) s.t. q(x, y) ≤ 0 with
// the value-function gap q(x, y) = g(x, y) − g*(x), g*(x) = min_y g(x, y),
// whose gradient needs only ∇x g at the minimizer (Danskin). Iteration k of
// Algorithm 1 estimates the minimizer by T steps of gradient descent from
// y_k, replaces g* by the value there, and takes one step of the dynamic
// barrier method on (x, y) jointly:
//
//	y^(0) = y_k,   y^(t+1) = y^(t) − α ∇y g(x_k, y^(t); S_t),   t = 0..T−1
//	q̂(x, y) = g(x, y; B) − g(x, y^(T); B)
//	∇q̂_k = (∇x g(x_k, y_k; B) − ∇x g(x_k, y^(T); B),  ∇y g(x_k, y_k; B))
//	φ_k = η‖∇q̂_k‖²   (or η q̂(x_k, y_k))
//	λ_k = max((φ_k − ⟨∇f(x_k, y_k; B'), ∇q̂_k⟩) / ‖∇q̂_k‖², 0)
//	(x, y)_{k+1} = (x, y)_k − ξ (∇f(x_k, y_k; B') + λ_k ∇q̂_k)
//
// λ_k is the smallest multiplier for which the step decreases q̂ at least
// at the rate φ_k: the direction is the projection of ∇f onto the
// half-space ⟨d, ∇q̂_k⟩ ≥ φ_k. When ∇q̂_k is exactly zero (y_k already
// minimizes g(x_k, ·) on B) the constraint is inactive and λ_k = 0. Every
// S_t is a fresh lower batch; B, shared by the two ∇g of ∇q̂ (and the two
// values of φ's value form), is one more; B' is an upper batch. The inner
// loop is the AID methods' (unroll.Descend on g), run on a copy of y_k.
//
// The step: x moves by Outer and y by Inner along their parts of the
// direction; with both SGD{LR: ξ} this is Algorithm 1's joint step. The
// paper's experiments use η = 0.5 and φ = η‖∇q̂‖² (the defaults).
//
// Oracle calls per iteration: T + 2 GradG, 1 GradF (and 2 G with
// BOMEValue); no HVP or mixed product. The default α costs min(30, DimY)
// pairs of GradG once (gradientCurvature).
type BOME struct {
	// Alpha is α, the step of the inner loop; 0 means 1/L with L the
	// largest eigenvalue of ∇yy g at (x0, y0), estimated from gradient
	// differences.
	Alpha float64
	// T is the number of inner steps; 0 means 10.
	T int
	// Eta is η, the barrier's rate; 0 means 0.5.
	Eta float64
	// Phi selects φ_k (default BOMEGradNorm).
	Phi BOMEPhi
	// LowerBatch is the size of every lower-level batch (S_t, B),
	// UpperBatch of B'; 0 means the whole data set.
	LowerBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). Inner updates y; nil
	// means the same optimizer as Outer (with its own memory,
	// State.YOpt).
	Outer, Inner Optimizer
}

// BOMEPhi selects BOME's control function φ_k.
type BOMEPhi int

const (
	// BOMEGradNorm is φ_k = η‖∇q̂_k‖², the paper's default.
	BOMEGradNorm BOMEPhi = iota
	// BOMEValue is φ_k = η q̂(x_k, y_k), the gap in lower values.
	BOMEValue
)

var _ Method = BOME{}

// Init implements Method.
func (m BOME) Init(p oracle.Problem, st *State) error {
	var phiErr error
	if m.Phi != BOMEGradNorm && m.Phi != BOMEValue {
		phiErr = fmt.Errorf("BOME.Phi = %d: set BOMEGradNorm or BOMEValue", m.Phi)
	}
	err := methodInit{name: "BOME", checks: []error{
		checkStep("BOME.Alpha", m.Alpha),
		checkStep("BOME.Eta", m.Eta),
		checkCount("BOME.T", m.T),
		phiErr,
		checkBatch(p, "BOME.LowerBatch", m.LowerBatch, Lower),
		checkBatch(p, "BOME.UpperBatch", m.UpperBatch, Upper),
		noProjectY("BOME", st),
	}, outer: m.Outer, hasOuter: true}.run(p, st)
	if err != nil {
		return err
	}
	if m.Inner != nil {
		if err := m.Inner.Validate(); err != nil {
			return fmt.Errorf("BOME.Inner: %w", err)
		}
	}
	if m.Alpha == 0 {
		if _, err := gradientCurvature(p, st); err != nil {
			return err
		}
	}
	return nil
}

// Iterate implements Method.
func (m BOME) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	yT := st.Work("bome.yT", dy)
	copy(yT, st.Y)
	lower := func(int) []int { return st.Batch(p, Lower, m.LowerBatch) }
	if err := unroll.Descend(p, st.X, yT, count(m.T, 10), stepOrDefault(m.Alpha, st), lower, st.Work("optim.gy", dy)); err != nil {
		return Iteration{}, fmt.Errorf("BOME inner loop: %w", err)
	}
	b := st.Batch(p, Lower, m.LowerBatch)
	fx, fy := st.Work("optim.hypergradient", dx), st.Work("optim.fy", dy)
	qx, qy, gxT := st.Work("bome.qx", dx), st.Work("bome.qy", dy), st.Work("bome.gxT", dx)
	p.GradF(fx, fy, st.X, st.Y, st.Batch(p, Upper, m.UpperBatch))
	p.GradG(qx, qy, st.X, st.Y, b)
	p.GradG(gxT, nil, st.X, yT, b)
	floats.Sub(qx, gxT)
	nq := floats.Dot(qx, qx) + floats.Dot(qy, qy)
	eta := m.Eta
	if eta == 0 {
		eta = 0.5
	}
	phi := eta * nq
	if m.Phi == BOMEValue {
		phi = eta * (p.G(st.X, st.Y, b) - p.G(st.X, yT, b))
	}
	lambda := 0.0
	if nq > 0 {
		lambda = math.Max((phi-floats.Dot(fx, qx)-floats.Dot(fy, qy))/nq, 0)
	}
	floats.AddScaled(fx, lambda, qx)
	floats.AddScaled(fy, lambda, qy)
	outer := orDefault(m.Outer)
	inner := m.Inner
	if inner == nil {
		inner = outer
	}
	st.StepX(outer, fx)
	st.StepY(inner, fy)
	return Iteration{HypergradNorm: floats.Norm(fx, 2)}, nil
}
