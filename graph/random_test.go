package graph

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
)

// randomModel is g = mean_i Σ_j (dropout(X ⊙ W) + noise)²_ij + Σ λ W² and
// f = Σ W², with X (n×d) lower-level data, W (1×d) broadcast over rows,
// noise a GaussianRandomNode with X's shape.
func randomModel(t *testing.T, n, d int, seed uint64) (Objective, *G.Node, *G.Node) {
	t.Helper()
	g := G.NewGraph()
	xs := make([]float64, n*d)
	for i := range xs {
		xs[i] = 1 + math.Sin(float64(i))
	}
	X := matNode(g, "X", n, d, xs)
	W := matNode(g, "W", 1, d, make([]float64, d))
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(0.1))
	drop := G.Must(G.Dropout(G.Must(G.BroadcastHadamardProd(X, W, nil, []byte{0})), 0.3))
	noise := G.GaussianRandomNode(g, G.Float64, 0.5, 2, n, d)
	sum := G.Must(G.Add(drop, noise))
	lower := G.Must(G.Add(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(sum)), 1)))), G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(W))))))))
	upper := G.Must(G.Sum(G.Must(G.Square(W))))
	return Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{W}, LowerData: []*G.Node{X}, RandomSeed: seed}, drop, noise
}

// nodeValues returns the values of the translation of node n in the
// lower-level program on a batch (nil: all samples).
func nodeValues(t *testing.T, p *Problem, n *G.Node, batch []int) []float64 {
	t.Helper()
	size := -1
	if batch != nil {
		size = len(batch)
	}
	w, err := p.world(lowerLevel, size)
	if err != nil {
		t.Fatal(err)
	}
	return p.ourValues(w, p.x0, []float64{0.3, -0.2, 0.5, 1}, batch, false)[n]
}

// TestRandomDraws checks the draws of Dropout and random nodes: the same
// for a sample in every batch and oracle, the documented fractions and
// moments, other draws for another seed, none in evaluation, and first and
// second derivatives of one batch consistent with its value.
func TestRandomDraws(t *testing.T) {
	const n, d = 400, 4
	obj, drop, noise := randomModel(t, n, d, 7)
	p, err := Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	full := nodeValues(t, p, drop, nil)
	batch := []int{17, 3, 399, 3}
	part := nodeValues(t, p, drop, batch)
	for r, s := range batch {
		for j := 0; j < d; j++ {
			if part[r*d+j] != full[s*d+j] {
				t.Fatalf("dropout of sample %d in a batch: %v, in all samples: %v", s, part[r*d:(r+1)*d], full[s*d:(s+1)*d])
			}
		}
	}
	xw := nodeValues(t, p, p.src.args[drop][0], nil)
	kept := 0
	for i, v := range full {
		switch {
		case v == 0:
		case math.Abs(v-xw[i]/0.7) < 1e-15*math.Abs(v):
			kept++
		default:
			t.Fatalf("dropout element %d is %v, neither 0 nor %v/(1−p)", i, v, xw[i])
		}
	}
	// Bernoulli(0.7) over 1600 elements: σ of the fraction 0.0115.
	if f := float64(kept) / float64(n*d); math.Abs(f-0.7) > 0.05 {
		t.Errorf("dropout keeps %.3f of the elements, want 0.7", f)
	}
	z := nodeValues(t, p, noise, nil)
	var mean, sq float64
	for _, v := range z {
		mean += v
		sq += v * v
	}
	mean /= float64(len(z))
	sd := math.Sqrt(sq/float64(len(z)) - mean*mean)
	if math.Abs(mean-0.5) > 0.2 || math.Abs(sd-2) > 0.2 {
		t.Errorf("Gaussian node N(0.5, 2): mean %.3f, sd %.3f over %d draws", mean, sd, len(z))
	}

	x, y := p.X0(nil), []float64{0.3, -0.2, 0.5, 1}
	if r := Check(p, x, y, &CheckSettings{LowerBatch: batch}); r.Max() > 1e-6 {
		t.Errorf("oracles of a batch against finite differences of its value: %v", r)
	}

	q, err := Compile(func() Objective { o, _, _ := randomModel(t, n, d, 8); return o }())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.G(x, y, nil), q.G(x, y, nil); a == b {
		t.Errorf("seeds 7 and 8 give the same g = %v", a)
	}

	if err := p.SetTraining(false); err != nil {
		t.Fatal(err)
	}
	eval := nodeValues(t, p, drop, nil)
	for i := range eval {
		if eval[i] != xw[i] {
			t.Fatalf("dropout in evaluation: element %d is %v, want its input %v", i, eval[i], xw[i])
		}
	}
	for i, v := range nodeValues(t, p, noise, nil) {
		if v != 0.5 {
			t.Fatalf("Gaussian node in evaluation: element %d is %v, want the mean 0.5", i, v)
		}
	}
	if r := Check(p, x, y, nil); r.Max() > 1e-6 {
		t.Errorf("oracles in evaluation: %v", r)
	}
}

// TestBinomialAndUniformDraws checks the moments of the other random
// nodes: a binomial node counts t trials of probability q (mean tq), a
// uniform node on [a, b) has mean (a + b)/2 and values in [a, b).
func TestBinomialAndUniformDraws(t *testing.T) {
	g := G.NewGraph()
	w := vecNode(g, "w", []float64{1, 2})
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(1.0))
	bin := G.BinomialRandomNode(g, G.Float64, 5, 0.3, 50, 40)
	uni := G.UniformRandomNode(g, G.Float64, -1, 3, 40, 50)
	s := G.Must(G.Add(G.Must(G.Sum(bin)), G.Must(G.Sum(uni))))
	lower := G.Must(G.Add(G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(w)))))), s))
	p, err := Compile(Objective{Upper: lower, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}})
	if err != nil {
		t.Fatal(err)
	}
	w0, err := p.world(lowerLevel, -1)
	if err != nil {
		t.Fatal(err)
	}
	vals := p.ourValues(w0, p.x0, p.y0, nil, false)
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	for _, v := range vals[bin] {
		if v != math.Trunc(v) || v < 0 || v > 5 {
			t.Fatalf("binomial draw %v is not a count of 5 trials", v)
		}
	}
	// 2000 draws: σ of the means 0.023 (binomial) and 0.026 (uniform).
	if m := mean(vals[bin]); math.Abs(m-1.5) > 0.12 {
		t.Errorf("binomial node of 5 trials with q = 0.3: mean %.3f, want 1.5", m)
	}
	for _, v := range vals[uni] {
		if v < -1 || v >= 3 {
			t.Fatalf("uniform draw %v outside [-1, 3)", v)
		}
	}
	if m := mean(vals[uni]); math.Abs(m-1) > 0.13 {
		t.Errorf("uniform node on [-1, 3): mean %.3f, want 1", m)
	}
	if err := p.SetTraining(false); err != nil {
		t.Fatal(err)
	}
	if got, want := p.G(p.X0(nil), p.Y0(nil), nil), 5.0+1.5*2000+1*2000; math.Abs(got-want) > 1e-9 {
		t.Errorf("in evaluation g = %v, want %v (the nodes' means)", got, want)
	}
}
