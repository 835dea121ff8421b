package experiment

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

func quadratic(t *testing.T, lower int) (*models.QuadraticModel, oracle.Problem) {
	t.Helper()
	m, err := models.Quadratic(models.QuadraticSettings{DimX: 3, DimY: 5, LowerSamples: lower, UpperSamples: lower, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

// TestRunCheckpoints: the checkpoints of Run are those of one
// uninterrupted Solve, and the budget is honoured.
func TestRunCheckpoints(t *testing.T) {
	_, p := quadratic(t, 0)
	x0, y0 := make([]float64, p.DimX()), make([]float64, p.DimY())
	m := optim.AIDBiO{Alpha: 0.05, Outer: optim.SGD{LR: 0.05}}
	s := optim.Settings{Seed: 1}
	var iters []int
	tr, err := Run(p, x0, y0, m, s, Budget{Iters: 100, Points: 7}, nil, func(st *optim.State) map[string]float64 {
		iters = append(iters, st.Iter)
		return map[string]float64{"x0": st.X[0]}
	})
	if err != nil || tr.Err != nil {
		t.Fatal(err, tr.Err)
	}
	if len(tr.Points) != 8 || tr.Last().Iter != 100 || iters[0] != 0 {
		t.Fatalf("checkpoints at iterations %v; want 8 from 0 to 100", iters)
	}
	s.MaxIter = 100
	res, err := optim.Solve(p, x0, y0, &s, m)
	if err != nil {
		t.Fatal(err)
	}
	if !floats.Equal(res.X, tr.State.X) {
		t.Errorf("Run's final x %v differs from one Solve's %v", tr.State.X, res.X)
	}
	tt, err := Run(p, x0, y0, m, optim.Settings{}, Budget{Time: 50 * time.Millisecond, Points: 5}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := tt.State.Elapsed; e < 50*time.Millisecond || e > time.Second {
		t.Errorf("a 50ms budget ran %v", e)
	}
}

// TestRunFailure: a diverging method ends the trace with its error.
func TestRunFailure(t *testing.T) {
	_, p := quadratic(t, 0)
	x0, y0 := make([]float64, p.DimX()), make([]float64, p.DimY())
	tr, err := Run(p, x0, y0, optim.AIDBiO{Alpha: 100, Outer: optim.SGD{LR: 0.1}}, optim.Settings{}, Budget{Iters: 1000, Points: 10}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Err == nil || tr.Status != optim.Failure {
		t.Errorf("a step of 100 did not fail: %v %v", tr.Status, tr.Err)
	}
}

// TestCounting: per-sample evaluations count every call, samples drawn
// count a reused batch once.
func TestCounting(t *testing.T) {
	_, p := quadratic(t, 20)
	c := NewCounting(p)
	x, y, v := make([]float64, 3), make([]float64, 5), make([]float64, 5)
	dy := make([]float64, 5)
	b := []int{1, 2, 3}
	c.GradG(nil, dy, x, y, b)
	c.HVP(dy, x, y, v, b)
	c.HVP(dy, x, y, v, []int{4, 5})
	c.GradG(nil, dy, x, y, nil)
	if c.Samples() != 3+3+2+20 || c.Drawn() != 3+2+20 {
		t.Errorf("Samples %d, Drawn %d; want 28 and 25", c.Samples(), c.Drawn())
	}
	// A Counting declares the wrapped problem's optional oracles: the
	// batch check (so optim's methods check batch sizes through it), the
	// dense matrices and the linearized HVP.
	caps := c.Capabilities()
	if caps.CheckBatch == nil || caps.HessYY == nil || caps.HessXY == nil || caps.HVPAt == nil {
		t.Error("a graph problem's Counting lost an optional oracle")
	}
	// The linearized operator counts its products as HVP does, and gives
	// HVP's values.
	for i := range v {
		v[i] = float64(i) - 2
	}
	op := caps.HVPAt(x, y, b)
	want := make([]float64, 5)
	p.HVP(want, x, y, v, b)
	op(dy, v)
	op(dy, v)
	if c.Samples() != 28+3+3 || c.Drawn() != 25 {
		t.Errorf("after two linearized products on a reused batch: Samples %d, Drawn %d; want 34 and 25", c.Samples(), c.Drawn())
	}
	if !floats.EqualApprox(dy, want, 1e-14) {
		t.Errorf("linearized product %v, HVP %v", dy, want)
	}
}

func TestSolveInner(t *testing.T) {
	m, p := quadratic(t, 0)
	x := []float64{0.3, -1, 2}
	want := m.YStar(nil, x)
	for _, newton := range []bool{false, true} {
		// L-BFGS's line search compares values of g, so it stops near
		// ‖∇g‖² ≈ rounding of g; Newton's test on the gradient goes further.
		tol := 1e-8
		if newton {
			tol = 1e-11
		}
		y := make([]float64, p.DimY())
		gn, err := SolveInner(p, x, y, InnerSettings{Tol: tol, Newton: newton})
		if err != nil || gn > tol {
			t.Fatalf("newton=%v: ‖∇g‖ = %g, %v", newton, gn, err)
		}
		if d := floats.Distance(y, want, math.Inf(1)); d > 1e-8 {
			t.Errorf("newton=%v: y is %g from y*", newton, d)
		}
	}
}

func TestCurves(t *testing.T) {
	a := Curve{X: []float64{0, 1, 2}, Y: []float64{10, 20, 30}}
	b := Curve{X: []float64{0, 2, 4}, Y: []float64{1, 2, 3}}
	cases := []struct{ x, a float64 }{{0, 10}, {0.5, 10}, {1, 20}, {2, 30}, {3, math.NaN()}, {-1, math.NaN()}}
	for _, c := range cases {
		if got := a.At(c.x); got != c.a && !(math.IsNaN(got) && math.IsNaN(c.a)) {
			t.Errorf("At(%v) = %v, want %v", c.x, got, c.a)
		}
	}
	med := Median([]Curve{a, b}, []float64{0, 2, 3})
	if med[0] != 5.5 || med[1] != 16 || med[2] != 2 {
		t.Errorf("Median = %v, want [5.5 16 2]", med)
	}
}

// TestMedianSeries: the median of several traces starts at the median of
// their starting points and resumes where every trace has passed its
// first checkpoint, so that a trace whose first iteration is long does not
// hold the median at its starting value.
func TestMedianSeries(t *testing.T) {
	trace := func(iters []int, vals []float64) *Trace {
		tr := &Trace{}
		for i, it := range iters {
			tr.Points = append(tr.Points, Point{Iter: it, Metrics: map[string]float64{"acc": vals[i]}})
		}
		return tr
	}
	s := MedianSeries("m", []*Trace{trace([]int{0, 10, 20}, []float64{0.1, 0.7, 0.8}), trace([]int{0, 30, 40}, []float64{0.1, 0.75, 0.85})}, Iters, "acc")
	if s.X[0] != 0 || s.Y[0] != 0.1 || len(s.X) < 2 {
		t.Fatalf("series %v %v: want the start (0, 0.1) first", s.X, s.Y)
	}
	for i := 1; i < len(s.X); i++ {
		if s.X[i] < 30 || s.Y[i] < 0.75 {
			t.Errorf("point %d = (%v, %v): want x ≥ 30 (both traces begun) and no stale start value", i, s.X[i], s.Y[i])
		}
	}
}

// TestMedianSeriesEnd: the median's last point is at the longest trace's
// end, also where hi·60/60 rounds past hi (20.284588725864893: the NaN
// that hypercleaning's plots noted as "1 non-finite value"), and it is the
// median of every finished trace's last value, not the slowest trace's
// alone (the time plots of nbo and nonconvex ended on one seed's value);
// a trace that stopped on an error is not held past its end.
func TestMedianSeriesEnd(t *testing.T) {
	hi, n := 20.284588725864893, 60.0 // variables: constant arithmetic is exact
	if hi*n/n == hi {
		t.Fatal("the test's end point no longer rounds past itself")
	}
	tr := func(end, last float64) *Trace {
		return &Trace{Points: []Point{{Metrics: map[string]float64{"a": 0}},
			{Iter: 1, Seconds: 1, Metrics: map[string]float64{"a": 0.5}}, {Iter: 2, Seconds: end, Metrics: map[string]float64{"a": last}}}}
	}
	s := MedianSeries("m", []*Trace{tr(hi, 0.9), tr(20, 0.8), tr(19, 0.6)}, Seconds, "a")
	if n := len(s.X); s.X[n-1] != hi || s.Y[n-1] != 0.8 {
		t.Errorf("last point (%v, %v), want (%v, 0.8): the median of 0.9, 0.8 and 0.6", s.X[n-1], s.Y[n-1], hi)
	}
	for i, y := range s.Y {
		if math.IsNaN(y) {
			t.Errorf("point %d at %v is NaN", i, s.X[i])
		}
	}
	failed := tr(19, 0.1)
	failed.Err = errors.New("stopped")
	s = MedianSeries("m", []*Trace{tr(hi, 0.9), tr(20, 0.8), failed}, Seconds, "a")
	if n := len(s.X); math.Abs(s.Y[n-1]-0.85) > 1e-15 {
		t.Errorf("last point %v with a failed trace, want 0.85: the median of the finished traces' 0.9 and 0.8", s.Y[n-1])
	}
}

// TestHeld: a curve is extended by its last value, and left as it is
// where it already reaches the point; the original is not written to.
func TestHeld(t *testing.T) {
	c := Curve{X: make([]float64, 2, 4), Y: make([]float64, 2, 4)}
	c.X[0], c.X[1], c.Y[0], c.Y[1] = 0, 1, 5, 7
	h := c.Held(3)
	if len(h.X) != 3 || h.X[2] != 3 || h.Y[2] != 7 || h.At(2) != 7 {
		t.Errorf("Held(3) = %v %v, want the last value 7 held to 3", h.X, h.Y)
	}
	if c.X[:3][2] != 0 {
		t.Errorf("Held wrote past the original's length: %v", c.X[:3])
	}
	if g := c.Held(1); len(g.X) != 2 {
		t.Errorf("Held(1) = %v, want the curve unchanged", g.X)
	}
	if e := (Curve{}).Held(1); len(e.X) != 0 {
		t.Errorf("Held on an empty curve = %v, want empty", e.X)
	}
}

// TestFailedAtStart: a run that failed in its first iteration adds no
// point to a median series (its lone start at 6 µs stretched nonconvex's
// log time axes to 10⁻⁵ s), and its legend note is short and says why.
func TestFailedAtStart(t *testing.T) {
	ok := func(t0 float64) *Trace {
		return &Trace{State: &optim.State{Iter: 2}, Points: []Point{{Seconds: t0, Metrics: map[string]float64{"e": 1}},
			{Iter: 1, Seconds: 0.3, Metrics: map[string]float64{"e": 0.5}}, {Iter: 2, Seconds: 0.6, Metrics: map[string]float64{"e": 0.2}}}}
	}
	failed := &Trace{State: &optim.State{}, Points: []Point{{Seconds: 6e-6, Metrics: map[string]float64{"e": 1.7}}},
		Err: fmt.Errorf("optim: optim.AIDBiO: iteration 0: conjugate gradient step 3: dᵀ ∇yy g d = -113.65743176656821 ≤ 0, so ∇yy g is not positive definite at this (x, y) and batch: use larger Hessian batches: %w",
			&implicit.CurvatureError{Iter: 3, Curvature: -113.65743176656821, PNormSq: 525})}
	s := MedianSeries("AID-BiO", []*Trace{failed}, Seconds, "e")
	if want := "stopped at iteration 0: negative curvature in CG (dᵀHd = −114, H the Hessian of g in y)"; len(s.X) != 0 || s.Note != want {
		t.Errorf("series %v %v, note %q; want no point and the note %q", s.X, s.Y, s.Note, want)
	}
	s = MedianSeries("AID-BiO", []*Trace{failed, ok(0), ok(0)}, Seconds, "e")
	if s.X[0] != 0 || s.Y[0] != 1 || !strings.HasPrefix(s.Note, "1 of 3 runs stopped early; one stopped at iteration 0: negative curvature") {
		t.Errorf("series starts at (%v, %v), note %q; want (0, 1), the runs that did start, and the failure noted", s.X[0], s.Y[0], s.Note)
	}
	other := &Trace{State: &optim.State{Iter: 7}, Err: fmt.Errorf("optim: optim.X: iteration 7: %w", errors.New("dist: worker 3 lost: "+strings.Repeat("detail ", 40)))}
	if b := other.Brief(); !strings.HasPrefix(b, "stopped at iteration 7: worker 3 lost: detail") || len([]rune(b)) > 130 {
		t.Errorf("Brief of an unknown error: %q; want the innermost message, cut short", b)
	}
}

func TestParamsAndFlags(t *testing.T) {
	p := Params{"a": {"lr": 1, "eta": 2}, "b": {"lr": 3}}
	if err := p.Set("all.lr=5,a.eta=0.5"); err != nil {
		t.Fatal(err)
	}
	if p.Get("a", "lr") != 5 || p.Get("b", "lr") != 5 || p.Get("a", "eta") != 0.5 {
		t.Errorf("Set gave %v", p)
	}
	for _, bad := range []string{"c.lr=1", "b.eta=1", "a.lr", "a.lr=x", "a.lr=NaN", "a.lr=-1", "all.lr=Inf"} {
		if err := p.Set(bad); err == nil {
			t.Errorf("Set(%q) did not fail", bad)
		}
	}
	p.Set("b.lr=0")
	if err := p.Positive("lr"); err == nil || !strings.Contains(err.Error(), "-set b.lr=0") {
		t.Errorf("Positive(lr) with b.lr = 0: %v", err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	n := fs.Int("n", 0, "")
	k := fs.Int("k", 0, "")
	if err := fs.Parse([]string{"-k", "7"}); err != nil {
		t.Fatal(err)
	}
	modes := map[string]map[string]string{"quick": {"n": "2", "k": "3"}}
	if err := ApplyMode(fs, "quick", modes); err != nil || *n != 2 || *k != 7 {
		t.Errorf("ApplyMode: n = %d, k = %d, %v; want 2 and 7 (given)", *n, *k, err)
	}
	if ApplyMode(fs, "slow", modes) == nil {
		t.Error("unknown mode accepted")
	}
}

// TestCheck: every check accepts the values of its domain and refuses the
// others with a message that starts with the flag's name.
func TestCheck(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	type check func(c *Check)
	good := []check{
		func(c *Check) { c.Int("n", 1, 1, 10) }, func(c *Check) { c.Float("f", 0.5, 0, 1) },
		func(c *Check) { c.Positive("f", 1e-9) }, func(c *Check) { c.Probability("p", 1) },
		func(c *Check) { c.Duration("d", 0, true) }, func(c *Check) { c.Duration("d", time.Second, false) },
		func(c *Check) { c.Workers("w", 1) }, func(c *Check) { c.Floats("l", "0.5, 1", 0, 1) },
		func(c *Check) { c.Ints("l", "3,1", 1, 3) }, func(c *Check) { c.Seeds("s", "3,1") },
		func(c *Check) { c.Names("m", "b, a", []string{"a", "b"}) },
	}
	bad := []check{
		func(c *Check) { c.Int("n", 0, 1, 10) }, func(c *Check) { c.Int("n", 11, 1, 10) },
		func(c *Check) { c.Float("f", nan, 0, 1) }, func(c *Check) { c.Float("f", inf, 0, inf) }, func(c *Check) { c.Float("f", -1, 0, 1) },
		func(c *Check) { c.Positive("f", 0) }, func(c *Check) { c.Positive("f", nan) }, func(c *Check) { c.Positive("f", inf) },
		func(c *Check) { c.Probability("p", 2) }, func(c *Check) { c.Probability("p", nan) },
		func(c *Check) { c.Duration("d", -time.Second, true) }, func(c *Check) { c.Duration("d", 0, false) },
		func(c *Check) { c.Workers("w", -3) }, func(c *Check) { c.Workers("w", 100000) },
		func(c *Check) { c.Floats("l", "", 0, 1) }, func(c *Check) { c.Floats("l", "0.5,NaN", 0, 1) }, func(c *Check) { c.Floats("l", "x", 0, 1) },
		func(c *Check) { c.Ints("l", "1,0", 1, 3) }, func(c *Check) { c.Ints("l", ",", 1, 3) }, func(c *Check) { c.Ints("l", "2,2", 1, 3) },
		func(c *Check) { c.Floats("l", "0.5,0.5", 0, 1) },
		func(c *Check) { c.Seeds("s", "-1") }, func(c *Check) { c.Seeds("s", "1,1") }, func(c *Check) { c.Seeds("s", "") },
		func(c *Check) { c.Names("m", "", []string{"a"}) }, func(c *Check) { c.Names("m", "a,a", []string{"a"}) }, func(c *Check) { c.Names("m", "c", []string{"a"}) },
	}
	for i, f := range good {
		var c Check
		if f(&c); c.Err() != nil {
			t.Errorf("good case %d refused: %v", i, c.Err())
		}
	}
	for i, f := range bad {
		var c Check
		f(&c)
		if err := c.Err(); err == nil || !regexp.MustCompile(`^-[a-z]+[ :]`).MatchString(err.Error()) {
			t.Errorf("bad case %d: error %v; want one starting with the flag", i, err)
		}
	}
}

func TestMNISTDir(t *testing.T) {
	dir, err := MNISTDir()
	if err != nil {
		t.Skip(err)
	}
	im, err := LoadImages("mnist")
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if im.Train.N != 60000 || im.Test.N != 10000 {
		t.Errorf("MNIST has %d and %d images", im.Train.N, im.Test.N)
	}
}

// TestRunSamples: a sample budget stops within one iteration of it.
// TestCountingFixX: a Counting declares the oracles at a fixed outer
// point, and counts what they consume as the oracles they stand for —
// GradG, HVP and each AddMixedXY the batch's size, MixedXYSum nothing, the
// batch drawn once — with MixedXYSum giving the sum of MixedXY's values.
func TestCountingFixX(t *testing.T) {
	_, p := quadratic(t, 20)
	c := NewCounting(p)
	fix := c.Capabilities().FixX
	if fix == nil {
		t.Fatal("a graph problem's Counting lost FixX")
	}
	x, y, v := []float64{0.1, -0.2, 0.3}, []float64{1, 2, 3, 4, 5}, []float64{0.5, -1, 0, 2, 1}
	b := []int{1, 2, 3, 7}
	dy := make([]float64, 5)
	fx := fix(x, b)
	fx.GradG(nil, dy, y)
	fx.HVP(dy, y, v)
	fx.AddMixedXY(y, v)
	fx.AddMixedXY(v, y)
	sum := make([]float64, 3)
	fx.MixedXYSum(sum)
	if c.Samples() != 4*4 || c.Drawn() != 4 {
		t.Errorf("Samples %d, Drawn %d; want 16 and 4", c.Samples(), c.Drawn())
	}
	want, m := make([]float64, 3), make([]float64, 3)
	p.MixedXY(want, x, y, v, b)
	p.MixedXY(m, x, v, y, b)
	floats.Add(want, m)
	if !floats.EqualApprox(sum, want, 1e-13) {
		t.Errorf("sum of two mixed products %v, MixedXY's %v", sum, want)
	}
	// An ITD-BiO run counts the same samples with FixX as on the per-step
	// path.
	itd := optim.ITDBiO{Alpha: 0.1, D: 5, UpperBatch: 4, Outer: optim.SGD{LR: 0.01}}
	counts := func(p oracle.Problem) (int64, int64) {
		c := NewCounting(p)
		s := optim.Settings{MaxIter: 3, EvalEvery: -1, Seed: 1}
		if _, err := optim.Solve(c, make([]float64, 3), make([]float64, 5), &s, itd); err != nil {
			t.Fatal(err)
		}
		return c.Samples(), c.Drawn()
	}
	s1, d1 := counts(p)
	s2, d2 := counts(noFixX{p})
	if s1 != s2 || d1 != d2 || s1 != 3*(5+4+5)*20+3*4 {
		t.Errorf("ITD-BiO: Samples %d, Drawn %d with FixX; %d and %d per step; want %d samples", s1, d1, s2, d2, 3*(5+4+5)*20+3*4)
	}
}

// noFixX hides a problem's oracles at a fixed outer point.
type noFixX struct{ oracle.Problem }

func (p noFixX) Capabilities() oracle.Capabilities {
	c := p.Problem.Capabilities()
	c.FixX = nil
	return c
}

func TestRunSamples(t *testing.T) {
	_, p := quadratic(t, 50)
	c := NewCounting(p)
	x0, y0 := make([]float64, p.DimX()), make([]float64, p.DimY())
	m := optim.StocBiO{Alpha: 0.05, Eta: 0.05, InnerBatch: 5, HessianBatch: 5, MixedBatch: 5, UpperBatch: 5, Outer: optim.SGD{LR: 0.01}}
	tr, err := Run(c, x0, y0, m, optim.Settings{}, Budget{Samples: 20000, Points: 4}, c, nil)
	if err != nil || tr.Err != nil {
		t.Fatal(err, tr.Err)
	}
	perIter := 10*5 + 5 + 10*5 + 5
	if got := tr.Last().Samples; got < 20000 || got > 20000+int64(perIter) {
		t.Errorf("a budget of 20000 samples used %d (%d per iteration)", got, perIter)
	}
	if len(tr.Points) != 5 {
		t.Errorf("%d checkpoints, want 5", len(tr.Points))
	}
}

// TestLowerIterate: the model a run defines is State.Y, except for F2SA,
// whose z (the iterate of the lower problem alone) it is.
func TestLowerIterate(t *testing.T) {
	st := optim.NewState([]float64{1}, []float64{2, 3}, 1)
	st.Vecs["f2sa.z"] = []float64{4, 5}
	if y := LowerIterate(optim.AIDBiO{}, st); &y[0] != &st.Y[0] {
		t.Errorf("AIDBiO: LowerIterate = %v, want State.Y", y)
	}
	if z := LowerIterate(optim.F2SA{}, st); len(z) != 2 || z[0] != 4 || z[1] != 5 {
		t.Errorf("F2SA: LowerIterate = %v, want z = [4 5]", z)
	}
}
