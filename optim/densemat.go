package optim

// Explicit second-derivative matrices for the methods that need them
// (STABLE, paper 000; MGBiO, MSGBiO and VR-MSGBiO, paper 001): assembly from
// the oracles, and the matrix projections of the two papers. Matrices are
// flat row-major []float64 so that they can live in State.Vecs and be saved
// with the State; gonum views wrap them without copying.

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// DenseProblem is an optional interface of a Problem that assembles the
// second derivatives of g as dense matrices, on a lower-level batch (nil:
// the whole data set). Package graph's *graph.Problem implements it.
//
// The methods that work with explicit matrices (STABLE, MGBiO, MSGBiO,
// VRMSGBiO) use it when the Problem implements it; otherwise they assemble
// ∇yy g from DimY HVPs (one column each, then symmetrized) and ∇xy g from
// min(DimX, DimY) mixed products (MixedYX gives a row, MixedXY a column),
// and those calls are counted as HVP, MixedYX or MixedXY. Either way every
// matrix formed adds 1 to Calls.Dense.
type DenseProblem interface {
	// HessYY stores ∇yy g(x, y), DimY × DimY, in dst.
	HessYY(dst *mat.SymDense, x, y []float64, batch []int)
	// HessXY stores ∇xy g(x, y), DimX × DimY, in dst: entry (i, j) is
	// ∂²g/∂x_i∂y_j, so that column j is MixedXY of the unit vector e_j.
	HessXY(dst *mat.Dense, x, y []float64, batch []int)
}

// denseOf returns the DenseProblem behind p, looking through Solve's
// counting wrapper, and that wrapper (nil outside Solve).
func denseOf(p Problem) (DenseProblem, *counter) {
	c, _ := p.(*counter)
	inner := p
	if c != nil {
		inner = c.p
	}
	d, _ := inner.(DenseProblem)
	return d, c
}

// hessYYInto stores ∇yy g(x, y; batch) in the row-major DimY × DimY dst,
// exactly symmetric, and counts one dense matrix in st.Calls.Dense.
func hessYYInto(p Problem, st *State, dst, x, y []float64, batch []int) {
	n := p.DimY()
	st.Calls.Dense++
	if dp, c := denseOf(p); dp != nil {
		s := mat.NewSymDense(n, nil)
		dp.HessYY(s, x, y, batch)
		for i := range n {
			for j := i; j < n; j++ {
				v := s.At(i, j)
				dst[i*n+j], dst[j*n+i] = v, v
			}
		}
		if c != nil {
			c.vector("HessYY", st.Calls.Dense, dst)
		}
		return
	}
	e, col := st.Work("dense.e", n), st.Work("dense.col", n)
	clear(e)
	for j := range n {
		e[j] = 1
		p.HVP(col, x, y, e, batch)
		e[j] = 0
		for i, v := range col {
			dst[i*n+j] = v
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			v := (dst[i*n+j] + dst[j*n+i]) / 2
			dst[i*n+j], dst[j*n+i] = v, v
		}
	}
}

// hessXYInto stores ∇xy g(x, y; batch) in the row-major DimX × DimY dst and
// counts one dense matrix in st.Calls.Dense.
func hessXYInto(p Problem, st *State, dst, x, y []float64, batch []int) {
	nx, ny := p.DimX(), p.DimY()
	st.Calls.Dense++
	if dp, c := denseOf(p); dp != nil {
		dp.HessXY(mat.NewDense(nx, ny, dst), x, y, batch)
		if c != nil {
			c.vector("HessXY", st.Calls.Dense, dst)
		}
		return
	}
	if nx <= ny { // row i is ∇yx g · e_i
		e := st.Work("dense.ex", nx)
		clear(e)
		for i := range nx {
			e[i] = 1
			p.MixedYX(dst[i*ny:(i+1)*ny], x, y, e, batch)
			e[i] = 0
		}
		return
	}
	e, col := st.Work("dense.e", ny), st.Work("dense.colx", nx) // column j is ∇xy g · e_j
	clear(e)
	for j := range ny {
		e[j] = 1
		p.MixedXY(col, x, y, e, batch)
		e[j] = 0
		for i, v := range col {
			dst[i*ny+j] = v
		}
	}
}

// denseClipNorm projects a onto the Euclidean ball {‖a‖₂ ≤ r} in place: it
// rescales a by r/‖a‖ when ‖a‖ > r. For a flat matrix this is the
// Frobenius-ball projection P̄ of paper 000, eq. 9a, and for a vector the
// projection Π_C of paper 001 (notation, line 89). r = +Inf does nothing.
func denseClipNorm(a []float64, r float64) {
	if n := floats.Norm(a, 2); n > r {
		floats.Scale(r/n, a)
	}
}

