package models

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkLogistic times the oracles of the multinomial logistic model
// (paper 003's regularizer) on random N(0, 1) data from a fixed seed: an
// MNIST-sized problem, X 20000×784 with 10 classes, and a small 200×20×5
// one. The model is built and compiled once per size, outside the timer,
// and every oracle runs once before its timer starts (the first call
// compiles its program).
func BenchmarkLogistic(b *testing.B) {
	for _, size := range []struct{ n, d, c int }{{20000, 784, 10}, {200, 20, 5}} {
		rng := rand.New(rand.NewPCG(2024, 1))
		train, val := randData(rng, size.n, size.d, size.c), randData(rng, 100, size.d, size.c)
		m, err := LogisticRegression(train, val, size.c, LogisticSettings{})
		if err != nil {
			b.Fatal(err)
		}
		p, err := m.Compile()
		if err != nil {
			b.Fatal(err)
		}
		lambda, w := randVec(rng, p.DimX(), 1), randVec(rng, p.DimY(), 0.01)
		v := randVec(rng, p.DimY(), 1)
		dy, dx := make([]float64, p.DimY()), make([]float64, p.DimX())
		name := fmt.Sprintf("%dx%dx%d", size.n, size.d, size.c)
		b.Run(name+"/GradG", func(b *testing.B) {
			b.ReportAllocs()
			p.GradG(nil, dy, lambda, w, nil)
			for b.Loop() {
				p.GradG(nil, dy, lambda, w, nil)
			}
		})
		b.Run(name+"/HVP", func(b *testing.B) {
			b.ReportAllocs()
			p.HVP(dy, lambda, w, v, nil)
			for b.Loop() {
				p.HVP(dy, lambda, w, v, nil)
			}
		})
		b.Run(name+"/MixedXY", func(b *testing.B) {
			b.ReportAllocs()
			p.MixedXY(dx, lambda, w, v, nil)
			for b.Loop() {
				p.MixedXY(dx, lambda, w, v, nil)
			}
		})
		b.Run(name+"/Linearize+HVP", func(b *testing.B) {
			b.ReportAllocs()
			p.Linearize(lambda, w, nil).HVP(dy, v)
			for b.Loop() {
				p.Linearize(lambda, w, nil).HVP(dy, v)
			}
		})
		b.Run(name+"/LinearizedHVP", func(b *testing.B) {
			b.ReportAllocs()
			l := p.Linearize(lambda, w, nil)
			l.HVP(dy, v)
			for b.Loop() {
				l.HVP(dy, v)
			}
		})
	}
}
