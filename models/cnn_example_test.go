package models_test

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
)

func ExampleCNN() {
	// A 2-way task of 8×8 images: two support and two query images.
	img := func(seed float64) []float64 {
		x := make([]float64, 64)
		for i := range x {
			x[i] = float64((i*7+int(seed))%11) / 10
		}
		return x
	}
	support := models.Data{X: append(img(1), img(2)...), N: 2, D: 64, Labels: []int{0, 1}}
	query := models.Data{X: append(img(3), img(4)...), N: 2, D: 64, Labels: []int{1, 0}}
	// Two blocks of four filters: 8 → 4 → 2 pixels, 4·2·2 = 16 features;
	// φ holds 4·1·9 + 4·4·9 filter weights and 2·4 (γ, β) per block, the
	// head W (16×2) and b (2).
	m, err := models.CNN(support, query, 2, models.CNNSettings{Side: 8, Blocks: 2, Filters: 4, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := m.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("backbone parameters:", p.DimX(), "head parameters:", p.DimY(), "features:", m.Features)
	x, y := p.X0(nil), p.Y0(nil)
	// One forward pass of the backbone for every oracle of the task at x.
	fx := p.FixX(x, nil, nil)
	gy := make([]float64, p.DimY())
	fx.GradG(nil, gy, y)
	r := graph.Check(p, x, y, nil)
	fmt.Println("every oracle within 1e-6 of finite differences:", r.Max() < 1e-6)
	// Output:
	// backbone parameters: 196 head parameters: 34 features: 16
	// every oracle within 1e-6 of finite differences: true
}
