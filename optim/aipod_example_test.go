package optim_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/optim"
	"gonum.org/v1/gonum/mat"
)

// ExampleAiPOD runs AiPOD (paper 004, Algorithm 1) on the toy problem of
// ExampleSolve with equality constraints on both levels,
//
//	X = {x : x₁ − x₂ = 0},   Y = {y : y₁ − y₂ = 0}.
//
// On Y, y = (t, t) and g = 3t² − t(x₁ + x₂), so y*(x) = (x₁ + x₂)/6 · (1, 1);
// on X, x = (s, s) and Φ = ½((s/3 − c₁)² + (s/3 − c₂)²) is minimal at
// s/3 = (c₁ + c₂)/2 = 0.375: x* = (1.125, 1.125), y* = (0.375, 0.375).
func ExampleAiPOD() {
	p := toy{c: [2]float64{1, -0.25}}
	diff := mat.NewDense(1, 2, []float64{1, -1})
	upper, err := optim.NewLinearEquality(diff, []float64{0})
	if err != nil {
		fmt.Println(err)
		return
	}
	lower, err := optim.NewLowerEquality(diff, []float64{0}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	method := optim.AiPOD{
		Alpha:  4.5,  // α = 1/(2 L_Φ), L_Φ = 1/9 along X
		Beta:   0.25, // β ≤ 1/ℓ_g,1 = 1/4
		S:      5,
		N:      30,
		Eta:    0.25,
		Series: optim.NeumannPartialSum, // deterministic Neumann sum
		Lower:  lower,
	}
	res, err := optim.Solve(p, []float64{0, 0}, []float64{0, 0},
		&optim.Settings{GradTol: 1e-10, ProjectX: upper}, method)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("x = [%.4f %.4f], y = [%.4f %.4f]\n", res.X[0], res.X[1], res.Y[0], res.Y[1])
	fmt.Println("status:", res.Status)
	r := optim.RoundsOf(res.State)
	fmt.Printf("projections per iteration: lower %d, upper %d, implicit %d\n",
		r.Lower/int64(res.Iter), r.Upper/int64(res.Iter), r.Implicit/int64(res.Iter))
	// Output:
	// x = [1.1250 1.1250], y = [0.3750 0.3750]
	// status: GradientThreshold
	// projections per iteration: lower 5, upper 1, implicit 30
}
