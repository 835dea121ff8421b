package models

import (
	"math/rand/v2"
	"testing"
)

// TestCheckAll runs graph.Check at three random points on every model.
func TestCheckAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	train, val := randData(rng, 30, 4, 3), randData(rng, 20, 4, 3)
	cases := []struct {
		name    string
		sd      float64
		batched bool
		build   func() (*Model, error)
	}{
		{"quadratic", 1, false, func() (*Model, error) {
			m, err := Quadratic(QuadraticSettings{DimX: 3, DimY: 5, Rho: 0.1})
			return modelOf(m, err)
		}},
		{"quadratic stochastic", 1, true, func() (*Model, error) {
			m, err := Quadratic(QuadraticSettings{DimX: 3, DimY: 5, LowerSamples: 7, UpperSamples: 4})
			return modelOf(m, err)
		}},
		{"ridge", 0.5, true, func() (*Model, error) {
			m, err := RidgeRegression(train, val)
			return modelOf(m, err)
		}},
		{"logistic", 0.5, true, func() (*Model, error) {
			m, err := LogisticRegression(train, val, 3, LogisticSettings{})
			return modelOf(m, err)
		}},
		{"logistic with bias", 0.5, true, func() (*Model, error) {
			m, err := LogisticRegression(train, val, 3, LogisticSettings{Bias: true})
			return modelOf(m, err)
		}},
		{"binary logistic", 0.5, true, func() (*Model, error) {
			m, err := BinaryLogisticRegression(binary(train), binary(val), BinarySettings{})
			return modelOf(m, err)
		}},
		{"binary logistic linear penalty, bias", 0.5, true, func() (*Model, error) {
			m, err := BinaryLogisticRegression(binary(train), binary(val), BinarySettings{Penalty: LinearPenalty, Bias: true})
			return modelOf(m, err)
		}},
		{"hyper-cleaning", 0.5, true, func() (*Model, error) {
			m, err := HyperCleaning(train, val, 3, CleaningSettings{})
			return modelOf(m, err)
		}},
		{"hyper-cleaning with bias", 0.5, true, func() (*Model, error) {
			m, err := HyperCleaning(train, val, 3, CleaningSettings{Bias: true, Cr: 0.1})
			return modelOf(m, err)
		}},
		{"MLP tanh", 0.5, true, func() (*Model, error) {
			m, err := MLP(train, val, 3, MLPSettings{Hidden: 6})
			return modelOf(m, err)
		}},
		{"MLP ReLU, biases, learned penalty", 0.5, true, func() (*Model, error) {
			m, err := MLP(train, val, 3, MLPSettings{Hidden: 6, Activation: ReLU, Bias: true, LearnPenalty: true})
			return modelOf(m, err)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			checkOracles(t, m, c.sd, c.batched)
		})
	}
}

// modelOf returns the Model embedded in m.
func modelOf[M interface{ model() *Model }](m M, err error) (*Model, error) {
	if err != nil {
		return nil, err
	}
	return m.model(), nil
}

// binary returns d with labels 0/1 (class 0 against the rest).
func binary(d Data) Data {
	b := d
	b.Labels = make([]int, d.N)
	for i, l := range d.Labels {
		if l > 0 {
			b.Labels[i] = 1
		}
	}
	return b
}
