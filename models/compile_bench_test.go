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
	for _, c := range []struct {
		name  string
		model func(rng *rand.Rand) (*Model, error)
	}{
		{"logistic-20000x784x10", func(rng *rand.Rand) (*Model, error) {
			m, err := LogisticRegression(randData(rng, 20000, 784, 10), randData(rng, 100, 784, 10), 10, LogisticSettings{})
			if err != nil {
				return nil, err
			}
			return &m.Model, nil
		}},
		{"cnn-5way-5shot", func(rng *rand.Rand) (*Model, error) {
			m, err := CNN(randImages(rng, 25, 28, 5), randImages(rng, 75, 28, 5), 5, CNNSettings{Seed: 1})
			if err != nil {
				return nil, err
			}
			return &m.Model, nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m, err := c.model(rand.New(rand.NewPCG(2024, 1)))
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
}
