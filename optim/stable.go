package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// STABLESchedule selects how the step sizes α_k, β_k and τ_k of STABLE and
// STABLEMatrixFree evolve with the iteration k.
type STABLESchedule int

const (
	// STABLEConstant keeps α_k = α, β_k = β and τ_k = τ: the nonconvex
	// regime of paper 000, Theorem 2 (eq. 28), which takes all three of
	// order 1/√K for a run of K iterations (β ≤ 1/√K, α ≤ β, τ = 1/√K).
	STABLEConstant STABLESchedule = iota
	// STABLEDecaying multiplies all three by s_k = K0/(K0 + k): the
	// strongly convex regime of paper 000, Theorem 3 (eq. 30), where
	// β_k = τ_k ≤ 1/(K0 + k) and α_k is a constant multiple of β_k, for
	// E‖x^k − x*‖² = O(1/k). With the defaults K0 = 1/β and τ = β this is
	// β_k = τ_k = 1/(K0 + k) exactly.
	STABLEDecaying
)

// STABLE is the Single-Timescale stochAstic BiLevEl optimization method of
// paper 000 (Chen, Sun, Xiao, Yin, AISTATS 2022,
// shared/papers/000_5c614c3f79800768.txt, Algorithm 1). It is single loop:
// iteration k draws one lower-level batch φ^k and one upper-level batch ξ^k
// and moves x and y once:
//
//	H_xy^k = P̄( (1−τ_k)(H_xy^{k−1} − h_xy^{k−1}(φ^k)) + h_xy^k(φ^k) )             (eq. 9a)
//	H_yy^k = P̲( (1−τ_k)(H_yy^{k−1} − h_yy^{k−1}(φ^k)) + h_yy^k(φ^k) )             (eq. 9b)
//	d^k    = ∇x f(x^k, y^k; ξ^k) − H_xy^k (H_yy^k)⁻¹ ∇y f(x^k, y^k; ξ^k)
//	x^{k+1} = P_X( x^k − α_k d^k )                                                 (eq. 8a)
//	y^{k+1} = y^k − β_k ∇y g(x^k, y^k; φ^k) − (H_yy^k)⁻¹ (H_xy^k)ᵀ (x^{k+1} − x^k)   (eq. 8b)
//
// where h_xy^j(φ) = ∇xy g(x^j, y^j; φ) (DimX × DimY) and h_yy^j(φ) =
// ∇yy g(x^j, y^j; φ) (DimY × DimY) are batch matrices (eq. 6), evaluated with
// the same φ^k at the previous and at the current iterate: a STORM-style
// recursive estimate (the paper's feature F2). P̄ projects onto the
// Frobenius ball {‖H‖_F ≤ CXY} and P̲ onto {H ⪰ Mu·I}: it symmetrizes,
// eigendecomposes (gonum mat.EigenSym) and floors the eigenvalues at Mu. The
// last term of (8b) predicts the move of y*(x) caused by the x-step
// (feature F1; the discretized ODE of eq. 12). d^k is the reported
// hypergradient estimate and (H_yy^k)⁻¹ ∇y f is kept in State.V.
//
// Typos of the paper followed in their corrected form (digest
// shared/digests/papers-000_004.md, I.2 and I.6): eq. 8b prints h_a^k, which
// is h_g^k = ∇y g(x^k, y^k; φ^k) of eq. 6; Algorithm 1 lists "randomly
// select φ^k" (line 4) and "ξ^k" (line 9) after their use, so the batches are
// drawn first; eqs. 43 and 46 write (H_yy)⁻¹ H_xy, dimensionally wrong, for
// the H_xy (H_yy)⁻¹ of eq. 8a; the x-dynamics of eq. 12 (file line 219)
// prints −α∇xy g [∇yy g]⁻¹∇y f where ẋ = −αT(x, y) of eqs. 10–11 gives +,
// the sign of eq. 8a used here. The paper does not say how H^{−1} and
// h^{−1}(φ^0) are chosen: at k = 0 the estimates are the projected batch
// matrices at (x^0, y^0), H^0 = P(h^0(φ^0)), as if the correction were zero.
//
// The matrices are explicit, formed by the problem's HessYY and HessXY
// where it declares them (oracle.Capabilities) and otherwise from HVP and
// mixed products. P̲ and the inverse are implicit.Spectral, and d^k is
// implicit.Estimate with the dense estimates as its parts. Oracle calls per iteration: 1 GradG and 1 GradF (the
// paper's "two samples"), and dense matrices: 2 at k = 0 (h_xy^0, h_yy^0)
// and 4 afterwards (both at two iterates), counted in Calls.Dense; when
// assembled they cost DimY HVPs for each ∇yy g and min(DimX, DimY) mixed
// products for each ∇xy g. Each iteration also eigendecomposes a
// DimY × DimY matrix, O(DimY³), which is why the paper recommends STABLE
// for small DimY; STABLEMatrixFree is a labelled approximation for large
// DimY. The estimates and the previous iterate are kept in State.Vecs
// ("stable.hxy", "stable.hyy", "stable.xprev", "stable.yprev").
//
// With both batch sizes 0 the oracles are deterministic, and while the
// projections are inactive the recursion keeps H^k equal to the full
// matrices at (x^k, y^k).
type STABLE struct {
	// Alpha is the upper-level step α (eq. 8a). Like SGD.LR it has no
	// default and 0 is an error: it must be below 2/L_Φ, with L_Φ the
	// Lipschitz constant of ∇Φ, which the method cannot estimate.
	// Theorems 2 and 3 take α ≤ β times problem constants (eqs. 28a, 30b).
	Alpha float64
	// Beta is the lower-level step β (eq. 8b); 0 means 1/L, with L the
	// largest eigenvalue of ∇yy g at (x0, y0) on the whole lower data set,
	// estimated as for AIDBiO.Alpha (1/L ≤ 2/(μ_g + L), as Lemma 3 needs).
	Beta float64
	// Tau is the recursion weight τ ∈ (0, 1] of eq. 9; 0 means min(β, 1)
	// (τ_k = β_k, as in Theorem 3; Theorem 2 takes both of order 1/√K).
	// τ = 1 drops the recursion: H^k is the batch matrix at (x^k, y^k).
	Tau float64
	// Schedule is STABLEConstant (the zero value; Theorem 2) or
	// STABLEDecaying (Theorem 3).
	Schedule STABLESchedule
	// K0 is the offset of STABLEDecaying, s_k = K0/(K0 + k); 0 means 1/β.
	// Ignored by STABLEConstant.
	K0 float64
	// Mu is the eigenvalue floor μ_g of the projection P̲ in eq. 9b (the
	// strong-convexity constant of g); 0 means L/1000 with L estimated as
	// for Beta, which bounds ‖(H_yy^k)⁻¹‖ by 1000/L.
	Mu float64
	// CXY is the radius C_gxy of the Frobenius ball of P̄ in eq. 9a; 0 means
	// no projection.
	CXY float64
	// LowerBatch is |φ^k| and UpperBatch |ξ^k|; 0 means the whole data set.
	LowerBatch, UpperBatch int
}

