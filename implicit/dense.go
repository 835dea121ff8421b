package implicit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Dense solves A·v = b exactly for small systems: it assembles A column by
// column from n = len(b) operator applications on the unit vectors,
// symmetrizes it, and solves by Cholesky factorization (gonum mat.Cholesky).
// It costs n operator calls, n² memory and O(n³) time, so it suits d_y up to
// a few hundred, and tests. The initial content of dst is ignored.
// The zero value is ready to use.
type Dense struct {
	// SymTol is the largest admitted asymmetry max|A − Aᵀ| relative to
	// max|A|; a larger one is reported as an error because the solvers of
	// this package assume a symmetric operator. Zero means 1e-8.
	SymTol float64

	e, col, full []float64
	a            *mat.SymDense
	chol         mat.Cholesky
}

// Solve assembles A, factorizes it and writes A⁻¹·b to dst. It returns an
// error matching ErrNotPositiveDefinite if the factorization fails, and a
// wrapped mat.Condition error (with dst filled) if A is too ill-conditioned
// for the answer to be trusted.
func (s *Dense) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	checkLen("Dense", dst, b)
	n := len(b)
	symTol := s.SymTol
	if symTol == 0 {
		symTol = 1e-8
	}
	s.e, s.col, s.full = grow(s.e, n), grow(s.col, n), grow(s.full, n*n)
	full := s.full
	if s.a == nil || s.a.SymmetricDim() != n {
		s.a = mat.NewSymDense(n, nil)
	}
	raw := s.a.RawSymmetric()
	var st Stats
	// Column j of A goes into column j of the row-major full; the upper
	// triangle of its symmetric part then goes into s.a.
	for i := range s.e {
		s.e[i] = 0
	}
	for j := 0; j < n; j++ {
		s.e[j] = 1
		op(s.col, s.e)
		st.HVP++
		s.e[j] = 0
		for i := 0; i < n; i++ {
			full[i*n+j] = s.col[i]
		}
	}
	maxAbs, maxAsym := 0.0, 0.0
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			aij, aji := full[i*n+j], full[j*n+i]
			if !finite(aij) || !finite(aji) {
				return st, &BreakdownError{Solver: "dense", Iter: j + 1, Quantity: fmt.Sprintf("A[%d,%d]", i, j), Value: aij + aji}
			}
			maxAbs = math.Max(maxAbs, math.Max(math.Abs(aij), math.Abs(aji)))
			maxAsym = math.Max(maxAsym, math.Abs(aij-aji))
			raw.Data[i*raw.Stride+j] = (aij + aji) / 2
		}
	}
	if maxAsym > symTol*maxAbs {
		return st, fmt.Errorf("%w: dense: max|A − Aᵀ| = %.3g with max|A| = %.3g", ErrNotPositiveDefinite, maxAsym, maxAbs)
	}
	if !s.chol.Factorize(s.a) {
		return st, fmt.Errorf("%w: dense: Cholesky factorization of the %d×%d operator failed", ErrNotPositiveDefinite, n, n)
	}
	dv := mat.NewVecDense(n, dst)
	condErr := s.chol.SolveVecTo(dv, mat.NewVecDense(n, b))
	// Exact residual with the assembled matrix.
	var res float64
	for i := 0; i < n; i++ {
		ri := b[i]
		for j := 0; j < n; j++ {
			ri -= s.a.At(i, j) * dst[j]
		}
		res += ri * ri
	}
	st.Residual = math.Sqrt(res)
	if condErr != nil {
		return st, fmt.Errorf("implicit: dense: %w", condErr)
	}
	st.Converged = true
	return st, nil
}
