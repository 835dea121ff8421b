package optim_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/optim"
)

// ExampleNBOGD runs NBO-GD (paper 002, Algorithm 2) with one HVP round per
// iteration (T = 1, the paper's experimental setting) on the toy problem of
// ExampleSolve, until the hypergradient estimate is below 1e-10. The BOX 1
// warm-up (Appendix D) starts u near u*(x0); without it u0 = 0, and since
// ∇x f = 0 here the first estimate d_x would be 0 and GradTol would stop
// the run at once.
func ExampleNBOGD() {
	p := toy{c: [2]float64{1, -0.25}} // x* = (2, -1)
	rec := &optim.MemoryRecorder{}
	method := optim.NBOGD{
		Gamma:   0.25, // inner step γ ≤ 1/L with L = 4
		Updates: 2,    // T+1 GD updates: T = 1
		// β = 1/(2 L_Φ) with L_Φ = 1/4: d_x lags y and u by an iteration,
		// so a smaller outer step than AID-BiO's 1/L_Φ.
		Outer:  optim.SGD{LR: 2},
		Warmup: optim.NBOWarmup{N0: 20, Q0: 20}, // β0 = 1/L (Lanczos)
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
	fmt.Printf("iteration 1: %d GradG, %d GradF, %d MixedXY, %d HVP (1 + 2T)\n", c.GradG, c.GradF, c.MixedXY, c.HVP)
	// Output:
	// x = [2.0000 -1.0000], y = [1.0000 -0.2500]
	// status: GradientThreshold
	// iteration 1: 1 GradG, 1 GradF, 1 MixedXY, 3 HVP (1 + 2T)
}
