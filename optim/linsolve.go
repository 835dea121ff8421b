package optim

// Linear-system helpers for the hypergradient: conjugate gradient and the
// Neumann series on ∇yy g v = ∇y f, and a Lanczos estimate of the curvature
// bound behind default step sizes. They act on an HVP given as a function,
// so they can later be replaced by the implicit package without touching the
// methods.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// conjugateGradient runs at most n steps of CG on H v = b from the warm
// start v (overwritten with the result), H applied by hvp. It stops early
// when ‖r‖ ≤ tol·‖b‖ (tol 0: only on an exactly zero residual). The initial
// residual b − H v costs one extra HVP unless v is exactly zero, so a warm
// start costs n+1 HVPs and a cold start n. r, d and hd are scratch vectors.
// It returns the number of HVPs, or an error if H shows non-positive
// curvature along a search direction.
func conjugateGradient(hvp func(dst, v []float64), v, b []float64, n int, tol float64, r, d, hd []float64) (int, error) {
	calls := 0
	if isZero(v) {
		copy(r, b)
	} else {
		hvp(hd, v)
		calls++
		floats.SubTo(r, b, hd)
	}
	rr := floats.Dot(r, r)
	stop := tol * tol * floats.Dot(b, b)
	var rrOld float64
	for i := range n {
		if rr == 0 || rr <= stop {
			break
		}
		if i == 0 {
			copy(d, r)
		} else {
			beta := rr / rrOld
			for j := range d {
				d[j] = r[j] + beta*d[j]
			}
		}
		hvp(hd, d)
		calls++
		dHd := floats.Dot(d, hd)
		if dHd <= 0 { // NaN passes on, for the finite guard to name the oracle
			return calls, fmt.Errorf("conjugate gradient step %d: dᵀ ∇yy g d = %v ≤ 0, so ∇yy g is not positive definite at this (x, y) and batch: use larger Hessian batches, more inner steps, or a Neumann solver", i+1, dHd)
		}
		a := rr / dHd
		floats.AddScaled(v, a, d)
		floats.AddScaled(r, -a, hd)
		rrOld, rr = rr, floats.Dot(r, r)
	}
	return calls, nil
}

// neumann stores in dst the truncated Neumann series of paper 003,
// Algorithm 3:
//
//	r_Q = v0,   r_{i−1} = r_i − η H_i r_i  (i = Q..1),   dst = η Σ_{i=0}^{Q} r_i,
//
// an estimate of H⁻¹ v0 with bias (I − ηH)^{Q+1} H⁻¹ v0, valid when
// 0 < η < 2/L. hvp(dst, v, i) applies H_i, the Hessian on the i-th batch
// (Q HVPs in all). r and hr are scratch vectors.
func neumann(dst, v0 []float64, eta float64, q int, hvp func(dst, v []float64, i int), r, hr []float64) {
	copy(r, v0)
	copy(dst, v0)
	for i := q; i >= 1; i-- {
		hvp(hr, r, i)
		floats.AddScaled(r, -eta, hr)
		floats.Add(dst, r)
	}
	floats.Scale(eta, dst)
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

func isZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
