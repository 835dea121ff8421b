package optim

import (
	"bytes"
	"encoding/csv"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// sameBits reports whether a and b hold identical float64 bit patterns.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// resumeCases are runs that exercise every part of the State: the random
// stream (minibatches, shuffled epochs), optimizer memories (Adam, SGD
// momentum, on x and on y), the warm-started v, a method's named vector
// (F2SA's z), and the cached default step size.
func resumeCases() []struct {
	name string
	m    Method
	s    Settings
} {
	return []struct {
		name string
		m    Method
		s    Settings
	}{
		{"stocBiO Adam shuffled default α η", StocBiO{D: 3, Q: 5, InnerBatch: 30, HessianBatch: 30, MixedBatch: 30, UpperBatch: 30, Outer: Adam{LR: 0.05}},
			Settings{Seed: 42, Sampling: Shuffled}},
		{"AID-BiO momentum minibatch", AIDBiO{Alpha: 0.5, D: 3, N: 3, InnerBatch: 16, HessianBatch: 64, UpperBatch: 16, Outer: SGD{LR: 0.1, Momentum: 0.9}},
			Settings{Seed: 7}},
		{"ITD-BiO minibatch projected", ITDBiO{Alpha: 0.5, D: 4, InnerBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.2}},
			Settings{Seed: 3, ProjectX: mustBall([]float64{0, 0, 0}, 0.3)}},
		{"F2SA schedules minibatch shuffled Adam", F2SA{T: 3, AlphaDecay: 5. / 7, GammaDecay: 4. / 7, LambdaGrowth: 1. / 7, LowerBatch: 16, UpperBatch: 16, Outer: Adam{LR: 0.05}},
			Settings{Seed: 5, Sampling: Shuffled}},
		{"BOME minibatch momentum and Adam", BOME{T: 3, LowerBatch: 16, UpperBatch: 16, Outer: SGD{LR: 0.05, Momentum: 0.5}, Inner: Adam{LR: 0.05}},
			Settings{Seed: 6}},
	}
}

func mustBall(c []float64, r float64) *Ball {
	b, err := NewBall(c, r)
	if err != nil {
		panic(err)
	}
	return b
}

// TestReproducible: a fixed seed gives the same run twice, bit for bit; a
// different seed gives a different run.
func TestReproducible(t *testing.T) {
	p := stochasticProblem(t)
	for _, c := range resumeCases() {
		run := func(seed uint64) (*Result, []Record) {
			s := c.s
			s.MaxIter, s.Seed = 30, seed
			rec := &MemoryRecorder{}
			s.Recorder = rec
			res, err := Solve(p, []float64{0.1, 0.2, 0.3}, make([]float64, 5), &s, c.m)
			if err != nil {
				t.Fatal(err)
			}
			return res, rec.Records
		}
		a, ra := run(c.s.Seed)
		b, rb := run(c.s.Seed)
		if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.State.V, b.State.V) {
			t.Errorf("%s: two runs with seed %d differ: x %v vs %v", c.name, c.s.Seed, a.X, b.X)
		}
		for k := range ra {
			if math.Float64bits(ra[k].HypergradNorm) != math.Float64bits(rb[k].HypergradNorm) || math.Float64bits(ra[k].Upper) != math.Float64bits(rb[k].Upper) {
				t.Errorf("%s: records differ at iteration %d", c.name, k)
				break
			}
		}
		if d, _ := run(c.s.Seed + 1); sameBits(a.X, d.X) {
			t.Errorf("%s: seeds %d and %d gave the same x", c.name, c.s.Seed, c.s.Seed+1)
		}
	}
}

