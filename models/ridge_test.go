package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
)

// TestRidge checks the ridge model's value against its formula, w*(λ)
// against ∇w g = 0, and the closed-form ∇Φ against central differences of
// Φ, which solves for w* exactly.
func TestRidge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	train, val := randData(rng, 40, 6, 2), randData(rng, 25, 6, 2)
	r, err := RidgeRegression(train, val)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Compile()
	if err != nil {
		t.Fatal(err)
	}
	d := train.D
	for k := 0; k < 3; k++ {
		lambda, w := randVec(rng, d, 1), randVec(rng, d, 1)

		want := 0.0
		for i := 0; i < train.N; i++ {
			e := floats.Dot(train.X[i*d:(i+1)*d], w) - train.Targets[i]
			want += e * e / (2 * float64(train.N))
		}
		for j := range w {
			want += math.Exp(lambda[j]) * w[j] * w[j] / 2
		}
		near(t, "g", []float64{p.G(lambda, w, nil)}, []float64{want}, 1e-12)

		ws := r.WStar(nil, lambda)
		gw := make([]float64, d)
		p.GradG(nil, gw, lambda, ws, nil)
		if e := floats.Norm(gw, 2); e > 1e-12 {
			t.Errorf("‖∇w g(λ, w*(λ))‖ = %.2e", e)
		}
		near(t, "Φ = f(λ, w*)", []float64{r.Phi(lambda)}, []float64{p.F(lambda, ws, nil)}, 1e-12)

		got := r.HyperGrad(nil, lambda)
		fdg := fd.Gradient(nil, r.Phi, lambda, &fd.Settings{Formula: fd.Central, Step: 1e-5})
		near(t, "∇Φ against differences of Φ", got, fdg, 1e-6)
		t.Logf("λ %d: ‖∇Φ‖ = %.3g, error against differences %.1e", k, floats.Norm(got, 2), relErr(got, fdg))
	}
}
