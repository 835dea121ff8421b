package optim

// Explicit second-derivative matrices for the methods that need them
// (STABLE, paper 000; MGBiO, MSGBiO and VR-MSGBiO, paper 001): assembly from
// the oracles, and the ball projections of the two papers (the eigenvalue
// clip of their Hessian estimates, with its solve, is implicit.Spectral).
// Matrices are flat row-major []float64 so that they can live in
// State.Vecs and be saved with the State; gonum views wrap them without
// copying.

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// hessYYInto stores ∇yy g(x, y; batch) in the row-major DimY × DimY dst,
// exactly symmetric, and counts one dense matrix in st.Calls.Dense. It uses
// the problem's HessYY when the problem declares it
// (oracle.Capabilities) and otherwise assembles the matrix from DimY HVPs
// (one column each, then symmetrized), which are counted as HVPs.
func hessYYInto(p oracle.Problem, st *State, dst, x, y []float64, batch []int) {
	n := p.DimY()
	st.Calls.Dense++
	if hess := p.Capabilities().HessYY; hess != nil {
		s := mat.NewSymDense(n, nil)
		hess(s, x, y, batch)
		for i := range n {
			for j := i; j < n; j++ {
				v := s.At(i, j)
				dst[i*n+j], dst[j*n+i] = v, v
			}
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
// counts one dense matrix in st.Calls.Dense. It uses the problem's HessXY
// when the problem declares it and otherwise assembles the matrix from
// min(DimX, DimY) mixed products (MixedYX gives a row, MixedXY a column),
// which are counted as such.
func hessXYInto(p oracle.Problem, st *State, dst, x, y []float64, batch []int) {
	nx, ny := p.DimX(), p.DimY()
	st.Calls.Dense++
	if hess := p.Capabilities().HessXY; hess != nil {
		hess(mat.NewDense(nx, ny, dst), x, y, batch)
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
