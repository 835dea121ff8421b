package meta

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/unroll"
)

// tiny is the backbone of the tests: 8×8 images, two blocks of three
// filters (12 features).
var tiny = models.CNNSettings{Side: 8, Blocks: 2, Filters: 3, Seed: 4}

// toyData returns a data set of 8×8 images of 4 classes: each class is a
// fixed random pattern plus noise.
func toyData(t testing.TB, perClass int, seed uint64) *data.Dataset {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const classes, d = 4, 64
	patterns := make([][]float64, classes)
	for c := range patterns {
		patterns[c] = make([]float64, d)
		for i := range patterns[c] {
			patterns[c][i] = rng.Float64()
		}
	}
	var x []float64
	var labels []int
	for i := 0; i < perClass; i++ {
		for c := 0; c < classes; c++ {
			for _, v := range patterns[c] {
				x = append(x, v+0.3*rng.NormFloat64())
			}
			labels = append(labels, c)
		}
	}
	ds, err := data.NewDataset(x, labels, d, classes)
	if err != nil {
		t.Fatal(err)
	}
	ds.Height, ds.Width = 8, 8
	return ds
}

func toyTasks(t testing.TB, ways, shots, queries int, seed uint64) *Tasks {
	return &Tasks{Data: toyData(t, 20, 3), Base: []int{0, 1, 2}, Ways: ways, Shots: shots, Queries: queries, Seed: seed}
}

// taskProblem compiles models.CNN on the task.
func taskProblem(t *testing.T, task *data.Task, s models.CNNSettings) *graph.Problem {
	t.Helper()
	return compileOn(t, task, s, func(sup, q models.Data, ways int, s models.CNNSettings) (compiler, error) {
		return models.CNN(sup, q, ways, s)
	})
}

// compiler is a model of a task.
type compiler interface {
	Compile() (*graph.Problem, error)
}

