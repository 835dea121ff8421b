package implicit

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// CG solves A·v = b by the conjugate gradient method, for symmetric positive
// definite A. The zero value is ready to use.
//
// AID-BiO (paper 003, Algorithm 1) runs a fixed number N of CG steps warm
// started from the previous outer iteration's solution: set MaxIter = N and
// Tol < 0, and pass the previous v in dst.
type CG struct {
	// Tol is the relative residual tolerance: CG stops once
	// ‖b − A·v‖ ≤ Tol·‖b‖ (recurrence residual). Zero means 1e-10; a negative
	// value disables the test, so exactly MaxIter steps run unless the
	// residual becomes exactly zero.
	Tol float64
	// MaxIter caps the number of CG steps (operator applications, plus one
	// for the residual of a warm start). Zero means 2·len(b); a negative
	// value is an error. Hitting the cap is not an error: Stats.Converged
	// is false.
	MaxIter int

	r, p, ap []float64 // scratch, reused across calls
}

// Solve runs CG from the initial guess in dst and leaves the solution in
// dst. It returns a *CurvatureError if a direction with pᵀAp ≤ 0 appears
// (dst then holds the last iterate before that step) and a *BreakdownError
// if the operator produces NaN or infinity.
func (s *CG) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	checkLen("CG", dst, b)
	n := len(b)
	tol := s.Tol
	if tol == 0 {
		tol = defaultTol
	}
	if err := checkIters("cg", "MaxIter", s.MaxIter); err != nil {
		return Stats{}, err
	}
	maxIter := s.MaxIter
	if maxIter == 0 {
		maxIter = 2 * n
	}
	s.r, s.p, s.ap = grow(s.r, n), grow(s.p, n), grow(s.ap, n)
	r, p, ap := s.r, s.p, s.ap

	var st Stats
	bnorm := floats.Norm(b, 2)
	if !finite(bnorm) {
		return st, &BreakdownError{Solver: "cg", Iter: 0, Quantity: "‖b‖", Value: bnorm}
	}
	// r = b − A·x0.
	if isZero(dst) {
		copy(r, b)
	} else {
		op(ap, dst)
		st.HVP++
		floats.SubTo(r, b, ap)
	}
	rr := floats.Dot(r, r)
	if !finite(rr) {
		return st, &BreakdownError{Solver: "cg", Iter: 0, Quantity: "‖b − A·v0‖²", Value: rr}
	}
	stop := math.Max(tol, 0) * bnorm
	st.Residual = math.Sqrt(rr)
	if st.Residual <= stop {
		st.Converged = true
		return st, nil
	}
	copy(p, r)
	for k := 1; k <= maxIter; k++ {
		op(ap, p)
		st.HVP++
		pap := floats.Dot(p, ap)
		if !finite(pap) {
			return st, &BreakdownError{Solver: "cg", Iter: k, Quantity: "pᵀAp", Value: pap}
		}
		if pap <= 0 {
			return st, &CurvatureError{Iter: k, Curvature: pap, PNormSq: floats.Dot(p, p)}
		}
		alpha := rr / pap
		floats.AddScaled(dst, alpha, p)
		floats.AddScaled(r, -alpha, ap)
		rrNew := floats.Dot(r, r)
		st.Iterations = k
		if !finite(rrNew) {
			// Undo the step so that dst keeps the last good iterate.
			floats.AddScaled(dst, -alpha, p)
			st.Iterations = k - 1
			return st, &BreakdownError{Solver: "cg", Iter: k, Quantity: "‖r‖²", Value: rrNew}
		}
		st.Residual = math.Sqrt(rrNew)
		if st.Residual <= stop {
			st.Converged = true
			return st, nil
		}
		beta := rrNew / rr
		rr = rrNew
		// p = r + β·p.
		for i := range p {
			p[i] = r[i] + beta*p[i]
		}
	}
	return st, nil
}
