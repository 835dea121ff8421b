package implicit

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// FixedPoint solves (A + ρI)·v = b by the stationary iteration of AID-FP,
//
//	v ← v − η·((A + ρI)·v − b),
//
// which converges linearly with rate max|1 − η(λ + ρ)| over the spectrum λ
// of A, for symmetric positive semi-definite A + ρI and 0 < η(λmax + ρ) < 2.
// The ridge ρ ≥ 0 damps a poorly conditioned or singular Hessian (Tikhonov
// regularization, as JAXopt's ridge option); it changes the solution.
// The zero value runs with ρ = 0, η = 1/λmax and the defaults below.
type FixedPoint struct {
	// Eta is the step η. Zero means 1/(λmax + ρ), with λmax estimated by at
	// most 30 power-iteration steps on the operator (stopping once the
	// estimate changes by less than 0.1%).
	Eta float64
	// Ridge is the damping ρ ≥ 0 added to the diagonal of A.
	Ridge float64
	// MaxIter caps the number of steps (one operator application each).
	// Zero means 1000. Hitting the cap is not an error.
	MaxIter int
	// Tol is the relative tolerance ‖b − (A + ρI)·v‖ ≤ Tol·‖b‖ on the exact
	// residual. Zero means 1e-10; negative runs all MaxIter steps.
	Tol float64
	// MaxGrowth is the divergence threshold on the residual norm relative to
	// the initial one. Zero means 10.
	MaxGrowth float64

	r, ar []float64 // scratch, reused across calls
}

// Solve iterates from the initial guess in dst and leaves the solution in
// dst. On a *DivergenceError or *BreakdownError the step that produced the
// growing or non-finite residual is undone, so dst holds the last iterate
// whose residual passed the checks.
func (s *FixedPoint) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	checkLen("FixedPoint", dst, b)
	n := len(b)
	tol := s.Tol
	if tol == 0 {
		tol = defaultTol
	}
	maxIter := s.MaxIter
	if maxIter == 0 {
		maxIter = 1000
	}
	growth := s.MaxGrowth
	if growth == 0 {
		growth = defaultMaxGrowth
	}
	rho := s.Ridge
	s.r, s.ar = grow(s.r, n), grow(s.ar, n)
	r, ar := s.r, s.ar

	var st Stats
	eta := s.Eta
	if eta == 0 {
		var calls int
		var err error
		eta, calls, err = checkedStep("fixed-point", 0, 0, 0, 0, rho, op, r, ar)
		st.OpCalls += calls
		if err != nil {
			return st, err
		}
	}

	// residual writes b − (A + ρI)·v into res.
	residual := func(res []float64) {
		op(ar, dst)
		st.OpCalls++
		for i := range res {
			res[i] = b[i] - ar[i] - rho*dst[i]
		}
	}
	bnorm := floats.Norm(b, 2)
	if isZero(dst) {
		copy(r, b)
	} else {
		residual(r)
	}
	r0 := floats.Norm(r, 2)
	if !finite(r0) || !finite(bnorm) {
		return st, &BreakdownError{Solver: "fixed-point", Iter: 0, Quantity: "‖b − A·v0‖", Value: r0}
	}
	stop := math.Max(tol, 0) * bnorm
	st.Residual = r0
	if r0 <= stop {
		st.Converged = true
		return st, nil
	}
	for k := 1; k <= maxIter; k++ {
		floats.AddScaled(dst, eta, r)
		residual(ar) // ar = b − (A + ρI)·v_k, computed in place over A·v_k
		rn := floats.Norm(ar, 2)
		if !finite(rn) || rn > growth*r0 {
			floats.AddScaled(dst, -eta, r) // back to v_{k−1}
			if !finite(rn) {
				return st, &BreakdownError{Solver: "fixed-point", Iter: k, Quantity: "‖r‖", Value: rn}
			}
			return st, &DivergenceError{Solver: "fixed-point", Iter: k, Norm: rn, Initial: r0, Eta: eta}
		}
		r, ar = ar, r
		st.Iterations = k
		st.Residual = rn
		if rn <= stop {
			st.Converged = true
			break
		}
	}
	return st, nil
}
