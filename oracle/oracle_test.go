package oracle_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

// diagonal is g(x, y) = ½ Σ d_i y_i² − Σ x_i y_i, f(x, y) = ½‖y‖², with
// no data: batches are ignored.
type diagonal struct{ d []float64 }

func (p diagonal) DimX() int     { return len(p.d) }
func (p diagonal) DimY() int     { return len(p.d) }
func (p diagonal) NumLower() int { return 1 }
func (p diagonal) NumUpper() int { return 1 }

func (p diagonal) F(_, y []float64, _ []int) float64 {
	var s float64
	for _, v := range y {
		s += v * v / 2
	}
	return s
}

func (p diagonal) G(x, y []float64, _ []int) float64 {
	var s float64
	for i, v := range y {
		s += p.d[i]*v*v/2 - x[i]*v
	}
	return s
}

func (p diagonal) GradF(dx, dy, _, y []float64, _ []int) {
	if dx != nil {
		clear(dx)
	}
	if dy != nil {
		copy(dy, y)
	}
}

func (p diagonal) GradG(dx, dy, x, y []float64, _ []int) {
	for i := range y {
		if dx != nil {
			dx[i] = -y[i]
		}
		if dy != nil {
			dy[i] = p.d[i]*y[i] - x[i]
		}
	}
}

func (p diagonal) HVP(dst, _, _, v []float64, _ []int) {
	for i := range v {
		dst[i] = p.d[i] * v[i]
	}
}

func (p diagonal) MixedXY(dst, _, _, v []float64, _ []int) {
	for i := range v {
		dst[i] = -v[i]
	}
}

func (p diagonal) MixedYX(dst, _, _, u []float64, _ []int) { p.MixedXY(dst, nil, nil, u, nil) }

// HessYY stores the diagonal ∇yy g in dst.
func (p diagonal) HessYY(dst *mat.SymDense, _, _ []float64, _ []int) {
	for i, v := range p.d {
		dst.SetSym(i, i, v)
	}
}

// Capabilities declares the one optional oracle the problem has.
func (p diagonal) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HessYY: p.HessYY}
}

var _ oracle.Problem = diagonal{}

// Example shows a problem declaring its optional oracles: a consumer reads
// Capabilities and uses what is not nil, without any type assertion.
func Example() {
	var p oracle.Problem = diagonal{d: []float64{2, 4}}
	caps := p.Capabilities()
	fmt.Println("dense ∇yy g:", caps.HessYY != nil, "- linearized HVP:", caps.HVPAt != nil, "- batch check:", caps.CheckBatch != nil)
	h := mat.NewSymDense(p.DimY(), nil)
	caps.HessYY(h, nil, nil, nil)
	fmt.Println(mat.Formatted(h, mat.Squeeze()))
	c := oracle.Calls{GradG: 10, HVP: 7, F: 3}
	fmt.Println(c.Sub(oracle.Calls{GradG: 4}).Products())
	// Output:
	// dense ∇yy g: true - linearized HVP: false - batch check: false
	// ⎡2  0⎤
	// ⎣0  4⎦
	// 13
}