var _ Method = STABLE{}

// Init implements Method. It allocates State.V and the estimates.
func (m STABLE) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "STABLE", checks: []error{
		stableCheck("STABLE", m.Alpha, m.Beta, m.Schedule, m.K0, m.LowerBatch, m.UpperBatch, p, st),
		checkDenseParam("STABLE.Tau", m.Tau, "min(β, 1)"),
		checkDenseParam("STABLE.Mu", m.Mu, "L/1000"),
		checkDenseParam("STABLE.CXY", m.CXY, "no projection"),
		checkAtMost("STABLE.Tau", m.Tau, 1, "set the recursion weight τ in (0, 1], or 0 for min(β, 1)"),
	}, steps: []float64{m.Beta, m.Mu}, v: true}.run(p, st)
	if err != nil {
		return err
	}
	nx, ny := p.DimX(), p.DimY()
	st.Vec("stable.hxy", nx*ny)
	st.Vec("stable.hyy", ny*ny)
	st.Vec("stable.xprev", nx)
	st.Vec("stable.yprev", ny)
	return nil
}

// checkAtMost validates v ≤ bound.
func checkAtMost(name string, v, bound float64, advice string) error {
	if v > bound {
		return fmt.Errorf("%s = %v: %s", name, v, advice)
	}
	return nil
}

