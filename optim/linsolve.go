package optim

// Linear-system helpers for the hypergradient. The linear algebra itself
// lives in package implicit (CG, the Neumann series); this file only maps
// the conventions of the paper-003 methods onto it, and keeps the Lanczos
// estimate of the curvature bound behind default step sizes, which package
// implicit does not offer (it has power iteration only, which converges too
// slowly to give L from min(30, DimY) products).

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/implicit"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// conjugateGradient runs at most n steps of implicit.CG on H v = b from the
// warm start v (overwritten with the result), H applied by hvp. It stops
// early when ‖r‖ ≤ tol·‖b‖ (tol 0: only on an exactly zero residual). The
// initial residual b − H v costs one extra HVP unless v is exactly zero, so
// a warm start costs n+1 HVPs and a cold start n. It returns the number of
// HVPs and an error if H shows non-positive curvature along a search
// direction (*implicit.CurvatureError, wrapped with advice) or produced NaN
// or ±Inf (*implicit.BreakdownError, v then holds the last finite iterate).
func conjugateGradient(hvp func(dst, v []float64), v, b []float64, n int, tol float64) (int, error) {
	if tol == 0 {
		tol = -1 // implicit.CG: a negative tolerance runs all n steps
	}
	cg := implicit.CG{Tol: tol, MaxIter: n}
	stats, err := cg.Solve(v, hvp, b)
	var ce *implicit.CurvatureError
	if errors.As(err, &ce) {
		return stats.OpCalls, fmt.Errorf("conjugate gradient step %d: dᵀ ∇yy g d = %v ≤ 0, so ∇yy g is not positive definite at this (x, y) and batch: use larger Hessian batches, more inner steps, or a Neumann solver: %w", ce.Iter, ce.Curvature, err)
	}
	return stats.OpCalls, err
}

// neumann stores in dst the truncated Neumann series of paper 003,
// Algorithm 3, computed by implicit.Neumann from a cold start:
//
//	r_Q = v0,   r_{i−1} = r_i − η H_i r_i  (i = Q..1),   dst = η Σ_{i=0}^{Q} r_i,
//
// an estimate of H⁻¹ v0 with bias (I − ηH)^{Q+1} H⁻¹ v0, valid when
// 0 < η < 2/L. hvp(dst, v, i) applies H_i, the Hessian on the i-th batch; it
// is called for i = Q..1 in that order (Q HVPs in all; no power iteration,
// η is taken as given). It returns an *implicit.DivergenceError when a term
// grows beyond 10 times ‖v0‖ (η too large for the batch Hessians), or an
// *implicit.BreakdownError on NaN or ±Inf; dst then holds the partial sum.
func neumann(dst, v0 []float64, eta float64, q int, hvp func(dst, v []float64, i int)) error {
	clear(dst) // Algorithm 3 starts from v = 0; a nonzero dst would be a warm start
	ns := implicit.Neumann{
		Eta:        eta,
		Terms:      q,
		PowerIters: -1,
		Term: func(i int) implicit.Operator {
			return func(dst, v []float64) { hvp(dst, v, i) }
		},
	}
	// The operator of Solve is used only for a warm start's residual and
	// the η check, both skipped here; Term supplies every product.
	_, err := ns.Solve(dst, func(dst, v []float64) { hvp(dst, v, 0) }, v0)
	return err
}

// poisonOnBreakdown sets v to NaN when err is an *implicit.BreakdownError:
// the solve met a NaN or ±Inf (usually an oracle's output) and has no valid
// result, so v must not look like one. Solve's finite guard then reports the
// oracle and v, and returns the state before the iteration, as it does when
// a NaN reaches the state by any other route.
func poisonOnBreakdown(v []float64, err error) {
	var be *implicit.BreakdownError
	if errors.As(err, &be) {
		for i := range v {
			v[i] = math.NaN()
		}
	}
}

// lanczosSteps bounds the number of HVPs spent estimating L.
const lanczosSteps = 30

// keyCurvature is the State.Scalars entry caching the estimate of L.
const keyCurvature = "optim.curvature"

// curvature returns an estimate of L, the largest eigenvalue of ∇yy g at the
// state's (x, y) on the whole lower data set: the largest Ritz value of
// min(30, DimY) Lanczos steps from a fixed pseudo-random start (one HVP
// each; fewer if the Krylov space is exhausted). Ritz values never exceed
// L and converge to it much faster than a power iteration. The estimate is
// cached in st.Scalars, so it is computed once per run (by Init, at
// (x0, y0)) and a resumed run reuses it.
func curvature(p Problem, st *State) (float64, error) {
	if l, ok := st.Scalars[keyCurvature]; ok {
		return l, nil
	}
	l := lanczosMax(func(dst, v []float64) { p.HVP(dst, st.X, st.Y, v, nil) }, p.DimY(), lanczosSteps)
	if !(l > 0) || math.IsInf(l, 1) {
		return 0, fmt.Errorf("estimating the curvature L of ∇yy g at (x0, y0) for the default step size gave %v: set the step size explicitly", l)
	}
	st.Scalars[keyCurvature] = l
	return l, nil
}

// lanczosMax returns the largest eigenvalue of the tridiagonal matrix of at
// most k Lanczos steps on the symmetric operator hvp of dimension n.
func lanczosMax(hvp func(dst, v []float64), n, k int) float64 {
	k = min(k, n)
	q, prev, w := make([]float64, n), make([]float64, n), make([]float64, n)
	rnd := rand.New(rand.NewPCG(1, 2)) // fixed: the estimate must not depend on the run's seed
	for i := range q {
		q[i] = rnd.NormFloat64()
	}
	floats.Scale(1/floats.Norm(q, 2), q)
	var alphas, betas []float64
	beta := 0.0
	for j := range k {
		hvp(w, q)
		a := floats.Dot(q, w)
		alphas = append(alphas, a)
		if j == k-1 || !isFinite(a) {
			break
		}
		floats.AddScaled(w, -a, q)
		floats.AddScaled(w, -beta, prev)
		beta = floats.Norm(w, 2)
		if beta <= 1e-12*math.Abs(a) { // invariant subspace found: the Ritz values are exact
			break
		}
		betas = append(betas, beta)
		copy(prev, q)
		floats.ScaleTo(q, 1/beta, w)
	}
	m := len(alphas)
	t := mat.NewSymDense(m, nil)
	for i, a := range alphas {
		t.SetSym(i, i, a)
		if i+1 < m {
			t.SetSym(i, i+1, betas[i])
		}
	}
	var e mat.EigenSym
	if !e.Factorize(t, false) {
		return math.NaN()
	}
	return floats.Max(e.Values(nil))
}

// stepOrDefault returns step if it is set, else 1/L from curvature.
func stepOrDefault(step float64, st *State) float64 {
	if step > 0 {
		return step
	}
	return 1 / st.Scalars[keyCurvature]
}
