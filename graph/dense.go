package graph

import "gonum.org/v1/gonum/mat"

// Dense second derivatives of g, for small inner problems: assembled
// column by column from products at one linearization.

// HessYY assembles the dense Hessian ∇yy g(x, y) (DimY × DimY) from DimY
// Hessian-vector products at one linearization, symmetrized, into dst,
// which is resized when empty. Meant for small DimY.
func (p *Problem) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	n := p.dimY
	if dst.IsEmpty() {
		dst.ReuseAsSym(n)
	}
	if dst.SymmetricDim() != n {
		panic("graph: HessYY destination has the wrong size")
	}
	l := p.Linearize(x, y, batch)
	e := make([]float64, n)
	cols := mat.NewDense(n, n, nil)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		e[j] = 1
		l.HVP(col, e)
		e[j] = 0
		cols.SetCol(j, col)
	}
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			dst.SetSym(i, j, (cols.At(i, j)+cols.At(j, i))/2)
		}
	}
}

// HessXY assembles the dense mixed second derivative ∇xy g(x, y), the
// DimX × DimY matrix whose column j is ∇xy g · e_j, into dst, which is
// resized when empty. Meant for small DimY.
func (p *Problem) HessXY(dst *mat.Dense, x, y []float64, batch []int) {
	if dst.IsEmpty() {
		dst.ReuseAs(p.dimX, p.dimY)
	}
	if r, c := dst.Dims(); r != p.dimX || c != p.dimY {
		panic("graph: HessXY destination has the wrong size")
	}
	l := p.Linearize(x, y, batch)
	e := make([]float64, p.dimY)
	col := make([]float64, p.dimX)
	for j := 0; j < p.dimY; j++ {
		e[j] = 1
		l.MixedXY(col, e)
		e[j] = 0
		dst.SetCol(j, col)
	}
}
