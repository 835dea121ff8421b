package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
)

// randData returns n samples of d N(0, 1) features with labels in
// [0, classes) and N(0, 1) targets.
func randData(rng *rand.Rand, n, d, classes int) Data {
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	labels := make([]int, n)
	targets := make([]float64, n)
	for i := range labels {
		labels[i] = rng.IntN(classes)
		targets[i] = rng.NormFloat64()
	}
	return Data{X: x, N: n, D: d, Labels: labels, Targets: targets}
}

func randVec(rng *rand.Rand, n int, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = sd * rng.NormFloat64()
	}
	return v
}

// checkOracles compiles m and runs graph.Check at three random points
// (entries N(0, sd²)), on the full data and on a batch when batch is set.
func checkOracles(t *testing.T, m *Model, sd float64, batched bool) *graph.Problem {
	t.Helper()
	p, err := m.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	const tol = 1e-6
	rng := rand.New(rand.NewPCG(11, 12))
	for k := 0; k < 3; k++ {
		x, y := randVec(rng, p.DimX(), sd), randVec(rng, p.DimY(), sd)
		s := &graph.CheckSettings{Seed: uint64(k + 1)}
		if batched && k == 2 {
			s.LowerBatch = []int{0, p.NumLower() - 1, p.NumLower() / 2}
			s.UpperBatch = []int{p.NumUpper() / 2, 0}
		}
		r := graph.Check(p, x, y, s)
		if r.Max() > tol || math.IsNaN(r.Max()) {
			t.Errorf("point %d: oracle errors above %g: %v", k, tol, r)
		} else {
			t.Logf("point %d: max %.1e (%v)", k, r.Max(), r)
		}
	}
	return p
}

// relErr returns ‖a − b‖ / max(‖b‖, 1).
func relErr(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, n float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	e := math.Sqrt(d) / math.Max(math.Sqrt(n), 1)
	if math.IsNaN(e) {
		return math.Inf(1)
	}
	return e
}

// near reports whether relErr(got, want) ≤ tol, failing t otherwise.
func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	e := relErr(got, want)
	if e > tol {
		t.Errorf("%s: relative error %.2e > %.0e\n got %v\nwant %v", what, e, tol, got, want)
		return
	}
	t.Logf("%s: relative error %.1e (tolerance %.0e)", what, e, tol)
}
