package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
)

// TestCNNInit checks the MAML problem: its oracles against central
// differences (graph.Check: the HVP and mixed products through the whole
// backbone), and its objectives at (θ_0, δ) against CNN's at the adapted
// parameters θ_0 + δ with λ = 0.
func TestCNNInit(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	s := CNNSettings{Side: 8, Blocks: 2, Filters: 3, Seed: 5}
	support, query := randImages(rng, 3, 8, 3), randImages(rng, 4, 8, 3)
	m, err := CNNInit(support, query, 3, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	s.Lambda = -1
	c, err := CNN(support, query, 3, s)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if p.DimX() != pc.DimX()+pc.DimY() || p.DimY() != p.DimX() {
		t.Fatalf("dimensions x %d, y %d; want CNN's %d + %d for both", p.DimX(), p.DimY(), pc.DimX(), pc.DimY())
	}
	p32 := compile32(t, m.Objective)
	x0 := p.X0(nil)
	if want := append(pc.X0(nil), pc.Y0(nil)...); maxDiff(x0, want) != 0 {
		t.Error("θ_0 does not start at CNN's initial point")
	}
	for k := range 2 {
		x, y := p.X0(nil), randVec(rng, p.DimY(), 0.2)
		for i := range x {
			x[i] += 0.2 * rng.NormFloat64()
		}
		checkBoth(t, fmt.Sprintf("point %d", k), p, p32, x, y, &graph.CheckSettings{Seed: uint64(k + 1)})
		theta := make([]float64, len(x))
		for i := range theta {
			theta[i] = x[i] + y[i]
		}
		phi, w := theta[:pc.DimX()], theta[pc.DimX():]
		for _, v := range []struct {
			name      string
			got, want float64
		}{{"f", p.F(x, y, nil), pc.F(phi, w, nil)}, {"g", p.G(x, y, nil), pc.G(phi, w, nil)}} {
			if math.Abs(v.got-v.want) > 1e-13*math.Abs(v.want) {
				t.Errorf("point %d: %s = %v; CNN gives %v at θ_0 + δ", k, v.name, v.got, v.want)
			}
		}
	}
	if _, err := CNNInit(support, query, 1, s); err == nil {
		t.Error("CNNInit accepted 1-way tasks")
	}
}

func maxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}
