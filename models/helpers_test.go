package models

import (
	"fmt"
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
// (entries N(0, sd²)), on the full data and on a batch when batch is set,
// in float64 and in float32 (checkBoth).
func checkOracles(t *testing.T, m *Model, sd float64, batched bool) *graph.Problem {
	t.Helper()
	p, err := m.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	p32 := compile32(t, m.Objective)
	rng := rand.New(rand.NewPCG(11, 12))
	for k := 0; k < 3; k++ {
		x, y := randVec(rng, p.DimX(), sd), randVec(rng, p.DimY(), sd)
		s := &graph.CheckSettings{Seed: uint64(k + 1)}
		if batched && k == 2 {
			s.LowerBatch = []int{0, p.NumLower() - 1, p.NumLower() / 2}
			s.UpperBatch = []int{p.NumUpper() / 2, 0}
		}
		checkBoth(t, fmt.Sprintf("point %d", k), p, p32, x, y, s)
	}
	return p
}

// The tolerances of the model checks: checkTol for the oracles against
// finite differences (in float64), checkTol32 for the oracles computed in
// float32 against float64 ones — 100 units of float32's rounding 2⁻²⁴
// (6.0e-6): the oracles go through up to a few hundred operations (the
// CNN's four blocks and their second derivatives), each rounding once,
// from data and points rounded once, and the rounding errors mostly
// cancel; the worst measured over the models is 6.8e-7 (11 units).
const (
	checkTol   = 1e-6
	checkTol32 = 100.0 / (1 << 24)
)

// compile32 compiles obj computed in float32 (graph.Objective.Float32).
func compile32(t *testing.T, obj graph.Objective) *graph.Problem {
	t.Helper()
	obj.Float32 = true
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatalf("Compile in float32: %v", err)
	}
	return p
}

// checkBoth runs graph.Check at (x, y) with s on p, a model in float64,
// and on p32, the same model computed in float32: p's oracles and p32's
// float64 twin against finite differences (checkTol), p32's oracles
// against the twin's (graph.CheckReport.Float32) and against p's
// (checkTol32), p32's nodes against gorgonia's forward pass
// (Translation32, to graph/'s tolerance). It returns p's report.
func checkBoth(t *testing.T, what string, p, p32 *graph.Problem, x, y []float64, s *graph.CheckSettings) graph.CheckReport {
	t.Helper()
	r := graph.Check(p, x, y, s)
	if r.Max() > checkTol || math.IsNaN(r.Max()) || r.TranslationErr != nil {
		t.Errorf("%s: oracle errors above %g: %v", what, checkTol, r)
	} else {
		t.Logf("%s: max %.1e (%v)", what, r.Max(), r)
	}
	r32 := graph.Check(p32, x, y, s)
	d := oracleDiff(p32, p, x, y, s)
	if r32.Max() > checkTol || math.IsNaN(r32.Max()) || r32.Float32 > checkTol32 || d > checkTol32 || r32.TranslationErr != nil {
		t.Errorf("%s, float32: oracles against float64 %.1e (tolerance %.1e); %v", what, d, checkTol32, r32)
	} else {
		t.Logf("%s, float32: oracles against float64 %.1e, %v", what, d, r32)
	}
	return r
}

// oracleDiff returns the largest ‖a − b‖ / max(‖b‖, 1) of an oracle a of
// p and the same oracle b of q at (x, y), on s's batches.
func oracleDiff(p, q *graph.Problem, x, y []float64, s *graph.CheckSettings) float64 {
	var lb, ub []int
	if s != nil {
		lb, ub = s.LowerBatch, s.UpperBatch
	}
	dx, dy := p.DimX(), p.DimY()
	rng := rand.New(rand.NewPCG(5, 6))
	v, u := randVec(rng, dy, 1), randVec(rng, dx, 1)
	worst := 0.0
	for _, o := range []struct {
		n int
		f func(p *graph.Problem, dst []float64)
	}{
		{1, func(p *graph.Problem, dst []float64) { dst[0] = p.F(x, y, ub) }},
		{1, func(p *graph.Problem, dst []float64) { dst[0] = p.G(x, y, lb) }},
		{dx + dy, func(p *graph.Problem, dst []float64) { p.GradF(dst[:dx], dst[dx:], x, y, ub) }},
		{dx + dy, func(p *graph.Problem, dst []float64) { p.GradG(dst[:dx], dst[dx:], x, y, lb) }},
		{dy, func(p *graph.Problem, dst []float64) { p.HVP(dst, x, y, v, lb) }},
		{dx, func(p *graph.Problem, dst []float64) { p.MixedXY(dst, x, y, v, lb) }},
		{dy, func(p *graph.Problem, dst []float64) { p.MixedYX(dst, x, y, u, lb) }},
	} {
		a, b := make([]float64, o.n), make([]float64, o.n)
		o.f(p, a)
		o.f(q, b)
		worst = max(worst, relErr(a, b))
	}
	return worst
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
