package models_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/models"
)

func ExampleCNNInit() {
	// A 2-way task of 8×8 images: two support and two query images.
	img := func(seed int) []float64 {
		x := make([]float64, 64)
		for i := range x {
			x[i] = float64((i*5+seed)%9) / 8
		}
		return x
	}
	support := models.Data{X: append(img(1), img(2)...), N: 2, D: 64, Labels: []int{0, 1}}
	query := models.Data{X: append(img(3), img(4)...), N: 2, D: 64, Labels: []int{1, 0}}
	m, err := models.CNNInit(support, query, 2, models.CNNSettings{Side: 8, Blocks: 2, Filters: 4, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := m.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	// x = θ_0 is the whole network (CNN's 196 backbone and 34 head
	// parameters), y = δ its displacement: one MAML step of size 0.5 is
	// one gradient step on δ from 0.
	theta0, delta := p.X0(nil), p.Y0(nil)
	fmt.Println("θ_0:", p.DimX(), "δ:", p.DimY())
	before := p.G(theta0, delta, nil)
	g := make([]float64, p.DimY())
	p.GradG(nil, g, theta0, delta, nil)
	for i := range delta {
		delta[i] -= 0.5 * g[i]
	}
	fmt.Println("support loss falls:", p.G(theta0, delta, nil) < before)
	// Output:
	// θ_0: 230 δ: 230
	// support loss falls: true
}