// compileOn builds a model on the task's support and query sets and
// compiles it.
func compileOn(t *testing.T, task *data.Task, s models.CNNSettings, build func(support, query models.Data, ways int, s models.CNNSettings) (compiler, error)) *graph.Problem {
	t.Helper()
	m, err := build(models.Data{X: task.SupportX, N: len(task.SupportY), D: task.D, Labels: task.SupportY},
		models.Data{X: task.QueryX, N: len(task.QueryY), D: task.D, Labels: task.QueryY}, task.Ways, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// toyTaskPoint returns task i of the toy 3-way 2-shot tasks of the
// seed, the tiny CNN compiled on it and a random point of it (randomPoint
// with pointSeed): the fixture of the gradient tests.
func toyTaskPoint(t *testing.T, seed uint64, i int, pointSeed uint64) (*data.Task, *graph.Problem, []float64) {
	t.Helper()
	task, err := toyTasks(t, 3, 2, 2, seed).Task(i, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := taskProblem(t, task, tiny)
	return task, p, randomPoint(p, pointSeed)
}

func relErr(a, b []float64) float64 {
	var d, n float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	return math.Sqrt(d) / math.Max(math.Sqrt(n), 1e-300)
}

func randomPoint(p *graph.Problem, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 2))
	x := p.X0(nil)
	for i := range x {
		x[i] += 0.2 * rng.NormFloat64()
	}
	return x
}

// TestITDEqualsInGraphUnroll checks ITD-BiO's meta-gradient — the reverse
// sweep on graph.FixedX through the whole CNN (Direct) and the chain rule
// through the features (Features) — against the T steps written out in
// one graph and differentiated symbolically (graph.Problem.Unrolled), and
// that unroll.Unroller on the FixedX (the learner's sweep) is that too.
func TestITDEqualsInGraphUnroll(t *testing.T) {
	task, p, x := toyTaskPoint(t, 5, 0, 1)
	const alpha = 0.5
	for _, T := range []int{1, 3, 6} {
		ref, err := p.Unrolled(T, alpha, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, p.DimX())
		ref.Hypergradient(want, x, p.Y0(nil))

		got := make([]float64, p.DimX())
		u := &unroll.Unroller{Steps: T, Alpha: alpha}
		fx := p.FixX(x, nil, nil)
		if _, err := u.Hypergradient(got, fixedOracles{fx}, fx.X(), p.Y0(nil), nil); err != nil {
			t.Fatal(err)
		}
		if e := relErr(got, want); e > 1e-10 {
			t.Errorf("T = %d: unroll.Unroller on the FixedX differs from the in-graph unroll by %.2e", T, e)
		}

		for _, bp := range []Backprop{Direct, Features} {
			l, err := NewLearner(Settings{Gradient: ITD, Steps: T, Alpha: alpha, Backprop: bp, Workers: 1}, tiny, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Restore(Snapshot{Params: x}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.MetaGradient(got, []*data.Task{task}); err != nil {
				t.Fatal(err)
			}
			if e := relErr(got, want); e > 1e-10 {
				t.Errorf("T = %d, backprop %d: learner's meta-gradient differs from the in-graph unroll by %.2e", T, bp, e)
			} else {
				t.Logf("T = %d, backprop %d: relative difference %.1e", T, bp, e)
			}
		}
	}
}

// TestANILGradient checks full ANIL's gradient: in φ against the in-graph
// unroll started at w_0, in w_0 against central differences of
// f(φ, y_T(w_0)); and first-order ANIL against ∇f at y_T.
func TestANILGradient(t *testing.T) {
	src := toyTasks(t, 3, 2, 3, 6)
	task, err := src.Task(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := tiny
	s.Lambda = -1 // ANIL's inner loss
	p := taskProblem(t, task, s)
	x := randomPoint(p, 2)
	rng := rand.New(rand.NewPCG(3, 3))
	w0 := make([]float64, p.DimY())
	for i := range w0 {
		w0[i] = 0.3 * rng.NormFloat64()
	}
	const T, alpha = 4, 0.5
	ref, err := p.Unrolled(T, alpha, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantX := make([]float64, p.DimX())
	ref.Hypergradient(wantX, x, w0)

	l, err := NewLearner(Settings{Gradient: ANIL, Steps: T, Alpha: alpha, Workers: 1}, tiny, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restore(Snapshot{Params: append(append([]float64{}, x...), w0...)}); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, p.DimX()+p.DimY())
	if _, err := l.MetaGradient(got, []*data.Task{task}); err != nil {
		t.Fatal(err)
	}
	if e := relErr(got[:p.DimX()], wantX); e > 1e-10 {
		t.Errorf("ANIL's φ-gradient differs from the in-graph unroll by %.2e", e)
	}
	fx := p.FixX(x, nil, nil)
	solve := func(y0 []float64) []float64 {
		y := append([]float64(nil), y0...)
		if err := unroll.Descend(fixedOracles{fx}, x, y, T, alpha, nil, nil); err != nil {
			t.Fatal(err)
		}
		return y
	}
	F := func(y0 []float64) float64 { return fx.F(solve(y0)) }
	const h = 1e-5
	fd := make([]float64, p.DimY())
	for i := range fd {
		w := append([]float64{}, w0...)
		w[i] += h
		fp := F(w)
		w[i] -= 2 * h
		fd[i] = (fp - F(w)) / (2 * h)
	}
	if e := relErr(got[p.DimX():], fd); e > 1e-7 {
		t.Errorf("ANIL's w_0-gradient differs from central differences by %.2e", e)
	}

	fo, err := NewLearner(Settings{Gradient: ANIL, Steps: T, Alpha: alpha, FirstOrder: true, Workers: 1}, tiny, 3)
	if err != nil {
		t.Fatal(err)
	}
	fo.Restore(Snapshot{Params: append(append([]float64{}, x...), w0...)})
	if _, err := fo.MetaGradient(got, []*data.Task{task}); err != nil {
		t.Fatal(err)
	}
	yT := solve(w0)
	want := make([]float64, p.DimX()+p.DimY())
	fx.GradF(want[:p.DimX()], want[p.DimX():], yT)
	if e := relErr(got, want); e > 1e-10 {
		t.Errorf("first-order ANIL differs from ∇f at y_T by %.2e", e)
	}
}

// TestAID checks AID-BiO's meta-gradient against implicit.Hypergradient
// on the FixedX at y_D, for both computations through the backbone, and
// that the increasing schedule is D_k = ⌈c(k+1)^{1/4}⌉.
func TestAID(t *testing.T) {
	task, p, x := toyTaskPoint(t, 7, 2, 3)
	const D, alpha, N = 5, 0.5, 8
	fx := p.FixX(x, nil, nil)
	yD := p.Y0(nil)
	if err := unroll.Descend(fixedOracles{fx}, x, yD, D, alpha, nil, nil); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, p.DimX())
	if _, err := implicit.Hypergradient(want, fixedOracles{fx}, x, yD, &implicit.Settings{Solver: &implicit.CG{Tol: 1e-10, MaxIter: N}}); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, p.DimX())
	for _, bp := range []Backprop{Direct, Features} {
		l, err := NewLearner(Settings{Gradient: AID, Steps: D, Alpha: alpha, CGSteps: N, Backprop: bp, Workers: 1}, tiny, 3)
		if err != nil {
			t.Fatal(err)
		}
		l.Restore(Snapshot{Params: x})
		if _, err := l.MetaGradient(got, []*data.Task{task}); err != nil {
			t.Fatal(err)
		}
		if e := relErr(got, want); e > 1e-10 {
			t.Errorf("backprop %d: AID differs from implicit.Hypergradient by %.2e", bp, e)
		}
	}
	inc, err := NewLearner(Settings{Gradient: AID, Growth: 2}, tiny, 3)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[int]int{0: 2, 1: 3, 14: 4, 15: 4, 16: 5, 255: 8} {
		if got, err := inc.InnerSteps(k); err != nil || got != want {
			t.Errorf("D_%d = %d; want ⌈2(k+1)^{1/4}⌉ = %d", k, got, want)
		}
	}
}

// TestStepResume checks that training is a function of the state and the
// task indices: three steps in one go equal one step, a save through
// State and a checkpoint, and two more steps in a new learner, bit for
// bit, whatever the number of workers; for ITD-BiO and MAML.
func TestStepResume(t *testing.T) {
	for _, s := range []Settings{{Gradient: ITD, Steps: 3, Alpha: 0.3}, {Gradient: MAML, Steps: 2, Alpha: 0.3}} {
		t.Run(s.Gradient.String(), func(t *testing.T) { stepResume(t, s) })
	}
}

func stepResume(t *testing.T, s Settings) {
	src := toyTasks(t, 3, 1, 2, 8)
	batch := func(k int) []*data.Task {
		var ts []*data.Task
		for j := 0; j < 3; j++ {
			task, err := src.Task(3*k+j, nil)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, task)
		}
		return ts
	}
	s.TaskBatch = 3
	run := func(l *Learner, from, to int) {
		for k := from; k < to; k++ {
			if _, err := l.Step(batch(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Workers = 2
	a, _ := NewLearner(s, tiny, 3)
	run(a, 0, 3)
	s.Workers = 1
	b, _ := NewLearner(s, tiny, 3)
	run(b, 0, 1)
	path := filepath.Join(t.TempDir(), "ckpt.json")
	if err := WriteCheckpoint(path, b.Snapshot()); err != nil {
		t.Fatal(err)
	}
	var st Snapshot
	if err := ReadCheckpoint(path, &st); err != nil {
		t.Fatal(err)
	}
	c, _ := NewLearner(s, tiny, 3)
	if err := c.Restore(st); err != nil {
		t.Fatal(err)
	}
	run(c, 1, 3)
	if sa, sc := a.Snapshot(), c.Snapshot(); sa.Iter != 3 || sc.Iter != 3 || !slices.Equal(sa.Params, sc.Params) ||
		!slices.Equal(sa.Opt.M, sc.Opt.M) || !slices.Equal(sa.Opt.S, sc.Opt.S) {
		t.Errorf("resumed training differs from uninterrupted training (iterations %d and %d, parameter difference %.2e)",
			sa.Iter, sc.Iter, relErr(sc.Params, sa.Params))
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.ckpt")
	type payload struct {
		A []float64
		B string
	}
	in := payload{A: []float64{1, math.Pi, -1e-300}, B: "x"}
	if err := WriteCheckpoint(path, in); err != nil {
		t.Fatal(err)
	}
	var out payload
	if err := ReadCheckpoint(path, &out); err != nil || !slices.Equal(out.A, in.A) || out.B != in.B {
		t.Fatalf("round trip gave %+v, %v", out, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder after an atomic write; want 1", len(entries))
	}
	// A write killed half-way leaves path.tmp (its one, fixed name), which
	// the next write replaces: temporary files do not accumulate.
	if err := os.WriteFile(path+".tmp", []byte("half a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(path, in); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder after a write that followed a killed one; want 1", len(entries))
	}
	good, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", good[:len(good)-9], "checksum mismatch"},
		{"flipped byte", func() []byte {
			b := slices.Clone(good)
			b[len(b)-5] ^= 1
			return b
		}(), "checksum mismatch"},
		{"not a checkpoint", []byte("{}"), "first line"},
		{"no checksum", []byte(checkpointMagic + "\n{}"), "checksum"},
	} {
		os.WriteFile(path, c.b, 0o644)
		err := ReadCheckpoint(path, &out)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want ErrCorrupt mentioning %q", c.name, err, c.want)
		}
	}
	if err := ReadCheckpoint(filepath.Join(dir, "missing"), &out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: error %v; want fs.ErrNotExist", err)
	}
	if err := WriteCheckpoint(path, payload{A: []float64{math.NaN()}}); err == nil {
		t.Error("a NaN was written to a checkpoint without error")
	}
}

func TestTasksDeterministic(t *testing.T) {
	src := toyTasks(t, 3, 2, 2, 9)
	a, _ := src.Task(4, nil)
	b, _ := src.Task(4, &data.Task{})
	c, _ := src.Task(5, nil)
	if !slices.Equal(a.SupportX, b.SupportX) || !slices.Equal(a.QueryY, b.QueryY) || !slices.Equal(a.Classes, b.Classes) {
		t.Error("task 4 differs between two draws")
	}
	if slices.Equal(a.SupportX, c.SupportX) {
		t.Error("tasks 4 and 5 are equal")
	}
}

// TestTraining checks that each method decreases its meta-objective: a
// fixed batch of toy tasks, Adam steps on it, the query loss of the
// adapted heads at the start and at the end; and that the pretrainer's
// loss drops.
func TestTraining(t *testing.T) {
	src := toyTasks(t, 3, 1, 3, 10)
	var batch []*data.Task
	for j := 0; j < 6; j++ {
		task, err := src.Task(j, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, task)
	}
	for _, s := range []Settings{
		{Gradient: ITD, Steps: 5, Alpha: 0.5},
		// AID's estimate assumes y_D ≈ y*: enough steps for the inner
		// loop to converge.
		{Gradient: AID, Steps: 40, Alpha: 0.5},
		{Gradient: AID, Growth: 20, Alpha: 0.5},
		{Gradient: ANIL, Steps: 3, Alpha: 0.5},
		{Gradient: ANIL, Steps: 3, Alpha: 0.5, FirstOrder: true},
		{Gradient: MAML, Steps: 2, Alpha: 0.3},
		{Gradient: MAML, Steps: 2, Alpha: 0.3, FirstOrder: true},
	} {
		s.Outer.LR = 1e-2
		l, err := NewLearner(s, tiny, 3)
		if err != nil {
			t.Fatal(err)
		}
		var first, last StepStats
		for k := 0; k < 15; k++ {
			st, err := l.Step(batch)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = st
			}
			last = st
		}
		t.Logf("%v (growth %v, first order %v): query loss %.3f → %.3f, accuracy %.2f → %.2f",
			s.Gradient, s.Growth, s.FirstOrder, first.Loss, last.Loss, first.Accuracy, last.Accuracy)
		if !(last.Loss < 0.9*first.Loss) {
			t.Errorf("%v: the meta-objective fell by less than 10%%: %.3f → %.3f", s.Gradient, first.Loss, last.Loss)
		}
	}
	p, err := NewPretrainer(toyData(t, 20, 3), []int{0, 1, 2}, tiny, PretrainSettings{Batch: 16, Outer: optimAdam(1e-2)})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for k := 0; k < 40; k++ {
		st, err := p.Step()
		if err != nil {
			t.Fatal(err)
		}
		if k < 5 {
			first += st.Loss / 5
		}
		if k >= 35 {
			last += st.Loss / 5
		}
	}
	t.Logf("pretraining: loss %.3f → %.3f", first, last)
	if !(last < 0.9*first) {
		t.Errorf("the pretraining loss fell by less than 10%%: %.3f → %.3f", first, last)
	}
	ev := &Evaluator{CNN: tiny, Ways: 3, Steps: 20, Alpha: 0.5}
	test := &Tasks{Data: toyData(t, 20, 3), Base: []int{3}, Ways: 3, Shots: 1, Queries: 3, Seed: 11}
	acc, err := ev.Evaluate(p.Backbone(), test, 0, 30)
	if err != nil {
		t.Fatal(err)
	}
	if acc.N != 30 || !(acc.Mean > 0 && acc.Mean <= 1) || !(acc.CI95 > 0) {
		t.Errorf("evaluation of the pre-trained backbone gave %v", acc)
	}
}

func TestSettingsErrors(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Gradient: 7}, "unknown Gradient"},
		{Settings{Steps: -1}, "Steps = -1"},
		{Settings{Gradient: ITD, Growth: 2}, "Growth is for AID"},
		{Settings{Alpha: -1}, "Alpha = -1"},
		{Settings{Gradient: AID, FirstOrder: true}, "FirstOrder is for ANIL"},
		{Settings{TaskBatch: -2}, "TaskBatch = -2"},
		{Settings{Backprop: 5}, "unknown Backprop"},
	} {
		if _, err := NewLearner(c.s, tiny, 3); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v; want one containing %q", c.s, err, c.want)
		}
	}
	if _, err := NewLearner(Settings{Gradient: AID, Growth: 1e19}, tiny, 3); err == nil || !strings.Contains(err.Error(), "Growth = 1e+19") {
		t.Errorf("Growth 1e19: error %v, want one about the schedule", err)
	}
	for _, shares := range []int{-1, 9} {
		if _, err := NewPretrainer(toyData(t, 20, 3), []int{0, 1, 2}, tiny, PretrainSettings{Batch: 16, Shares: shares}); err == nil || !strings.Contains(err.Error(), "Shares") {
			t.Errorf("Shares = %d of a batch of 16: error %v", shares, err)
		}
	}
	if _, err := ParseGradient("reptile"); err == nil {
		t.Error("ParseGradient accepted reptile")
	}
	for _, g := range []Gradient{ITD, AID, ANIL, MAML} {
		if h, err := ParseGradient(g.String()); err != nil || h != g {
			t.Errorf("ParseGradient(%q) = %v, %v", g, h, err)
		}
	}
	l, _ := NewLearner(Settings{}, tiny, 3)
	if err := l.Restore(Snapshot{Params: []float64{1}}); err == nil {
		t.Error("Restore accepted a state of the wrong size")
	}
	bad := toyTasks(t, 2, 1, 1, 1)
	task, _ := bad.Task(0, nil)
	if _, err := l.Step([]*data.Task{task}); err == nil || !strings.Contains(err.Error(), "2-way task for a 3-way learner") {
		t.Errorf("a 2-way task: error %v", err)
	}
}

func optimAdam(lr float64) optim.Adam { return optim.Adam{LR: lr} }
