package unroll_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/unroll"
)

// quad2 is g(x, y) = ½(2y₁² + y₂²) − xᵀy and f(x, y) = ½‖y − c‖², so
// y*(x) = (x₁/2, x₂) and ∇Φ(x) = A⁻¹(y* − c) = ((x₁/2 − c₁)/2, x₂ − c₂).
type quad2 struct{ c [2]float64 }

var diag = [2]float64{2, 1}

func (p quad2) F(_, y []float64, _ []int) float64 {
	d0, d1 := y[0]-p.c[0], y[1]-p.c[1]
	return (d0*d0 + d1*d1) / 2
}

func (p quad2) GradF(dx, dy, _, y []float64, _ []int) {
	if dx != nil {
		dx[0], dx[1] = 0, 0
	}
	if dy != nil {
		dy[0], dy[1] = y[0]-p.c[0], y[1]-p.c[1]
	}
}

func (p quad2) GradG(dx, dy, x, y []float64, _ []int) {
	for i := 0; i < 2; i++ {
		if dx != nil {
			dx[i] = -y[i]
		}
		if dy != nil {
			dy[i] = diag[i]*y[i] - x[i]
		}
	}
}

func (p quad2) HVP(dst, _, _, v []float64, _ []int) {
	dst[0], dst[1] = diag[0]*v[0], diag[1]*v[1]
}

// MixedXY is ∇x⟨∇y g, v⟩ = ∇x⟨Ay − x, v⟩ = −v.
func (p quad2) MixedXY(dst, _, _, v []float64, _ []int) {
	dst[0], dst[1] = -v[0], -v[1]
}

func ExampleUnroller_Hypergradient() {
	p := quad2{c: [2]float64{1, 1}}
	x := []float64{1, 0.5}
	y0 := []float64{0, 0}
	fmt.Println("exact ∇Φ = [-0.250000 -0.500000]")
	grad := make([]float64, 2)
	for _, T := range []int{5, 20, 60} {
		u := unroll.Unroller{Steps: T, Alpha: 0.4} // gradient descent, α·L = 0.8
		res, err := u.Hypergradient(grad, p, x, y0, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("GD T=%-2d ∇Φ ≈ [%.6f %.6f]  f = %.6f  HVPs %d, mixed %d, %d bytes\n",
			T, grad[0], grad[1], p.F(x, u.Final(), nil), res.Calls.HVP, res.Calls.MixedXY, res.StorageBytes)
	}
	hb := unroll.Unroller{Steps: 60, Alpha: 0.4, Momentum: 0.3, Truncate: 30}
	if _, err := hb.Hypergradient(grad, p, x, y0, nil); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("HB T=60 K=30 ∇Φ ≈ [%.6f %.6f], y_T = [%.6f %.6f]\n", grad[0], grad[1], hb.Final()[0], hb.Final()[1])
	// Output:
	// exact ∇Φ = [-0.250000 -0.500000]
	// GD T=5  ∇Φ ≈ [-0.250000 -0.496977]  f = 0.270276  HVPs 4, mixed 5, 96 bytes
	// GD T=20 ∇Φ ≈ [-0.250000 -0.500000]  f = 0.250009  HVPs 19, mixed 20, 336 bytes
	// GD T=60 ∇Φ ≈ [-0.250000 -0.500000]  f = 0.250000  HVPs 59, mixed 60, 976 bytes
	// HB T=60 K=30 ∇Φ ≈ [-0.250000 -0.500000], y_T = [0.500000 0.500000]
}
