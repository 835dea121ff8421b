package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
)

// TestMLPValue compares g and f of the MLP with a forward pass written by
// hand, for both activations, with biases and a learned penalty.
func TestMLPValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	d, h, c := 4, 5, 3
	train, val := randData(rng, 25, d, c), randData(rng, 10, d, c)
	for _, act := range []Activation{Tanh, ReLU} {
		m, err := MLP(train, val, c, MLPSettings{Hidden: h, Activation: act, Bias: true, LearnPenalty: true, Mu: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Compile()
		if err != nil {
			t.Fatal(err)
		}
		if p.DimX() != d*h+h+1 || p.DimY() != h*c+c {
			t.Fatalf("dims %d, %d", p.DimX(), p.DimY())
		}
		if x0 := p.X0(nil); math.Abs(x0[d*h+h]-math.Log(0.2)) > 1e-15 {
			t.Errorf("log μ starts at %v; want log 0.2", x0[d*h+h])
		}
		x, y := randVec(rng, p.DimX(), 0.7), randVec(rng, p.DimY(), 0.7)
		w1, b1, rho := x[:d*h], x[d*h:d*h+h], x[d*h+h]
		w2, b2 := y[:h*c], y[h*c:]
		ce := func(data Data) float64 {
			s := 0.0
			for i := 0; i < data.N; i++ {
				a := append([]float64{}, b1...)
				for j := 0; j < d; j++ {
					floats.AddScaled(a, data.X[i*d+j], w1[j*h:(j+1)*h])
				}
				for k := range a {
					if act == Tanh {
						a[k] = math.Tanh(a[k])
					} else {
						a[k] = math.Max(a[k], 0)
					}
				}
				z := append([]float64{}, b2...)
				for k := 0; k < h; k++ {
					floats.AddScaled(z, a[k], w2[k*c:(k+1)*c])
				}
				s += (floats.LogSumExp(z) - z[data.Labels[i]]) / float64(data.N)
			}
			return s
		}
		wantG := ce(train) + math.Exp(rho)/2*floats.Dot(y, y)
		near(t, "g", []float64{p.G(x, y, nil)}, []float64{wantG}, 1e-12)
		near(t, "f", []float64{p.F(x, y, nil)}, []float64{ce(val)}, 1e-12)
	}
}