// TestResumeBitForBit: a run stopped after 7 iterations, its State encoded,
// decoded and resumed to 20 iterations gives the same x, y, v and oracle
// counts, bit for bit, as an uninterrupted 20-iteration run.
func TestResumeBitForBit(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	for _, c := range resumeCases() {
		full := c.s
		full.MaxIter = 20
		want, err := Solve(p, x0, y0, &full, c.m)
		if err != nil {
			t.Fatal(err)
		}

		part := c.s
		part.MaxIter = 7
		first, err := Solve(p, x0, y0, &part, c.m)
		if err != nil {
			t.Fatal(err)
		}
		blob, err := first.State.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := st.UnmarshalBinary(blob); err != nil {
			t.Fatal(err)
		}
		rest := c.s
		rest.MaxIter = 20
		rest.Seed = 999 // ignored by Resume
		got, err := Resume(p, &st, &rest, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if got.Iter != 20 || !sameBits(got.X, want.X) || !sameBits(got.Y, want.Y) || !sameBits(got.State.V, want.State.V) {
			t.Errorf("%s: resumed x = %v, uninterrupted x = %v", c.name, got.X, want.X)
		}
		if got.Calls != want.Calls {
			t.Errorf("%s: resumed calls %+v, uninterrupted %+v", c.name, got.Calls, want.Calls)
		}
	}
}

// TestStateRoundTrip: MarshalBinary/UnmarshalBinary keep every field and
// the position of the random stream.
func TestStateRoundTrip(t *testing.T) {
	p := stochasticProblem(t)
	st := NewState([]float64{1, math.Inf(1), 3}, []float64{math.NaN(), 2, 0, 0, -0.0}, 5)
	st.V = []float64{1, 2, 3, 4, 5}
	st.Iter = 11
	st.XOpt = OptState{T: 3, M: []float64{1, 2, 3}, S: []float64{4, 5, 6}}
	st.Vec("stable.hyy", 4)[2] = 0.25
	st.Scalars["lr"] = 1e-3
	st.run = &runContext{sampling: Shuffled}
	st.Batch(p, Lower, 30)
	st.Batch(p, Upper, 7)
	st.run = nil
	st.Calls = oracle.Calls{HVP: 12, Dense: 1}
	st.Elapsed = 3 * time.Second
	blob, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := back.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	if !sameBits(st.X, back.X) || !sameBits(st.Y, back.Y) || !reflect.DeepEqual(st.XOpt, back.XOpt) ||
		!reflect.DeepEqual(st.Vecs, back.Vecs) || !reflect.DeepEqual(st.Scalars, back.Scalars) ||
		!reflect.DeepEqual(st.LowerEpoch, back.LowerEpoch) || !reflect.DeepEqual(st.UpperEpoch, back.UpperEpoch) ||
		st.Iter != back.Iter || st.Calls != back.Calls || st.Elapsed != back.Elapsed || !sameBits(st.V, back.V) {
		t.Errorf("round trip changed the state:\n%+v\n%+v", st, &back)
	}
	for range 5 {
		if a, b := st.Rand().Uint64(), back.Rand().Uint64(); a != b {
			t.Fatalf("random streams diverge: %d vs %d", a, b)
		}
	}
	c := st.Clone()
	if a, b := st.Rand().Uint64(), c.Rand().Uint64(); a != b || !reflect.DeepEqual(st.Vecs, c.Vecs) {
		t.Errorf("Clone differs from the original")
	}
	if err := back.UnmarshalBinary(blob[:len(blob)/2]); err == nil {
		t.Error("decoding a truncated State succeeded")
	}
}

// TestBatch: sampling with replacement stays in range; shuffled epochs
// visit every index once per epoch; size 0 is the whole data set.
func TestBatch(t *testing.T) {
	p := stochasticProblem(t) // 200 lower, 100 upper samples
	st := NewState(nil, nil, 1)
	if b := st.Batch(p, Lower, 0); b != nil {
		t.Errorf("Batch(0) = %v, want nil", b)
	}
	for _, i := range st.Batch(p, Upper, 100) {
		if i < 0 || i >= 100 {
			t.Fatalf("index %d outside the upper data set", i)
		}
	}
	st.run = &runContext{sampling: Shuffled}
	for epoch := range 3 {
		var seen []int
		for range 4 {
			seen = append(seen, st.Batch(p, Lower, 50)...)
		}
		slices.Sort(seen)
		for i, v := range seen {
			if v != i {
				t.Fatalf("epoch %d: 4 batches of 50 are not a permutation of 0..199", epoch)
			}
		}
	}
	// 3 batches of 60 use 180 distinct indices; the fourth starts a new epoch.
	st = NewState(nil, nil, 2)
	st.run = &runContext{sampling: Shuffled}
	var seen []int
	for range 3 {
		seen = append(seen, st.Batch(p, Lower, 60)...)
	}
	slices.Sort(seen)
	if len(slices.Compact(seen)) != 180 {
		t.Error("3 shuffled batches of 60 repeat an index")
	}
	st.Batch(p, Lower, 60)
	if st.LowerEpoch.Pos != 60 {
		t.Errorf("after a new epoch Pos = %d, want 60", st.LowerEpoch.Pos)
	}
}

// TestBadSettings: invalid settings fail before any work with an error
// naming the setting.
func TestBadSettings(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := make([]float64, 3), make([]float64, 5)
	sgd := SGD{LR: 0.1}
	ball4, _ := NewBall(make([]float64, 4), 1)
	ball5, _ := NewBall(make([]float64, 5), 1)
	for _, c := range []struct {
		name   string
		x0, y0 []float64
		s      Settings
		m      Method
		want   string
	}{
		{"x0 length", make([]float64, 2), y0, Settings{}, AIDBiO{Outer: sgd}, "len(x0) = 2"},
		{"y0 length", x0, make([]float64, 6), Settings{}, AIDBiO{Outer: sgd}, "len(y0) = 6"},
		{"negative α", x0, y0, Settings{}, AIDBiO{Alpha: -1, Outer: sgd}, "AIDBiO.Alpha = -1"},
		{"NaN α", x0, y0, Settings{}, ITDBiO{Alpha: math.NaN(), Outer: sgd}, "ITDBiO.Alpha = NaN"},
		{"NaN η", x0, y0, Settings{}, StocBiO{Eta: math.NaN(), Outer: sgd}, "StocBiO.Eta = NaN"},
		{"Inf α", x0, y0, Settings{}, StocBiO{Alpha: math.Inf(1), Outer: sgd}, "StocBiO.Alpha = +Inf"},
		{"negative D", x0, y0, Settings{}, AIDBiO{D: -2, Outer: sgd}, "AIDBiO.D = -2"},
		{"negative Q", x0, y0, Settings{}, StocBiO{Q: -1, Outer: sgd}, "StocBiO.Q = -1"},
		{"negative batch", x0, y0, Settings{}, StocBiO{InnerBatch: -1, Outer: sgd}, "StocBiO.InnerBatch = -1"},
		{"batch too large", x0, y0, Settings{}, StocBiO{UpperBatch: 101, Outer: sgd}, "NumUpper() = 100"},
		{"lower batch too large", x0, y0, Settings{}, AIDBiO{HessianBatch: 201, Outer: sgd}, "NumLower() = 200"},
		{"IncreasingD NaN", x0, y0, Settings{}, AIDBiO{IncreasingD: math.NaN(), Outer: sgd}, "AIDBiO.IncreasingD"},
		{"IncreasingD overflow", x0, y0, Settings{}, AIDBiO{IncreasingD: 1e19, Outer: sgd}, "AIDBiO.IncreasingD = 1e+19"},
		{"SGD without LR", x0, y0, Settings{}, AIDBiO{Outer: SGD{}}, "SGD.LR = 0"},
		{"SGD momentum 1", x0, y0, Settings{}, AIDBiO{Outer: SGD{LR: 1, Momentum: 1}}, "SGD.Momentum"},
		{"Adam negative LR", x0, y0, Settings{}, ITDBiO{Outer: Adam{LR: -1}}, "Adam.LR = -1"},
		{"Adam Beta2 1", x0, y0, Settings{}, ITDBiO{Outer: Adam{Beta2: 1}}, "Adam.Beta2"},
		{"MaxIter", x0, y0, Settings{MaxIter: -1}, AIDBiO{Outer: sgd}, "MaxIter = -1"},
		{"GradTol NaN", x0, y0, Settings{GradTol: math.NaN()}, AIDBiO{Outer: sgd}, "GradTol"},
		{"EvalBatch", x0, y0, Settings{EvalBatch: []int{100}}, AIDBiO{Outer: sgd}, "EvalBatch"},
		{"ProjectX dim", x0, y0, Settings{ProjectX: ball4}, AIDBiO{Outer: sgd}, "ProjectX has dimension 4"},
		{"ProjectY unsupported", x0, y0, Settings{ProjectY: ball5}, AIDBiO{Outer: sgd}, "remove Settings.ProjectY"},
	} {
		res, err := Solve(p, c.x0, c.y0, &c.s, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
			continue
		}
		if res != nil && res.Calls != (oracle.Calls{}) {
			t.Errorf("%s: %+v oracle calls before the error", c.name, res.Calls)
		}
	}
	// An increasing schedule that passes Init but outgrows MaxInnerSteps
	// later is an error of that iteration, not an int overflow that would
	// run no inner step: D_k = ⌈c (k+1)^(1/4)⌉ with c = 2^31 − 2 exceeds
	// 2^31 − 1 from k = 1 on. (The oracle calls of iteration 0 are not
	// made: Resume from a state after it.)
	st := NewState(x0, y0, 0)
	st.Iter = 1
	st.Scalars[keyCurvature] = 2
	_, err := Resume(p, st, &Settings{MaxIter: 2}, AIDBiO{Alpha: 0.5, IncreasingD: MaxInnerSteps - 1, Outer: sgd})
	if err == nil || !strings.Contains(err.Error(), "iteration 1") || !strings.Contains(err.Error(), "inner steps at iteration 1") {
		t.Errorf("D_1 beyond MaxInnerSteps: error %v", err)
	}
}

// TestStopping covers the stopping rules and the monitoring cadence.
func TestStopping(t *testing.T) {
	p := testProblem(t)
	x0, y0 := make([]float64, 3), make([]float64, 5)
	m := AIDBiO{Alpha: 0.5, D: 10, N: 5, Outer: SGD{LR: 0.2}}

	res, err := Solve(p, x0, y0, &Settings{GradTol: 1e-8}, m)
	if err != nil || res.Status != GradientThreshold || res.HypergradNorm > 1e-8 || res.Iter >= DefaultMaxIter {
		t.Errorf("GradTol: status %v after %d iterations, norm %g, err %v", res.Status, res.Iter, res.HypergradNorm, err)
	}
	res, err = Solve(p, x0, y0, &Settings{FTol: 1e-12}, m)
	if err != nil || res.Status != FunctionConvergence || res.Iter >= DefaultMaxIter {
		t.Errorf("FTol: status %v after %d iterations, err %v", res.Status, res.Iter, err)
	}
	res, err = Solve(p, x0, y0, &Settings{MaxTime: time.Nanosecond}, m)
	if err != nil || res.Status != TimeLimit || res.Iter > 1 { // Init's time counts too
		t.Errorf("MaxTime: status %v after %d iterations, err %v", res.Status, res.Iter, err)
	}
	res, err = Solve(p, x0, y0, nil, m)
	if err != nil || res.Status != IterationLimit || res.Iter != DefaultMaxIter {
		t.Errorf("defaults: status %v after %d iterations, err %v", res.Status, res.Iter, err)
	}

	rec := &MemoryRecorder{}
	_, err = Solve(p, x0, y0, &Settings{MaxIter: 12, EvalEvery: 5, EvalBatch: []int{0}, Recorder: rec,
		Metrics: func(x, y []float64) map[string]float64 { return map[string]float64{"nx": floats.Norm(x, 2)} }}, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Records {
		monitored := r.Iter%5 == 0
		if monitored == math.IsNaN(r.Upper) || monitored != (r.Metrics != nil) {
			t.Errorf("EvalEvery 5: iteration %d has Upper %v, Metrics %v", r.Iter, r.Upper, r.Metrics)
		}
		if r.Time <= 0 || (r.Iter > 0 && r.Time < rec.Records[r.Iter-1].Time) {
			t.Errorf("iteration %d: time %v not increasing", r.Iter, r.Time)
		}
	}
	if len(rec.Records) != 12 || rec.Records[11].Calls.F != 0 {
		t.Errorf("%d records; monitoring F calls counted: %d", len(rec.Records), rec.Records[len(rec.Records)-1].Calls.F)
	}
}

// TestCSVRecorder writes a run and parses it back.
func TestCSVRecorder(t *testing.T) {
	p := testProblem(t)
	var buf bytes.Buffer
	xs, _ := p.solution()
	_, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 4, EvalEvery: 2,
		Recorder: NewCSVRecorder(&buf, "err"), Metrics: distMetric(xs)}, AIDBiO{Alpha: 0.5, D: 2, N: 3, Outer: SGD{LR: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := "iter,time_s,calls_f,calls_g,calls_gradf,calls_gradg,calls_hvp,calls_mixedxy,calls_mixedyx,calls_dense,upper,hypergrad_norm,err"
	if len(rows) != 5 || strings.Join(rows[0], ",") != head {
		t.Fatalf("CSV:\n%s", buf.String())
	}
	// Iteration 1: 2 inner steps per iteration, 3 + 4 HVPs so far, not monitored.
	if r := rows[2]; r[0] != "1" || r[5] != "4" || r[6] != "7" || r[10] != "" || r[12] != "" {
		t.Errorf("row for iteration 1: %v", r)
	}
	if r := rows[3]; r[10] == "" || r[12] == "" {
		t.Errorf("row for iteration 2 (monitored) has empty cells: %v", r)
	}

	bad := NewCSVRecorder(&buf)
	_, err = Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 2, Recorder: bad, Metrics: distMetric(xs)},
		AIDBiO{Alpha: 0.5, Outer: SGD{LR: 0.2}})
	if err == nil || !strings.Contains(err.Error(), `metric "err"`) {
		t.Errorf("undeclared metric: error %v", err)
	}
}

// TestProjections: projections map into the set, leave feasible points where
// they are, are idempotent, and satisfy the variational inequality
// ⟨x − P(x), z − P(x)⟩ ≤ 0 for feasible z.
func TestProjections(t *testing.T) {
	rnd := rand.New(rand.NewPCG(4, 4))
	vec := func(n int, s float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = s * rnd.NormFloat64()
		}
		return v
	}
	const n = 6
	box, err := NewBox([]float64{-1, -1, 0, math.Inf(-1), -2, 0.5}, []float64{1, 2, 0, 0, math.Inf(1), 0.5})
	if err != nil {
		t.Fatal(err)
	}
	ball, err := NewBall(vec(n, 1), 0.7)
	if err != nil {
		t.Fatal(err)
	}
	a := mat.NewDense(2, n, vec(2*n, 1))
	b := vec(2, 1)
	aff, err := NewAffine(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		p        Projection
		feasible func(x []float64) bool
	}{
		{"Box", box, func(x []float64) bool {
			for i, v := range x {
				if v < box.lo[i] || v > box.hi[i] {
					return false
				}
			}
			return true
		}},
		{"Ball", ball, func(x []float64) bool { return floats.Distance(x, ball.center, 2) <= 0.7*(1+1e-15) }},
		{"Affine", aff, func(x []float64) bool {
			var r mat.VecDense
			r.MulVec(a, mat.NewVecDense(n, x))
			return math.Abs(r.AtVec(0)-b[0]) <= 1e-12 && math.Abs(r.AtVec(1)-b[1]) <= 1e-12
		}},
	} {
		for range 50 {
			x := vec(n, 3)
			px := make([]float64, n)
			c.p.Project(px, x)
			if !c.feasible(px) {
				t.Fatalf("%s: P(x) = %v is infeasible", c.name, px)
			}
			ppx := append([]float64(nil), px...)
			c.p.Project(ppx, ppx) // in place
			if floats.Distance(ppx, px, 2) > 1e-14*(1+floats.Norm(px, 2)) {
				t.Fatalf("%s: not idempotent: |P(P(x)) − P(x)| = %g", c.name, floats.Distance(ppx, px, 2))
			}
			z := make([]float64, n)
			c.p.Project(z, vec(n, 3)) // a feasible point
			z0 := append([]float64(nil), z...)
			c.p.Project(z, z)
			if floats.Distance(z, z0, 2) > 1e-14*(1+floats.Norm(z0, 2)) {
				t.Fatalf("%s: a feasible point moved by %g", c.name, floats.Distance(z, z0, 2))
			}
			d, e := make([]float64, n), make([]float64, n)
			floats.SubTo(d, x, px)
			floats.SubTo(e, z, px)
			if vi := floats.Dot(d, e); vi > 1e-12*(1+floats.Norm(d, 2)*floats.Norm(e, 2)) {
				t.Fatalf("%s: ⟨x − P(x), z − P(x)⟩ = %g > 0: not the nearest point", c.name, vi)
			}
		}
	}

	for _, c := range []struct {
		name string
		err  error
	}{
		{"box lo > hi", func() error { _, err := NewBox([]float64{1}, []float64{0}); return err }()},
		{"box lengths", func() error { _, err := NewBox([]float64{1, 2}, []float64{3}); return err }()},
		{"ball radius", func() error { _, err := NewBall([]float64{0}, -1); return err }()},
		{"affine rank", func() error {
			_, err := NewAffine(mat.NewDense(2, 3, []float64{1, 2, 3, 2, 4, 6}), []float64{0, 0})
			return err
		}()},
		{"affine b", func() error { _, err := NewAffine(mat.NewDense(1, 3, []float64{1, 2, 3}), []float64{0, 0}); return err }()},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestProjectedSolve: with x constrained to a ball (radius 0.3, x* outside)
// or to a hyperplane, every iterate is feasible and AID-BiO ends at a fixed
// point of the projected hypergradient step, x = P(x − β∇Φ(x)).
func TestProjectedSolve(t *testing.T) {
	p := testProblem(t)
	xs, _ := p.solution()
	ball, _ := NewBall(make([]float64, 3), 0.3)
	plane, _ := NewAffine(mat.NewDense(1, 3, []float64{1, 1, 1}), []float64{0.5})
	beta := 1 / p.phiLipschitz()
	for _, c := range []struct {
		name string
		pr   Projection
	}{{"ball", ball}, {"plane", plane}} {
		var bad int
		res, err := Solve(p, []float64{1, 1, 1}, make([]float64, 5), &Settings{MaxIter: 300, ProjectX: c.pr,
			Metrics: func(x, y []float64) map[string]float64 {
				q := append([]float64(nil), x...)
				c.pr.Project(q, q)
				if floats.Distance(q, x, 2) > 1e-12 {
					bad++
				}
				return nil
			}}, AIDBiO{Alpha: 0.5, D: 10, N: 5, Outer: SGD{LR: beta}})
		if err != nil {
			t.Fatal(err)
		}
		if bad > 0 {
			t.Errorf("%s: %d iterates infeasible", c.name, bad)
		}
		g := p.hypergrad(res.X)
		q := append([]float64(nil), res.X...)
		floats.AddScaled(q, -beta, g)
		c.pr.Project(q, q)
		if d := floats.Distance(q, res.X, 2); d > 1e-9 {
			t.Errorf("%s: ‖x − P(x − β∇Φ)‖ = %.3g, want ≤ 1e-9", c.name, d)
		}
		if floats.Distance(res.X, xs, 2) < 0.1 {
			t.Errorf("%s: constrained solution %v is the unconstrained x*: the constraint had no effect", c.name, res.X)
		}
	}
}

// TestOptimizers checks SGD with momentum and Adam against hand-computed steps.
func TestOptimizers(t *testing.T) {
	var s OptState
	x := []float64{1, -2}
	o := SGD{LR: 0.1, Momentum: 0.5}
	o.Step(&s, x, []float64{1, 2})  // m = (1, 2), x = (0.9, −2.2)
	o.Step(&s, x, []float64{-1, 0}) // m = (−0.5, 1), x = (0.95, −2.3)
	if !floats.EqualApprox(x, []float64{0.95, -2.3}, 1e-15) || s.T != 2 {
		t.Errorf("SGD momentum: x = %v, T = %d", x, s.T)
	}
	// Adam's first step is LR·g/(|g| + ε) after bias correction.
	s = OptState{}
	x = []float64{0, 0}
	Adam{LR: 0.01}.Step(&s, x, []float64{3, -1e-3})
	want := []float64{-0.01 * 3 / (3 + 1e-8), 0.01 * 1e-3 / (1e-3 + 1e-8)}
	if !floats.EqualApprox(x, want, 1e-15) {
		t.Errorf("Adam first step: x = %v, want %v", x, want)
	}
}

// TestLinearSolvers checks the linear solves the methods compose (CG with
// its warm-start cost and early stop, the N-term Neumann series and its
// N = 1 case) against a direct solve, and the Lanczos estimate of L on a
// 500-dimensional operator.
func TestLinearSolvers(t *testing.T) {
	p := testProblem(t)
	hvp := func(dst, v []float64) { p.HVP(dst, nil, nil, v, nil) }
	b := []float64{1, -2, 0.5, 3, 0}
	var want mat.VecDense
	if err := want.SolveVec(p.a, mat.NewVecDense(5, b)); err != nil {
		t.Fatal(err)
	}
	w := func() []float64 { return make([]float64, 5) }
	for _, warm := range []bool{false, true} {
		v := w()
		if warm {
			v[0] = 10
		}
		st, err := cgOn(hvp, 5, 0)(v, b)
		if err != nil {
			t.Fatal(err)
		}
		wantCalls := 5
		if warm {
			wantCalls = 6
		}
		if d := floats.Distance(v, want.RawVector().Data, 2); d > 1e-12 || st.HVP != wantCalls {
			t.Errorf("CG warm=%v: error %.3g with %d HVPs, want ≤ 1e-12 with %d", warm, d, st.HVP, wantCalls)
		}
	}
	// CGTol stops early.
	if st, _ := cgOn(hvp, 5, 0.5)(w(), b); st.HVP >= 5 {
		t.Errorf("CG with tol 0.5 used %d HVPs", st.HVP)
	}
	// A non-positive-definite operator is reported, with advice.
	if _, err := cgOn(func(dst, v []float64) { floats.ScaleTo(dst, -1, v) }, 3, 0)(w(), b); err == nil || !strings.Contains(err.Error(), "Neumann") {
		t.Errorf("CG on −I: error %v", err)
	}
	// Neumann with η = 1/2 and N terms has error (1/2)^N·‖A⁻¹b‖ at most;
	// N = 1 is η·b.
	for _, n := range []int{1, 6, 41} {
		dst := w()
		if _, err := neumannSeries(n, 0.5, 10, nil, implicit.Fixed(hvp))(dst, b); err != nil {
			t.Fatal(err)
		}
		bound := math.Pow(0.5, float64(n)) * floats.Norm(want.RawVector().Data, 2)
		if d := floats.Distance(dst, want.RawVector().Data, 2); d > bound*(1+1e-9)+1e-14 {
			t.Errorf("Neumann N=%d: error %.3g above the bound %.3g", n, d, bound)
		}
	}
	// Lanczos: 30 steps on diag(1..10 spread over 500 entries).
	diag := make([]float64, 500)
	for i := range diag {
		diag[i] = 1 + 9*float64(i)/499
	}
	l, err := implicit.LargestEigenvalue(func(dst, v []float64) {
		for i := range v {
			dst[i] = diag[i] * v[i]
		}
	}, 500, curvatureSteps, 1)
	if err != nil || l > 10 || l < 10*(1-1e-3) {
		t.Errorf("Lanczos estimate %v of L = 10 (%v)", l, err)
	}
}

// FuzzStateUnmarshal: decoding arbitrary bytes returns an error or a State
// that encodes again; it never panics.
func FuzzStateUnmarshal(f *testing.F) {
	st := NewState([]float64{1, 2}, []float64{3}, 1)
	st.Vec("m", 2)[0] = 1
	blob, err := st.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(blob)
	f.Add([]byte{})
	f.Add(blob[:len(blob)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		var s State
		if err := s.UnmarshalBinary(data); err != nil {
			return
		}
		if _, err := s.MarshalBinary(); err != nil {
			t.Fatalf("decoded State does not encode: %v", err)
		}
	})
}

// BenchmarkIteration measures one outer iteration on the stochastic
// quadratic (dx = 3, dy = 5), framework overhead (counting, NaN checks,
// backup, recording) included.
func BenchmarkIteration(b *testing.B) {
	p := stochasticProblem(b)
	for _, c := range []struct {
		name string
		m    Method
	}{
		{"AIDBiO", AIDBiO{Alpha: 0.5, D: 10, N: 10, InnerBatch: 32, HessianBatch: 32, UpperBatch: 32, Outer: SGD{LR: 0.1}}},
		{"ITDBiO", ITDBiO{Alpha: 0.5, D: 10, InnerBatch: 32, UpperBatch: 32, Outer: SGD{LR: 0.1}}},
		{"StocBiO", StocBiO{Alpha: 0.5, Eta: 0.5, D: 10, Q: 10, InnerBatch: 32, HessianBatch: 32, MixedBatch: 32, UpperBatch: 32, Outer: Adam{}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			_, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: b.N, EvalEvery: -1, Recorder: &MemoryRecorder{}}, c.m)
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
