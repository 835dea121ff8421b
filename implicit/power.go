package implicit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// PowerIteration estimates the eigenvalue of largest magnitude of the
// symmetric operator op by the power method started from v, which must be
// nonzero. Each of at most maxIter steps applies op once; iteration stops
// early when the Rayleigh quotient changes by less than tol relative to its
// magnitude (tol ≤ 0 runs all maxIter steps). On return v holds the unit
// eigenvector estimate. It returns the last Rayleigh quotient vᵀAv/vᵀv and
// the number of operator applications. For positive semi-definite A the
// estimate approaches λmax from below, with error shrinking like
// (λ₂/λ₁)^(2k) after k steps.
func PowerIteration(v []float64, op Operator, maxIter int, tol float64) (lambda float64, iters int, err error) {
	return powerIteration(v, make([]float64, len(v)), op, maxIter, tol)
}

// LargestEigenvalue estimates λmax of a symmetric positive semi-definite
// operator of dimension dim by at most iters steps of power iteration from a
// pseudo-random start determined by seed. It stops early once the estimate
// is stable to 1e-12 relative.
func LargestEigenvalue(op Operator, dim, iters int, seed uint64) (float64, error) {
	v := make([]float64, dim)
	randomFill(v, seed)
	lambda, _, err := powerIteration(v, make([]float64, dim), op, iters, 1e-12)
	return lambda, err
}

// powerIteration is PowerIteration with caller-provided scratch av.
func powerIteration(v, av []float64, op Operator, maxIter int, tol float64) (lambda float64, iters int, err error) {
	if len(av) != len(v) {
		panic(fmt.Sprintf("implicit: power iteration: len(v) = %d, len(scratch) = %d", len(v), len(av)))
	}
	norm := floats.Norm(v, 2)
	if norm == 0 || !finite(norm) {
		return 0, 0, &BreakdownError{Solver: "power-iteration", Iter: 0, Quantity: "‖v0‖", Value: norm}
	}
	floats.Scale(1/norm, v)
	lambda = math.NaN()
	for k := 1; k <= maxIter; k++ {
		op(av, v)
		iters = k
		rq := floats.Dot(v, av) // v is unit, so this is the Rayleigh quotient
		anorm := floats.Norm(av, 2)
		if !finite(rq) || !finite(anorm) {
			return lambda, iters, &BreakdownError{Solver: "power-iteration", Iter: k, Quantity: "‖A·v‖", Value: anorm}
		}
		prev := lambda
		lambda = rq
		if anorm == 0 {
			// v lies in the null space; A is zero on the Krylov space of v.
			return 0, iters, nil
		}
		floats.ScaleTo(v, 1/anorm, av)
		if tol > 0 && math.Abs(lambda-prev) <= tol*math.Abs(lambda) {
			return lambda, iters, nil
		}
	}
	return lambda, iters, nil
}

// randomFill fills v with deterministic pseudo-random values in [-1, 1)
// from the splitmix64 sequence started at seed. It does not allocate.
func randomFill(v []float64, seed uint64) {
	s := seed
	for i := range v {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		v[i] = float64(z>>11)/(1<<52) - 1
	}
}
