package optim_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// toy is the bilevel problem
//
//	g(x, y) = ½ yᵀ diag(2, 4) y − yᵀx,   f(x, y) = ½‖y − c‖²,
//
// so y*(x) = (x₁/2, x₂/4) and Φ(x) = ½‖y*(x) − c‖² is minimal at
// x* = (2c₁, 4c₂). It has no data, so batches are ignored.
type toy struct{ c [2]float64 }

var a = [2]float64{2, 4}

func (toy) DimX() int     { return 2 }
func (toy) DimY() int     { return 2 }
func (toy) NumLower() int { return 1 }
func (toy) NumUpper() int { return 1 }

func (p toy) F(x, y []float64, _ []int) float64 {
	d0, d1 := y[0]-p.c[0], y[1]-p.c[1]
	return (d0*d0 + d1*d1) / 2
}

func (toy) G(x, y []float64, _ []int) float64 {
	return (a[0]*y[0]*y[0]+a[1]*y[1]*y[1])/2 - y[0]*x[0] - y[1]*x[1]
}

func (p toy) GradF(dx, dy, x, y []float64, _ []int) {
	for i := range 2 {
		if dx != nil {
			dx[i] = 0
		}
		if dy != nil {
			dy[i] = y[i] - p.c[i]
		}
	}
}

func (toy) GradG(dx, dy, x, y []float64, _ []int) {
	for i := range 2 {
		if dx != nil {
			dx[i] = -y[i]
		}
		if dy != nil {
			dy[i] = a[i]*y[i] - x[i]
		}
	}
}

func (toy) HVP(dst, x, y, v []float64, _ []int) {
	for i := range 2 {
		dst[i] = a[i] * v[i]
	}
}

func (toy) MixedXY(dst, x, y, v []float64, _ []int) {
	for i := range 2 {
		dst[i] = -v[i]
	}
}

func (toy) MixedYX(dst, x, y, u []float64, _ []int) {
	for i := range 2 {
		dst[i] = -u[i]
	}
}

// Capabilities declares the optional oracles: toy has none (no linearized
// HVP, no dense matrices, every batch size works).
func (toy) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// ExampleSolve runs AID-BiO (paper 003, Algorithm 1) with 5 inner gradient
// steps and 2 conjugate-gradient steps per outer iteration, until the
// hypergradient estimate is below 1e-10.
func ExampleSolve() {
	p := toy{c: [2]float64{1, -0.25}} // x* = (2, -1)
	rec := &optim.MemoryRecorder{}
	method := optim.AIDBiO{
		Alpha: 0.25, // inner step α ≤ 1/L with L = 4
		D:     5,
		N:     2,
		Outer: optim.SGD{LR: 4}, // β = 1/L_Φ with L_Φ = 1/4
	}
	res, err := optim.Solve(p, []float64{0, 0}, []float64{0, 0},
		&optim.Settings{GradTol: 1e-10, Recorder: rec}, method)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("x = [%.4f %.4f], y = [%.4f %.4f]\n", res.X[0], res.X[1], res.Y[0], res.Y[1])
	fmt.Println("status:", res.Status)
	c := rec.Records[0].Calls
	fmt.Printf("iteration 0: %d GradG, %d GradF, %d MixedXY\n", c.GradG, c.GradF, c.MixedXY)
	// Output:
	// x = [2.0000 -1.0000], y = [1.0000 -0.2500]
	// status: GradientThreshold
	// iteration 0: 5 GradG, 1 GradF, 1 MixedXY
}