// Steps returns the step sizes α_k, β_k and τ_k of iteration k. It needs
// the curvature estimate that Init caches in st when Beta or Mu is 0.
func (m STABLE) Steps(k int, st *State) (alpha, beta, tau float64) {
	alpha, beta, s := stableSteps(m.Alpha, m.Beta, m.Schedule, m.K0, k, st)
	tau = m.Tau
	if tau == 0 {
		tau = math.Min(stepOrDefault(m.Beta, st), 1)
	}
	return alpha, beta, tau * s
}

// Iterate implements Method.
func (m STABLE) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	k, nx, ny := st.Iter, p.DimX(), p.DimY()
	x, y := st.X, st.Y
	alpha, beta, tau := m.Steps(k, st)
	mu := m.Mu
	if mu == 0 {
		mu = st.Scalars[keyCurvature] / 1000
	}
	xp, yp := st.Vec("stable.xprev", nx), st.Vec("stable.yprev", ny)
	phi := st.Batch(p, Lower, m.LowerBatch)

	// eq. 9a, then 9b: the same batch φ^k at (x^{k−1}, y^{k−1}) and (x^k, y^k).
	hxy, hyy := st.Vec("stable.hxy", nx*ny), st.Vec("stable.hyy", ny*ny)
	stormDense(p, st, hessXYInto, hxy, "stable.xy", nx*ny, tau, phi)
	denseClipNorm(hxy, denseRadius(m.CXY))
	stormDense(p, st, hessYYInto, hyy, "stable.yy", ny*ny, tau, phi)
	hinv := implicit.Spectral{Lo: mu}
	if err := hinv.Factorize(hyy, hyy, ny); err != nil {
		return Iteration{}, err
	}

	// d^k = ∇x f − H_xy^k (H_yy^k)⁻¹ ∇y f, with (H_yy^k)⁻¹ ∇y f kept in V.
	d, err := estimate(st, st.V, implicit.System{
		Gradient: upperGradient(p, st, m.UpperBatch),
		Solve:    spectralSolve(&hinv),
		Cross:    func(dst, v []float64) { denseMulVec(dst, hxy, nx, ny, v) },
	})
	if err != nil {
		return Iteration{}, err
	}
	gy := st.Work("stable.gy", ny)
	p.GradG(nil, gy, x, y, phi)
	norm := floats.Norm(d, 2)

	copy(xp, x)
	copy(yp, y)
	stableMoveX(st, alpha, d)
	dx, w := st.Work("stable.dx", nx), st.Work("stable.w", ny)
	floats.SubTo(dx, x, xp)
	denseMulTVec(w, hxy, nx, ny, dx)
	hinv.Solve(w, w)
	for i := range y { // eq. 8b, with its h_a^k read as h_g^k = ∇y g(x^k, y^k; φ^k) (eq. 6)
		y[i] = y[i] - beta*gy[i] - w[i]
	}
	return Iteration{HypergradNorm: norm}, nil
}

