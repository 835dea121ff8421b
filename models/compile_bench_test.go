package models

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCompile times Compile, translation check included, on the large
// logistic problem of BenchmarkLogistic (X 20000×784, 10 classes) and on
// the CNN of the meta-learning benchmark (5-way 5-shot, 15 queries per
// class, 28×28 images, 4 blocks of 32 filters).
func BenchmarkCompile(b *testing.B) {
	b.Run("logistic-20000x784x10", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(2024, 1))
		m, err := LogisticRegression(randData(rng, 20000, 784, 10), randData(rng, 100, 784, 10), 10, LogisticSettings{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Compile(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cnn-5way-5shot", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(2024, 2))
		m, err := CNN(randImages(rng, 25, 28, 5), randImages(rng, 75, 28, 5), 5, CNNSettings{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Compile(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
