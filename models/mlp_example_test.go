package models_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/unroll"
)

// ExampleMLP builds the hyper-representation problem on a two-layer
// perceptron (outer: the hidden layer, inner: the head), checks its
// oracles, and takes an ITD hypergradient through 20 inner steps.
func ExampleMLP() {
	train := models.Data{N: 6, D: 2, Labels: []int{0, 1, 0, 1, 0, 1},
		X: []float64{1, 0, 0, 1, 0.9, 0.2, 0.1, 1.1, 1.2, -0.1, -0.2, 0.8}}
	val := models.Data{N: 2, D: 2, Labels: []int{0, 1}, X: []float64{1, 0.1, 0, 0.9}}
	m, err := models.MLP(train, val, 2, models.MLPSettings{Hidden: 3, Bias: true, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := m.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("x = (W1, b1) ∈ R^%d, y = (W2, b2) ∈ R^%d\n", p.DimX(), p.DimY())
	x, y := p.X0(nil), p.Y0(nil)
	for i := range y {
		y[i] = 0.1 * float64(i%3)
	}
	fmt.Println("oracles within 1e-6 of finite differences:", graph.Check(p, x, y, nil).Max() < 1e-6)
	grad := make([]float64, p.DimX())
	u := unroll.Unroller{Steps: 20, Alpha: 0.5}
	res, err := u.Hypergradient(grad, p, x, p.Y0(nil), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("ITD: f(x, y_20) = %.4f with %d HVPs and %d mixed products\n", p.F(x, u.Final(), nil), res.Calls.HVP, res.Calls.MixedXY)
	// Output:
	// x = (W1, b1) ∈ R^9, y = (W2, b2) ∈ R^8
	// oracles within 1e-6 of finite differences: true
	// ITD: f(x, y_20) = 0.2024 with 19 HVPs and 20 mixed products
}
