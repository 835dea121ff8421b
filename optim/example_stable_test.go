package optim_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/optim"
)

// ExampleSTABLE runs STABLE (paper 000, Algorithm 1) on the toy problem of
// ExampleSolve with exact oracles. The toy problem declares no HessYY or
// HessXY (its Capabilities are empty), so STABLE assembles ∇yy g from 2 HVPs and ∇xy g from 2 MixedYX
// products, at two iterates from the second iteration on (eq. 9).
func ExampleSTABLE() {
	p := toy{c: [2]float64{1, -0.25}} // x* = (2, -1)
	rec := &optim.MemoryRecorder{}
	method := optim.STABLE{
		Alpha: 4,    // upper step α = 1/L_Φ with L_Φ = 1/4
		Beta:  0.25, // lower step β = 1/L with L = 4
		Mu:    1,    // eigenvalue floor below μ_g = 2: inactive
	}
	res, err := optim.Solve(p, []float64{0, 0}, []float64{0, 0},
		&optim.Settings{GradTol: 1e-10, Recorder: rec}, method)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("x = [%.4f %.4f], y = [%.4f %.4f]\n", res.X[0], res.X[1], res.Y[0], res.Y[1])
	fmt.Println("status:", res.Status)
	c := rec.Records[1].Calls.Sub(rec.Records[0].Calls)
	fmt.Printf("iteration 1: %d GradG, %d GradF, %d dense matrices (%d HVP, %d MixedYX)\n", c.GradG, c.GradF, c.Dense, c.HVP, c.MixedYX)
	// Output:
	// x = [2.0000 -1.0000], y = [1.0000 -0.2500]
	// status: GradientThreshold
	// iteration 1: 1 GradG, 1 GradF, 4 dense matrices (4 HVP, 4 MixedYX)
}
