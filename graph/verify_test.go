package graph

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
)

// findNode returns the node of the objective whose operation's name
// starts with op.
func findNode(t *testing.T, p *Problem, op string) *G.Node {
	t.Helper()
	for _, n := range p.src.order {
		if n.Op() != nil && strings.HasPrefix(n.Op().String(), op) {
			return n
		}
	}
	t.Fatalf("no %s node", op)
	return nil
}

// TestVerifyCatchesWrongArguments: were the importer to read a node's
// arguments wrong again (as gorgonia's stale id cache made it do), the
// translation check names that node.
func TestVerifyCatchesWrongArguments(t *testing.T) {
	obj, _ := staleCase(t)
	p, err := Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	tanh, sin := findNode(t, p, "tanh"), findNode(t, p, "sin")
	p.src.args[tanh] = p.src.args[sin] // tanh(X2·w) instead of tanh(X1·w)
	clear(p.worlds)
	_, err = p.verify(p.x0, p.y0, [2][]int{})
	if err == nil || !strings.Contains(err.Error(), nodeName(tanh)) || !strings.Contains(err.Error(), "gorgonia") {
		t.Errorf("verify: %v, want an error naming %s", err, nodeName(tanh))
	}
}

// TestVerifyCatchesProgramFaults: a compiled program that computes a node
// other than its translation says (a fault of scheduling, say) is caught
// too, though the translation of the node alone is right.
func TestVerifyCatchesProgramFaults(t *testing.T) {
	obj, _ := staleCase(t)
	p, err := Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	tanh, sin := findNode(t, p, "tanh"), findNode(t, p, "sin")
	w, err := p.world(lowerLevel, -1)
	if err != nil {
		t.Fatal(err)
	}
	w.ir[tanh] = w.ir[sin]
	_, err = p.verifyLevel(lowerLevel, p.x0, p.y0, nil)
	if err == nil || !strings.Contains(err.Error(), nodeName(tanh)) || !strings.Contains(err.Error(), "compiled program") {
		t.Errorf("verify: %v, want an error naming %s and the compiled program", err, nodeName(tanh))
	}
}

// TestVerifyRows: the check reads all samples of small data and the first
// verifyElems elements' worth of large data.
func TestVerifyRows(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	if r := p.verifyRows(lowerLevel); r != nil {
		t.Errorf("4 samples of 4 values: the check reads rows %v, want all", r)
	}
	const n, d = 20000, 3
	a := make([]float64, n*d)
	tt := make([]float64, n)
	for i := range a {
		a[i] = math.Sin(float64(i))
	}
	if p, err = Compile(ridge(a, tt, n, d)); err != nil {
		t.Fatal(err)
	}
	if r := p.verifyRows(lowerLevel); len(r) < 2 || len(r) >= n {
		t.Errorf("%d samples: the check reads %d rows, want a few", n, len(r))
	}
	if r := Check(p, p.X0(nil), []float64{0.1, 0.2, 0.3}, &CheckSettings{LowerBatch: []int{4999, 7}}); r.Translation > verifyTol || r.TranslationErr != nil {
		t.Errorf("Check on a batch: translation %v (%v)", r.Translation, r.TranslationErr)
	}
}

// TestSetDataOtherLevel: an objective that reads the other level's data
// sees the values SetData gave them (the translation check found that it
// kept the values of Compile).
func TestSetDataOtherLevel(t *testing.T) {
	build := func(tv []float64) (*Problem, Objective) {
		o := ridge(ridgeA, tv, 4, 3)
		o.Upper = G.Must(G.Add(o.Upper, G.Must(G.Sum(o.LowerData[1]))))
		p, err := Compile(o)
		if err != nil {
			t.Fatal(err)
		}
		return p, o
	}
	other := []float64{3, 1, 4, 1}
	p, o := build(ridgeT)
	q, _ := build(other)
	if err := p.SetData(o.LowerData[1], other); err != nil {
		t.Fatal(err)
	}
	x, y := p.X0(nil), []float64{1, 2, 3}
	if a, b := p.F(x, y, nil), q.F(x, y, nil); a != b {
		t.Errorf("f after SetData of the lower data it reads: %v, want %v", a, b)
	}
	if r := Check(p, x, y, nil); r.TranslationErr != nil {
		t.Errorf("translation after SetData: %v", r.TranslationErr)
	}
}

// TestVerifyCatchesFloat32Kernels: a float32 kernel that computes
// something else than its float64 twin (here tanh's, off by 1% — a wrong
// polynomial, say) makes Compile of a Float32 problem fail naming the
// node, while the same objective in float64 compiles.
func TestVerifyCatchesFloat32Kernels(t *testing.T) {
	obj, _ := staleCase(t)
	if _, err := Compile(obj); err != nil {
		t.Fatal(err)
	}
	saved := ops[opTanh].f32
	defer func() { ops[opTanh].f32 = saved }()
	ops[opTanh].f32 = func(n *node, out []float32, in [][]float32) {
		saved(n, out, in)
		for i := range out {
			out[i] *= 1.01
		}
	}
	obj.Float32 = true
	_, err := Compile(obj)
	if err == nil || !strings.Contains(err.Error(), `"tanh`) || !strings.Contains(err.Error(), "in float32") {
		t.Errorf("Compile with a wrong float32 tanh: %v, want an error naming the tanh node", err)
	}
	t.Logf("Compile with a wrong float32 tanh: %v", err)
	ops[opTanh].f32 = saved
	if _, err := Compile(obj); err != nil {
		t.Errorf("Compile in float32 with the right kernel: %v", err)
	}
}
