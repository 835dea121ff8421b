package optim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
)

// fixProbe is a graph problem whose declared oracles at a fixed outer
// point count how often they are fixed, so that a test sees the sweep
// take them through optim's counting wrapper; hide drops them, so that
// the sweep takes one full mixed product per step (the per-step path).
type fixProbe struct {
	*graph.Problem
	hide  bool
	fixed int
}

func (p *fixProbe) Capabilities() oracle.Capabilities {
	c := p.Problem.Capabilities()
	if p.hide {
		c.FixX = nil
		return c
	}
	fix := c.FixX
	c.FixX = func(x []float64, batch []int) oracle.FixedLower {
		p.fixed++
		return fix(x, batch)
	}
	return c
}

// iterates wraps a Method and keeps copies of x, y and the oracle counts
// after every iteration.
type iterates struct {
	m      Method
	x, y   [][]float64
	counts []oracle.Calls
}

func (r *iterates) Init(p oracle.Problem, st *State) error { return r.m.Init(p, st) }

func (r *iterates) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	it, err := r.m.Iterate(p, st)
	r.x, r.y = append(r.x, slices.Clone(st.X)), append(r.y, slices.Clone(st.Y))
	r.counts = append(r.counts, st.Calls)
	return it, err
}

// normalClasses returns n samples of d standard normal features with
// labels drawn uniformly from c classes, the features first.
func normalClasses(rng *rand.Rand, n, d, c int) models.Data {
	data := models.Data{X: make([]float64, n*d), N: n, D: d, Labels: make([]int, n)}
	for i := range data.X {
		data.X[i] = rng.NormFloat64()
	}
	for i := range data.Labels {
		data.Labels[i] = rng.IntN(c)
	}
	return data
}

// smallMLP is the hyper-representation MLP (tanh hidden layer as x, head
// as y, biases and a learned penalty) on 40 + 30 samples of 6 features.
func smallMLP(t *testing.T) *graph.Problem {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	m, err := models.MLP(normalClasses(rng, 40, 6, 3), normalClasses(rng, 30, 6, 3), 3, models.MLPSettings{Hidden: 5, Bias: true, LearnPenalty: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestITDBiOFixX: ITD-BiO on a graph problem takes the oracles at a fixed
// outer point through Solve's counting wrapper (the sweep sums the mixed
// products at the boundary of the part of g that does not depend on y),
// counts the same oracle calls as the per-step path, and follows it: x and
// y agree to 1e-12 relative (‖Δ‖∞/‖per-step‖∞) at every iterate. The
// golden trajectories of ITD-BiO on graph problems were recorded again
// from the new path after this test passed.
func TestITDBiOFixX(t *testing.T) {
	gq, err := models.Quadratic(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 10, Rho: 0.1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	quad, err := gq.Compile()
	if err != nil {
		t.Fatal(err)
	}
	mlp := smallMLP(t)
	const tol, iters = 1e-12, 12
	for _, c := range []struct {
		name string
		p    *graph.Problem
		m    ITDBiO
		s    Settings
	}{
		{"quadratic", quad, ITDBiO{D: 4, Outer: SGD{LR: 0.1}}, Settings{}},
		{"MLP", mlp, ITDBiO{Alpha: 0.5, D: 10, Outer: Adam{LR: 0.05}}, Settings{}},
		{"MLP upper batches", mlp, ITDBiO{Alpha: 0.5, D: 5, UpperBatch: 10, Outer: Adam{LR: 0.05}}, Settings{Seed: 3}},
	} {
		run := func(hide bool) (*iterates, int) {
			probe := &fixProbe{Problem: c.p, hide: hide}
			rec := &iterates{m: c.m}
			s := c.s
			s.MaxIter, s.EvalEvery = iters, -1
			if _, err := Solve(probe, c.p.X0(nil), c.p.Y0(nil), &s, rec); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return rec, probe.fixed
		}
		fixed, n := run(false)
		step, _ := run(true)
		if n != iters {
			t.Errorf("%s: the sweep fixed x %d times in %d iterations, want once per iteration", c.name, n, iters)
		}
		if !slices.Equal(fixed.counts, step.counts) {
			t.Errorf("%s: oracle counts %v with FixX, %v per step", c.name, fixed.counts, step.counts)
		}
		var worst float64
		for k := range step.x {
			for _, v := range [][2][]float64{{fixed.x[k], step.x[k]}, {fixed.y[k], step.y[k]}} {
				var d, s float64
				for i := range v[1] {
					d, s = math.Max(d, math.Abs(v[0][i]-v[1][i])), math.Max(s, math.Abs(v[1][i]))
				}
				if !(d <= tol*s) {
					t.Errorf("%s: iterate %d differs from the per-step path by %.2e relative (tolerance %.0e)", c.name, k+1, d/s, tol)
				}
				worst = math.Max(worst, d/s)
			}
		}
		t.Logf("%s: worst relative difference from the per-step path over %d iterations %.2e", c.name, iters, worst)
	}
}

// BenchmarkITDBiOFixX times ITD-BiO iterations (D = 10, whole data) on the
// hyper-representation MLP, 2000 samples of 784 features, tanh hidden
// layer of 256 as x and a 10-class head as y: "fixx" takes the oracles at
// a fixed outer point through Solve's counting wrapper, "per-step" the
// per-step sweep (the path before the wrapper forwarded FixX).
func BenchmarkITDBiOFixX(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, err := models.MLP(normalClasses(rng, 2000, 784, 10), normalClasses(rng, 500, 784, 10), 10, models.MLPSettings{Hidden: 256, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		b.Fatal(err)
	}
	for _, hide := range []bool{false, true} {
		name := map[bool]string{false: "fixx", true: "per-step"}[hide]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			probe := &fixProbe{Problem: p, hide: hide}
			s := Settings{MaxIter: b.N, EvalEvery: -1}
			b.ResetTimer()
			if _, err := Solve(probe, p.X0(nil), p.Y0(nil), &s, ITDBiO{Alpha: 0.5, D: 10, Outer: SGD{LR: 0.01}}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
