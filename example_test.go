package bilevel_test

import (
	"errors"
	"fmt"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/models"
	"gonum.org/v1/gonum/floats"
)

func ExampleHypergradient() {
	// A quadratic bilevel problem whose y*(x) and ∇Φ(x) have closed forms.
	q, err := models.Quadratic(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 10, Rho: 0.1, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := q.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	x := []float64{0, 0}

	// One call: the lower level solved to ‖∇y g‖ ≤ 1e-8, then AID.
	r, err := bilevel.Hypergradient(p, x, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("AID: ∇Φ = %.4f, ‖∇y g(x, y)‖ ≤ 1e-8: %v\n", r.Grad, r.InnerResidual <= 1e-8)
	fmt.Printf("     %d Newton-CG iterations, %d CG iterations for v\n", r.InnerIterations, r.Linear.Iterations)

	// ITD differentiates through the gradient steps that reach the same
	// tolerance, with the step 1/λmax from a Lanczos estimate.
	r, err = bilevel.Hypergradient(p, x, &bilevel.Settings{Method: bilevel.ITD})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("ITD: ∇Φ = %.4f, step 1/%.0f, %d steps\n", r.Grad, r.Curvature, r.InnerIterations)
	fmt.Printf("closed form: ∇Φ = %.4f, ‖y − y*‖ < 1e-8: %v\n", q.HyperGrad(nil, x), floats.Distance(r.Y, q.YStar(nil, x), 2) < 1e-8)

	// A solve that cannot reach its tolerance is an error saying by how
	// much, never a number.
	_, err = bilevel.Hypergradient(p, x, &bilevel.Settings{Method: bilevel.ITD, MaxInner: 20})
	var te *bilevel.ToleranceError
	fmt.Println(errors.As(err, &te), te.Iterations, te.Residual > te.Tol)
	// Output:
	// AID: ∇Φ = [0.3928 -2.0801], ‖∇y g(x, y)‖ ≤ 1e-8: true
	//      4 Newton-CG iterations, 3 CG iterations for v
	// ITD: ∇Φ = [0.3928 -2.0801], step 1/10, 161 steps
	// closed form: ∇Φ = [0.3928 -2.0801], ‖y − y*‖ < 1e-8: true
	// true 20 true
}