// stormDense updates the estimate est of a dense second derivative (form:
// hessXYInto or hessYYInto) by the recursion of eq. 9 on the batch phi, at
// the previous iterate of State.Vecs "stable.xprev", "stable.yprev" and the
// current one; at k = 0 it is the batch matrix at (x^0, y^0).
func stormDense(p oracle.Problem, st *State, form func(oracle.Problem, *State, []float64, []float64, []float64, []int), est []float64, name string, n int, tau float64, phi []int) {
	if st.Iter == 0 {
		form(p, st, est, st.X, st.Y, phi)
		return
	}
	prev, cur := st.Work(name+".prev", n), st.Work(name+".cur", n)
	form(p, st, prev, st.Vec("stable.xprev", len(st.X)), st.Vec("stable.yprev", len(st.Y)), phi)
	form(p, st, cur, st.X, st.Y, phi)
	stormUpdate(est, prev, cur, tau)
}

// spectralSolve is the Solve part of a System whose linear system is a
// factorized dense estimate.
func spectralSolve(s *implicit.Spectral) func(v, b []float64) (implicit.Stats, error) {
	return func(v, b []float64) (implicit.Stats, error) {
		s.Solve(v, b)
		return implicit.Stats{Converged: true}, nil
	}
}

// stormUpdate applies the recursion of paper 000, eq. 9 (and paper 001,
// Algorithm 3, lines 7–11) in place: est ← (1−τ)(est − prev) + cur, where
// prev and cur are the same sample's value at the previous and the current
// iterate.
func stormUpdate(est, prev, cur []float64, tau float64) {
	for i := range est {
		est[i] = (1-tau)*(est[i]-prev[i]) + cur[i]
	}
}

// stableMoveX applies eq. 8a: x ← P_X(x − α d).
func stableMoveX(st *State, alpha float64, d []float64) {
	floats.AddScaled(st.X, -alpha, d)
	st.ProjectX(st.X)
}

// stableSteps returns α_k and β_k of STABLE's schedules and the decay
// factor s_k (1 for STABLEConstant).
func stableSteps(alpha, beta float64, sched STABLESchedule, k0 float64, k int, st *State) (a, b, s float64) {
	a, b, s = alpha, stepOrDefault(beta, st), 1
	if sched == STABLEDecaying {
		if k0 == 0 {
			k0 = 1 / b
		}
		s = k0 / (k0 + float64(k))
	}
	return a * s, b * s, s
}

// stableCheck validates the settings STABLE and STABLEMatrixFree share.
func stableCheck(name string, alpha, beta float64, sched STABLESchedule, k0 float64, lower, upper int, p oracle.Problem, st *State) error {
	err := firstErr(
		checkStep(name+".Alpha", alpha),
		checkStep(name+".Beta", beta),
		checkDenseParam(name+".K0", k0, "1/β"),
		checkBatch(p, name+".LowerBatch", lower, Lower),
		checkBatch(p, name+".UpperBatch", upper, Upper),
		noProjectY(name, st),
	)
	if err != nil {
		return err
	}
	if alpha == 0 {
		return fmt.Errorf("%s.Alpha = 0: set the upper-level step α > 0; it has no default (Theorems 2 and 3 of paper 000 take α ≤ β times problem constants)", name)
	}
	if sched != STABLEConstant && sched != STABLEDecaying {
		return fmt.Errorf("%s.Schedule = %d: use STABLEConstant or STABLEDecaying", name, sched)
	}
	return nil
}

