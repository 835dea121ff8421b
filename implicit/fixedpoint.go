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
//
// Step k computes the residual r = b − (A_k + ρI)·v of the current iterate
// with the operator of step k (one application), stops there if it meets
// the tolerance, and otherwise moves v ← v + η·r. On a per-step source of
// stochastic estimates A_k (and right-hand sides b_k, see Operators) this
// is stochastic gradient descent on the quadratic ½vᵀ(A + ρI)v − bᵀv, the
// linear-system loop of AmIGO and SOBA.
type FixedPoint struct {
	// Eta is the step η. Zero means 1/(λmax + ρ), with λmax estimated by at
	// most 30 Lanczos steps on the operator of step 0 (stopping once the
	// estimate changes by less than 0.1%).
	Eta float64
	// Ridge is the damping ρ ≥ 0 added to the diagonal of A.
	Ridge float64
	// MaxIter caps the number of steps (one operator application each).
	// Zero means 1000; a negative value is an error. Hitting the cap is not
	// an error.
	MaxIter int
	// Tol is the relative tolerance ‖b − (A + ρI)·v‖ ≤ Tol·‖b‖ on the exact
	// residual. Zero means 1e-10; negative runs all MaxIter steps.
	Tol float64
	// MaxGrowth is the divergence threshold on the residual norm relative to
	// the initial one. Zero means 10; +Inf disables the check.
	MaxGrowth float64

	r, prev []float64 // scratch, reused across calls
	lz      lanczos
}

// Solve iterates from the initial guess in dst with the fixed operator op
// and leaves the solution in dst; see FixedPoint.
func (s *FixedPoint) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	return s.solve(dst, op, nil, b)
}

// SolveSteps iterates from the initial guess in dst, step k with the
// operator ops(k), and leaves the solution in dst. On a *DivergenceError or
// *BreakdownError the step before the one whose residual failed the checks
// is undone, so dst holds the last iterate whose residual passed them.
func (s *FixedPoint) SolveSteps(dst []float64, ops Operators, b []float64) (Stats, error) {
	return s.solve(dst, nil, ops, b)
}

// solve is Solve with op (ops nil) or SolveSteps with ops.
func (s *FixedPoint) solve(dst []float64, op Operator, ops Operators, b []float64) (Stats, error) {
	checkLen("FixedPoint", dst, b)
	n := len(b)
	if err := checkIters("fixed-point", "MaxIter", s.MaxIter); err != nil {
		return Stats{}, err
	}
	tol := s.Tol
	if tol == 0 {
		tol = defaultTol
	}
	maxIter := s.MaxIter
	if maxIter == 0 {
		maxIter = 1000
	}
	growth := orFloat(s.MaxGrowth, defaultMaxGrowth)
	rho := s.Ridge
	s.r, s.prev = grow(s.r, n), grow(s.prev, n)
	r, prev := s.r, s.prev

	at := source{op, ops}.at
	var st Stats
	eta := s.Eta
	if eta == 0 {
		var calls int
		var err error
		eta, calls, err = checkedStep("fixed-point", 0, 0, 0, 0, rho, func() Operator { return at(0) }, r, &s.lz)
		st.HVP += calls
		if err != nil {
			return st, err
		}
	}
	var r0, stop float64
	for k := 1; k <= maxIter; k++ {
		// r = b − (A_k + ρI)·v, over A_k·v.
		at(k)(r, dst)
		st.HVP++
		if rho == 0 {
			for i := range r {
				r[i] = b[i] - r[i]
			}
		} else {
			for i := range r {
				r[i] = b[i] - r[i] - rho*dst[i]
			}
		}
		rn := floats.Norm(r, 2)
		if k == 1 {
			bnorm := floats.Norm(b, 2)
			if !finite(rn) || !finite(bnorm) {
				return st, &BreakdownError{Solver: "fixed-point", Iter: 0, Quantity: "‖b − A·v0‖", Value: rn}
			}
			r0, stop = rn, math.Max(tol, 0)*bnorm
		} else if !finite(rn) || rn > growth*r0 {
			floats.AddScaled(dst, -eta, prev) // back to the iterate of step k−2
			st.Iterations--
			if !finite(rn) {
				return st, &BreakdownError{Solver: "fixed-point", Iter: k - 1, Quantity: "‖r‖", Value: rn}
			}
			return st, &DivergenceError{Solver: "fixed-point", Iter: k - 1, Norm: rn, Initial: r0, Eta: eta}
		}
		st.Residual = rn
		if tol >= 0 && rn <= stop {
			st.Converged = true
			return st, nil
		}
		floats.AddScaled(dst, eta, r)
		st.Iterations = k
		r, prev = prev, r
	}
	return st, nil
}
