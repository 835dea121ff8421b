package implicit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Spectral solves linear systems with the nearest symmetric matrix whose
// eigenvalues lie in [Lo, Hi], for the methods that carry an explicit
// estimate H of ∇yy g that may be indefinite or ill-conditioned: P̲ of
// STABLE (paper 000, eq. 9b: Lo = μ_g, Hi = +Inf, the eigenvalue floor
// onto {H ⪰ μ_g I}) and S_[μ,L_g] of MGBiO (paper 001, eq. 13).
// Factorize eigendecomposes the symmetric part of H (gonum mat.EigenSym)
// and clips its eigenvalues, H = U diag(θ) Uᵀ with θ_i ∈ [Lo, Hi]; Solve
// then applies H⁻¹b = Σ_i (U_iᵀb/θ_i) U_i (paper 001, eqs. 14–15). It
// costs O(n³) per Factorize and O(n²) per Solve, so it suits small d_y.
// Lo must be positive for Solve to be defined. The zero value clips
// nothing and is not usable before Factorize.
type Spectral struct {
	// Lo and Hi bound the eigenvalues; Hi = 0 means +Inf.
	Lo, Hi float64

	n    int
	vals []float64 // eigenvalues of the projected matrix, in [Lo, Hi]
	vecs mat.Dense // orthonormal eigenvectors, one per column
	tmp  []float64
}

// Factorize factorizes the projection of the symmetric part of the n × n
// row-major a onto {H = Hᵀ : Lo ≤ λ(H) ≤ Hi} in the Frobenius norm, and
// stores it in dst (which may be a), so that a recursive estimate can go
// on from it. A matrix whose eigenvalues already lie in [Lo, Hi] is only
// symmetrized (an exactly symmetric one is left unchanged, bit for bit).
// It fails only if the eigendecomposition does (non-finite entries).
func (s *Spectral) Factorize(dst, a []float64, n int) error {
	hi := s.Hi
	if hi == 0 {
		hi = math.Inf(1)
	}
	s.n = n
	sym := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, (a[i*n+j]+a[j*n+i])/2)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(sym, true) {
		return fmt.Errorf("implicit: spectral: eigendecomposition of a %d×%d Hessian estimate failed (non-finite entries?)", n, n)
	}
	s.vals = es.Values(nil)
	es.VectorsTo(&s.vecs)
	clipped := false
	for i, v := range s.vals {
		c := math.Min(math.Max(v, s.Lo), hi)
		clipped = clipped || c != v
		s.vals[i] = c
	}
	if !clipped {
		for i := range n {
			for j := i; j < n; j++ {
				v := sym.At(i, j)
				dst[i*n+j], dst[j*n+i] = v, v
			}
		}
		return nil
	}
	for i := range n {
		for j := i; j < n; j++ {
			var v float64
			for k, l := range s.vals {
				v += s.vecs.At(i, k) * l * s.vecs.At(j, k)
			}
			dst[i*n+j], dst[j*n+i] = v, v
		}
	}
	return nil
}

// Solve stores H⁻¹b in dst for the matrix H of the last Factorize. dst may
// be b.
func (s *Spectral) Solve(dst, b []float64) {
	n := s.n
	checkLen("Spectral", dst, b)
	if len(b) != n {
		panic(fmt.Sprintf("implicit: Spectral: len(b) = %d for a %d×%d factorization", len(b), n, n))
	}
	s.tmp = grow(s.tmp, n)
	c := s.tmp
	for k := range n {
		var d float64
		for i := range n {
			d += s.vecs.At(i, k) * b[i]
		}
		c[k] = d / s.vals[k]
	}
	for i := range n {
		var v float64
		for k := range n {
			v += s.vecs.At(i, k) * c[k]
		}
		dst[i] = v
	}
}