// STABLEMatrixFree is a matrix-free approximation of STABLE (paper 000,
// Algorithm 1) for a large DimY, where forming and eigendecomposing
// DimY × DimY matrices is too costly. It is not the paper's algorithm.
// Iteration k runs eqs. 8a and 8b with the same batches, schedules and
// defaults as STABLE, but:
//
//   - no recursion (τ_k = 1): the second-order estimates are the batch
//     matrices at the current iterate, H_yy^k = ∇yy g(x^k, y^k; φ^k) and
//     H_xy^k = ∇xy g(x^k, y^k; φ^k), so the variance reduction of eq. 9
//     (feature F2) is lost and their noise enters d^k and y^{k+1};
//   - no projections: P̄ is dropped, and instead of the eigenvalue floor P̲
//     the batch Hessian must itself be positive definite (a strongly convex
//     g per sample gives that); CG reports an error when it is not;
//   - the two inverse products are approximate: v^k ≈ (H_yy^k)⁻¹ ∇y f and
//     z^k ≈ (H_yy^k)⁻¹ (H_xy^k)ᵀ(x^{k+1} − x^k) are N conjugate-gradient
//     steps (implicit.CG on the HVP operator) warm-started from the previous
//     iteration's v and z, and the products with H_xy^k are one MixedXY and
//     one MixedYX.
//
// So it is STABLE with Tau = 1, Mu below the spectrum, CXY = 0 and exact
// solves replaced by N CG steps (d^k is implicit.Estimate with implicit.CG); with full batches and N ≥ DimY it follows
// STABLE{Tau: 1} up to the CG rounding error. Oracle calls per iteration:
// 1 GradG, 1 GradF, 1 MixedXY, 1 MixedYX and 2N HVPs at k = 0, 2N+2
// afterwards (each warm start costs an initial residual; a zero warm start
// does not); memory O(DimX + DimY). v is State.V and z is
// State.Vecs["stablemf.z"].
type STABLEMatrixFree struct {
	// Alpha (required), Beta, Schedule and K0 are as for STABLE.
	Alpha, Beta float64
	Schedule    STABLESchedule
	K0          float64
	// N is the number of CG steps per solve; 0 means 10.
	N int
	// LowerBatch is |φ^k| and UpperBatch |ξ^k|; 0 means the whole data set.
	LowerBatch, UpperBatch int
}

var _ Method = STABLEMatrixFree{}

// Init implements Method. It allocates State.V and z.
func (m STABLEMatrixFree) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "STABLEMatrixFree", checks: []error{
		stableCheck("STABLEMatrixFree", m.Alpha, m.Beta, m.Schedule, m.K0, m.LowerBatch, m.UpperBatch, p, st),
		checkCount("STABLEMatrixFree.N", m.N),
	}, steps: []float64{m.Beta}, v: true}.run(p, st)
	if err != nil {
		return err
	}
	st.Vec("stablemf.z", p.DimY())
	return nil
}

// Iterate implements Method.
func (m STABLEMatrixFree) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	nx, ny := p.DimX(), p.DimY()
	alpha, beta, _ := stableSteps(m.Alpha, m.Beta, m.Schedule, m.K0, st.Iter, st)
	n := count(m.N, 10)
	// (x^k, y^k), kept: st.X and st.Y are overwritten by the updates.
	xk, yk := st.Work("stablemf.x", nx), st.Work("stablemf.y", ny)
	copy(xk, st.X)
	copy(yk, st.Y)
	phi := st.Batch(p, Lower, m.LowerBatch)
	hyy := implicit.HVPOperator(p, xk, yk, phi)
	d, err := estimate(st, st.V, implicit.System{
		Gradient: upperGradient(p, st, m.UpperBatch),
		Solve:    cgOn(hyy, n, 0),
		Cross:    func(dst, v []float64) { p.MixedXY(dst, xk, yk, v, phi) },
	})
	if err != nil {
		return Iteration{}, err
	}
	gy := st.Work("stablemf.gy", ny)
	p.GradG(nil, gy, xk, yk, phi)
	norm := floats.Norm(d, 2)

	stableMoveX(st, alpha, d)
	dx, q := st.Work("stablemf.dx", nx), st.Work("stablemf.q", ny)
	floats.SubTo(dx, st.X, xk)
	p.MixedYX(q, xk, yk, dx, phi) // (H_xy^k)ᵀ (x^{k+1} − x^k)
	z := st.Vec("stablemf.z", ny)
	if _, err := cgOn(hyy, n, 0)(z, q); err != nil {
		return Iteration{}, err
	}
	for i := range st.Y { // eq. 8b
		st.Y[i] = yk[i] - beta*gy[i] - z[i]
	}
	return Iteration{HypergradNorm: norm}, nil
}