// denseSymClip is the projection of a symmetric matrix onto the matrices whose
// eigenvalues lie in [lo, hi], with the eigendecomposition of the result,
// which applies its inverse.
type denseSymClip struct {
	n    int
	vals []float64 // eigenvalues of the projected matrix, in [lo, hi]
	vecs mat.Dense // orthonormal eigenvectors, one per column
	tmp  []float64
}

// project stores in dst (n × n, row-major; it may be a) the projection of
// the symmetric part of a onto {H = Hᵀ : lo ≤ λ(H) ≤ hi} in the Frobenius
// norm: with (a + aᵀ)/2 = U diag(λ) Uᵀ, dst = U diag(clip(λ, lo, hi)) Uᵀ.
// This is P̲ of paper 000, eq. 9b (lo = μ_g, hi = +Inf: the eigenvalue
// floor onto {H ⪰ μ_g I}) and S_[μ,L_g] of paper 001 (notation, line 89;
// eq. 13). A matrix whose eigenvalues already lie in [lo, hi] is only
// symmetrized (so an exactly symmetric one is left unchanged, bit for bit).
// It fails only if the eigendecomposition does (non-finite entries).
func (s *denseSymClip) project(dst, a []float64, n int, lo, hi float64) error {
	s.n = n
	sym := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, (a[i*n+j]+a[j*n+i])/2)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(sym, true) {
		return fmt.Errorf("eigendecomposition of a %d×%d Hessian estimate failed (non-finite entries?)", n, n)
	}
	s.vals = es.Values(nil)
	es.VectorsTo(&s.vecs)
	clipped := false
	for i, v := range s.vals {
		c := math.Min(math.Max(v, lo), hi)
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

// solve stores H⁻¹ b in dst for the projected H of the last project,
// H⁻¹ b = Σ_i (U_iᵀ b / θ_i) U_i (paper 001, eqs. 14–15). dst may be b.
func (s *denseSymClip) solve(dst, b []float64) {
	n := s.n
	if cap(s.tmp) < n {
		s.tmp = make([]float64, n)
	}
	c := s.tmp[:n]
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

// denseClipSpectral projects the r × c row-major a onto the spectral-norm ball
// {‖X‖₂ ≤ bound} in place, by thresholding its singular values at bound:
// a = W Σ Vᵀ becomes W min(Σ, bound) Vᵀ. This is Π̂_C of paper 001
// (notation, line 89; Algorithm 2, line 10). a is unchanged when its
// largest singular value is ≤ bound; bound = +Inf does nothing.
func denseClipSpectral(a []float64, r, c int, bound float64) error {
	if math.IsInf(bound, 1) {
		return nil
	}
	m := mat.NewDense(r, c, a)
	var svd mat.SVD
	if !svd.Factorize(m, mat.SVDThin) {
		return fmt.Errorf("singular value decomposition of a %d×%d Jacobian estimate failed (non-finite entries?)", r, c)
	}
	sv := svd.Values(nil)
	if len(sv) == 0 || sv[0] <= bound {
		return nil
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	for i := range r {
		for j := range c {
			var x float64
			for k, s := range sv {
				x += u.At(i, k) * math.Min(s, bound) * v.At(j, k)
			}
			a[i*c+j] = x
		}
	}
	return nil
}

// denseMulVec stores M v in dst for the r × c row-major M.
func denseMulVec(dst, m []float64, r, c int, v []float64) {
	for i := range r {
		dst[i] = floats.Dot(m[i*c:(i+1)*c], v)
	}
}

// denseMulTVec stores Mᵀ u in dst for the r × c row-major M.
func denseMulTVec(dst, m []float64, r, c int, u []float64) {
	clear(dst)
	for i := range r {
		floats.AddScaled(dst, u[i], m[i*c:(i+1)*c])
	}
}

// denseRadius returns v, or +Inf for 0: a zero radius or bound means "none".
func denseRadius(v float64) float64 {
	if v == 0 {
		return math.Inf(1)
	}
	return v
}

// checkDenseParam validates a setting that must be finite and > 0, or 0 for
// the documented default zero.
func checkDenseParam(name string, v float64, zero string) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%s = %v: set a finite value > 0, or 0 for %s", name, v, zero)
	}
	return nil
}
