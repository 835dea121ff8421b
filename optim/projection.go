package optim

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Projection is the Euclidean projection onto a closed convex set:
// Project stores in dst the point of the set nearest to x. dst and x may be
// the same slice. Set Settings.ProjectX (or ProjectY) to constrain a run.
type Projection interface {
	Project(dst, x []float64)
}

// Box is the set {x : Lo ≤ x ≤ Hi} (componentwise).
type Box struct {
	lo, hi []float64
}

// NewBox returns the box between lo and hi, copied. A nil lo or hi means
// −∞ or +∞ in every coordinate; entries may be ±Inf.
func NewBox(lo, hi []float64) (*Box, error) {
	n := max(len(lo), len(hi))
	if n == 0 {
		return nil, errors.New("optim: NewBox: lo and hi are both empty")
	}
	fill := func(s []float64, v float64) []float64 {
		if s == nil {
			s = make([]float64, n)
			for i := range s {
				s[i] = v
			}
			return s
		}
		return append([]float64(nil), s...)
	}
	if lo != nil && hi != nil && len(lo) != len(hi) {
		return nil, fmt.Errorf("optim: NewBox: len(lo) = %d but len(hi) = %d", len(lo), len(hi))
	}
	b := &Box{lo: fill(lo, math.Inf(-1)), hi: fill(hi, math.Inf(1))}
	for i := range n {
		if !(b.lo[i] <= b.hi[i]) {
			return nil, fmt.Errorf("optim: NewBox: lo[%d] = %v is not ≤ hi[%d] = %v", i, b.lo[i], i, b.hi[i])
		}
	}
	return b, nil
}

// Dim returns the dimension of the box.
func (b *Box) Dim() int { return len(b.lo) }

// Project implements Projection by clamping each coordinate.
func (b *Box) Project(dst, x []float64) {
	checkProj("Box", len(b.lo), dst, x)
	for i, v := range x {
		dst[i] = min(max(v, b.lo[i]), b.hi[i])
	}
}

// Ball is the Euclidean ball {x : ‖x − center‖ ≤ radius}.
type Ball struct {
	center []float64
	radius float64
}

// NewBall returns the ball of the given center (copied) and radius ≥ 0.
func NewBall(center []float64, radius float64) (*Ball, error) {
	if len(center) == 0 {
		return nil, errors.New("optim: NewBall: empty center")
	}
	if !(radius >= 0) || math.IsInf(radius, 1) {
		return nil, fmt.Errorf("optim: NewBall: radius = %v, want a finite value ≥ 0", radius)
	}
	return &Ball{center: append([]float64(nil), center...), radius: radius}, nil
}

// Dim returns the dimension of the ball.
func (b *Ball) Dim() int { return len(b.center) }

// Project implements Projection: points outside move radially onto the
// sphere, points inside are copied unchanged.
func (b *Ball) Project(dst, x []float64) {
	checkProj("Ball", len(b.center), dst, x)
	d := floats.Distance(x, b.center, 2)
	if d <= b.radius {
		copy(dst, x)
		return
	}
	s := b.radius / d
	for i, v := range x {
		dst[i] = b.center[i] + s*(v-b.center[i])
	}
}

// Affine is the affine set {x : A x = b} for an m×n matrix A of full row rank
// m. The projection is x − Aᵀ (A Aᵀ)⁻¹ (A x − b), with A Aᵀ factorized once
// (Cholesky) by NewAffine.
type Affine struct {
	a    *mat.Dense
	b    []float64
	chol mat.Cholesky
}

// NewAffine returns the set {x : A x = b}, copying A and b. It fails if A does
// not have full row rank (A Aᵀ not positive definite or too ill-conditioned
// for the projection to be accurate).
func NewAffine(a mat.Matrix, b []float64) (*Affine, error) {
	m, n := a.Dims()
	if len(b) != m {
		return nil, fmt.Errorf("optim: NewAffine: A is %d×%d but len(b) = %d", m, n, len(b))
	}
	if m > n {
		return nil, fmt.Errorf("optim: NewAffine: A is %d×%d: more equations than unknowns cannot have full row rank", m, n)
	}
	p := &Affine{a: mat.DenseCopyOf(a), b: append([]float64(nil), b...)}
	var aat mat.SymDense
	aat.SymOuterK(1, p.a)
	if !p.chol.Factorize(&aat) {
		return nil, errors.New("optim: NewAffine: A Aᵀ is not positive definite: remove dependent rows of A")
	}
	if c := p.chol.Cond(); c > 1e12 {
		return nil, fmt.Errorf("optim: NewAffine: cond(A Aᵀ) ≈ %.3g: rows of A are nearly dependent, remove or rescale them", c)
	}
	return p, nil
}

// Dim returns the dimension n of the space.
func (p *Affine) Dim() int { _, n := p.a.Dims(); return n }

// Project implements Projection.
func (p *Affine) Project(dst, x []float64) {
	m, n := p.a.Dims()
	checkProj("Affine", n, dst, x)
	r := mat.NewVecDense(m, nil)
	r.MulVec(p.a, mat.NewVecDense(n, x))
	for i := range m {
		r.SetVec(i, r.AtVec(i)-p.b[i])
	}
	var z, c mat.VecDense
	if err := p.chol.SolveVecTo(&z, r); err != nil {
		// NewAffine rejected ill-conditioned A, so this cannot happen.
		panic("optim: Affine.Project: " + err.Error())
	}
	c.MulVec(p.a.T(), &z)
	for i := range n {
		dst[i] = x[i] - c.AtVec(i)
	}
}

func checkProj(kind string, n int, dst, x []float64) {
	if len(x) != n || len(dst) != n {
		panic(fmt.Sprintf("optim: %s.Project: len(dst) = %d, len(x) = %d, set has dimension %d", kind, len(dst), len(x), n))
	}
}

var (
	_ Projection = (*Box)(nil)
	_ Projection = (*Ball)(nil)
	_ Projection = (*Affine)(nil)
)
