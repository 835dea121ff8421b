package models_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"gonum.org/v1/gonum/floats"
)

// ExampleRidgeRegression compares the AID hypergradient of ridge regression
// with one penalty per feature against the model's closed form.
func ExampleRidgeRegression() {
	train := models.Data{N: 5, D: 2, X: []float64{1, 0, 0, 1, 1, 1, 2, -1, -1, 2}, Targets: []float64{1, 2, 3, 0, 3}}
	val := models.Data{N: 3, D: 2, X: []float64{1, 2, 2, 0, 0, -1}, Targets: []float64{5, 2, -2}}
	r, err := models.RidgeRegression(train, val)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := r.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	lambda := []float64{-1, 0.5}
	w := r.WStar(nil, lambda) // the inner solution, in closed form
	aid := make([]float64, 2)
	if _, err := implicit.Hypergradient(aid, p, lambda, w, nil); err != nil {
		fmt.Println(err)
		return
	}
	exact := r.HyperGrad(nil, lambda)
	fmt.Printf("w*(λ) = %.4f, Φ(λ) = %.4f\n", w, r.Phi(lambda))
	fmt.Printf("∇Φ(λ) = %.4f by AID, within 1e-12 of the closed form: %t\n", aid, floats.Distance(aid, exact, 2) < 1e-12)
	// Output:
	// w*(λ) = [0.3837 0.7971], Φ(λ) = 2.0166
	// ∇Φ(λ) = [0.1972 1.4026] by AID, within 1e-12 of the closed form: true
}

// ExampleLogisticRegression builds multinomial logistic regression with a
// learned L2 penalty per feature (paper 003, App. B) and checks its oracles
// against finite differences.
func ExampleLogisticRegression() {
	train := models.Data{N: 6, D: 3, Labels: []int{0, 1, 2, 0, 1, 2},
		X: []float64{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0.5, 0, 0, 1, 0.5, 0.5, 0, 1}}
	val := models.Data{N: 3, D: 3, Labels: []int{0, 1, 2}, X: []float64{1, 0.2, 0, 0, 1, 0.2, 0.2, 0, 1}}
	m, err := models.LogisticRegression(train, val, 3, models.LogisticSettings{Bias: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := m.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("λ ∈ R^%d, (W, b) ∈ R^%d\n", p.DimX(), p.DimY())
	x, y := p.X0(nil), p.Y0(nil)
	for i := range y {
		y[i] = 0.1 * float64(i%5)
	}
	fmt.Printf("g = %.4f, f = %.4f\n", p.G(x, y, nil), p.F(x, y, nil))
	fmt.Println("oracles within 1e-6 of finite differences:", graph.Check(p, x, y, nil).Max() < 1e-6)
	// Output:
	// λ ∈ R^3, (W, b) ∈ R^12
	// g = 1.1102, f = 1.0452
	// oracles within 1e-6 of finite differences: true
}
