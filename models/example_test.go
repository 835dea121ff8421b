package models_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"gonum.org/v1/gonum/floats"
)

func ExampleQuadratic() {
	q, err := models.Quadratic(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 100, Rho: 0.1, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := q.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	x := p.X0(nil) // x = 0
	y := q.YStar(nil, x)
	gy := make([]float64, p.DimY())
	p.GradG(nil, gy, x, y, nil)
	fmt.Println("∇y g vanishes at y*(x):", floats.Norm(gy, 2) < 1e-12)
	fmt.Printf("Φ(0) = %.4f, ∇Φ(0) = %.4f\n", q.Phi(x), q.HyperGrad(nil, x))
	xs := q.XStar(nil)
	fmt.Printf("x* = %.4f, Φ(x*) = %.4f\n", xs, q.Phi(xs))
	r := graph.Check(p, xs, q.YStar(nil, xs), nil)
	fmt.Println("oracles within 1e-6 of finite differences:", r.Max() < 1e-6)
	// Output:
	// ∇y g vanishes at y*(x): true
	// Φ(0) = 1.3641, ∇Φ(0) = [0.4794 -2.0949]
	// x* = [-0.2849 0.8776], Φ(x*) = 0.3766
	// oracles within 1e-6 of finite differences: true
}

func ExampleHyperCleaning() {
	// Four training samples, two of them (1 and 3) with flipped labels, and
	// two validation samples; two features, two classes.
	train := models.Data{N: 4, D: 2, X: []float64{1, 0, 1, 0, 0, 1, 0, 1}, Labels: []int{0, 1, 1, 0}}
	val := models.Data{N: 2, D: 2, X: []float64{1, 0, 0, 1}, Labels: []int{0, 1}}
	m, err := models.HyperCleaning(train, val, 2, models.CleaningSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := m.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	lambda, w := p.X0(nil), p.Y0(nil) // λ = 0: every weight σ(0) = ½; W = 0
	fmt.Printf("λ ∈ R^%d, W ∈ R^%d\n", p.DimX(), p.DimY())
	fmt.Printf("g = %.4f, f = %.4f\n", p.G(lambda, w, nil), p.F(lambda, w, nil))
	// ∂g/∂λ_i = σ'(λ_i) CE_i / n: a batch of samples 1 and 3 moves only
	// their weights, and averages over 2 samples instead of 4.
	dl := make([]float64, p.DimX())
	p.GradG(dl, nil, lambda, w, nil)
	fmt.Printf("∇λ g on all samples:      %.4f\n", dl)
	p.GradG(dl, nil, lambda, w, []int{1, 3})
	fmt.Printf("∇λ g on samples 1 and 3: %.4f\n", dl)
	// Output:
	// λ ∈ R^4, W ∈ R^4
	// g = 0.3466, f = 0.6931
	// ∇λ g on all samples:      [0.0433 0.0433 0.0433 0.0433]
	// ∇λ g on samples 1 and 3: [0.0000 0.0866 0.0000 0.0866]
}
