package unroll_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/diff/fd"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// perStep is a problem without its declared oracles at a fixed outer
// point: the sweep then takes one full mixed product per step, the path
// the fixed oracles' sums must reproduce.
type perStep struct{ *graph.Problem }

func (perStep) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// sweepCase is a compiled problem with a point at which to unroll.
type sweepCase struct {
	name  string
	p     *graph.Problem
	x, y0 []float64
	alpha float64
}

// constant makes a named gorgonia matrix with N(0, scale²) entries, or
// one-hot rows when onehot is set.
func constant(g *G.ExprGraph, rng *rand.Rand, name string, r, c int, scale float64, onehot bool) *G.Node {
	v := make([]float64, r*c)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	if onehot {
		clear(v)
		for i := 0; i < r; i++ {
			v[i*c+rng.IntN(c)] = 1
		}
	}
	return G.NewMatrix(g, G.Float64, G.WithShape(r, c), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v))))
}

// manyReads builds a representation H = tanh(X·A) that the part depending
// on the head W reads through several nodes — H, H⊙H and HᵀH — with a
// penalty that reads the outer vector c,
//
//	g = CE(H·W + (H⊙H)·W, Y) + ‖HᵀH·W‖²/n² + Σ_jk e^{c_j}·W_jk²,
//	f = CE(H'·W + (H'⊙H')·W, Y'),
//
// so that the boundary holds nodes that also feed one another.
func manyReads(t *testing.T, f32 bool) *graph.Problem {
	t.Helper()
	const n, d, h, k = 12, 5, 4, 3
	rng := rand.New(rand.NewPCG(8, 9))
	g := G.NewGraph()
	X, Y := constant(g, rng, "X", n, d, 1, false), constant(g, rng, "Y", n, k, 0, true)
	Xv, Yv := constant(g, rng, "Xv", n, d, 1, false), constant(g, rng, "Yv", n, k, 0, true)
	A := constant(g, rng, "A", d, h, 0.5, false)
	c := constant(g, rng, "c", h, 1, 0.3, false)
	W := constant(g, rng, "W", h, k, 0.3, false)
	feat := func(X *G.Node) (*G.Node, *G.Node) {
		H := G.Must(G.Tanh(G.Must(G.Mul(X, A))))
		return H, G.Must(G.HadamardProd(H, H))
	}
	H, H2 := feat(X)
	logits := G.Must(G.Add(G.Must(G.Mul(H, W)), G.Must(G.Mul(H2, W))))
	ce := G.Must(graph.SoftmaxCrossEntropy(logits, Y))
	// ‖HᵀH W‖²/n² reads Hᵀ·H, a static product of H with itself.
	gram := G.Must(G.Mul(G.Must(G.Transpose(H)), H))
	quad := G.Must(G.Div(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(gram, W)))))), G.NewConstant(float64(n*n))))
	reg := G.Must(G.Sum(G.Must(G.BroadcastHadamardProd(G.Must(G.Exp(c)), G.Must(G.Square(W)), []byte{1}, nil))))
	lower := G.Must(G.Add(G.Must(G.Add(ce, quad)), reg))
	Hv, H2v := feat(Xv)
	upper := G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Add(G.Must(G.Mul(Hv, W)), G.Must(G.Mul(H2v, W)))), Yv))
	p, err := graph.Compile(graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{A, c}, Inner: []*G.Node{W},
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}, Float32Data: f32})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// shifted builds least squares whose outer and inner variables meet at
// the first operation, g = ‖X(A + W) − T‖²/(2n) + ½‖W‖², so that nothing
// but A itself is static: the boundary is the outer variable.
func shifted(t *testing.T) *graph.Problem {
	t.Helper()
	const n, d, k = 10, 4, 2
	rng := rand.New(rand.NewPCG(10, 11))
	g := G.NewGraph()
	X, T := constant(g, rng, "X", n, d, 1, false), constant(g, rng, "T", n, k, 1, false)
	Xv, Tv := constant(g, rng, "Xv", n, d, 1, false), constant(g, rng, "Tv", n, k, 1, false)
	A := constant(g, rng, "A", d, k, 0.5, false)
	W := constant(g, rng, "W", d, k, 0.5, false)
	sq := func(X, T *G.Node) *G.Node {
		r := G.Must(G.Sub(G.Must(G.Mul(X, G.Must(G.Add(A, W)))), T))
		return G.Must(G.Div(G.Must(G.Sum(G.Must(G.Square(r)))), G.NewConstant(float64(2*n))))
	}
	half := G.Must(G.Mul(G.NewConstant(0.5), G.Must(G.Sum(G.Must(G.Square(W))))))
	p, err := graph.Compile(graph.Objective{Upper: sq(Xv, Tv), Lower: G.Must(G.Add(sq(X, T), half)),
		Outer: []*G.Node{A}, Inner: []*G.Node{W}, LowerData: []*G.Node{X, T}, UpperData: []*G.Node{Xv, Tv}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// classes returns n samples of d features with labels cycling over c
// classes.
func classes(rng *rand.Rand, n, d, c int) models.Data {
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % c
	}
	return models.Data{X: x, N: n, D: d, Labels: labels}
}

// sweepCases returns the models the sweep with fixed oracles is checked
// on: logistic regression (the static part is exp(λ)), the
// hyper-representation MLP with biases and a learned penalty, the MLP with
// features wide enough for low-rank sums, a CNN backbone with batch
// normalization, manyReads, shifted, and the MLP and manyReads with
// float32 data.
func sweepCases(t *testing.T) []sweepCase {
	t.Helper()
	rng := rand.New(rand.NewPCG(12, 13))
	point := func(p *graph.Problem, s float64) ([]float64, []float64) {
		x, y := p.X0(nil), p.Y0(nil)
		for i := range x {
			x[i] += s * rng.NormFloat64()
		}
		for i := range y {
			y[i] = 0.3 * rng.NormFloat64()
		}
		return x, y
	}
	var cs []sweepCase
	add := func(name string, p *graph.Problem, alpha float64) {
		x, y := point(p, 0.1)
		cs = append(cs, sweepCase{name, p, x, y, alpha})
	}
	add("logistic", logistic(t, 16, 5, 3), 0.5)
	for _, f32 := range []bool{false, true} {
		m, err := models.MLP(classes(rng, 14, 6, 3), classes(rng, 9, 6, 3), 3,
			models.MLPSettings{Hidden: 5, Bias: true, LearnPenalty: true, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		m.Objective.Float32Data = f32
		p, err := m.Compile()
		if err != nil {
			t.Fatal(err)
		}
		add(map[bool]string{false: "MLP", true: "MLP float32"}[f32], p, 0.5)
		add(map[bool]string{false: "many reads", true: "many reads float32"}[f32], manyReads(t, f32), 0.3)
	}
	// Features 16 wide read by a 3-class head: the adjoints at the
	// features are kept as rank-3 factors (graph/mixedsum.go), multiplied
	// out every two to three steps.
	wide, err := models.MLP(classes(rng, 40, 6, 3), classes(rng, 20, 6, 3), 3, models.MLPSettings{Hidden: 16, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := wide.Compile()
	if err != nil {
		t.Fatal(err)
	}
	add("MLP 16 wide", pw, 0.5)
	sup, qry := classes(rng, 4, 64, 2), classes(rng, 4, 64, 2)
	for i := range sup.X {
		sup.X[i], qry.X[i] = math.Abs(sup.X[i]), math.Abs(qry.X[i])
	}
	cnn, err := models.CNN(sup, qry, 2, models.CNNSettings{Side: 8, Blocks: 2, Filters: 3, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cnn.Compile()
	if err != nil {
		t.Fatal(err)
	}
	add("CNN", p, 0.3)
	add("shifted", shifted(t), 0.3)
	return cs
}

// sweep returns the hypergradient of u on p and, when first is set, the
// sweep's first adjoint.
func sweep(t *testing.T, u *unroll.Unroller, p oracle.Unrolled, c sweepCase, first bool) (dx, dy0 []float64) {
	t.Helper()
	dx = make([]float64, len(c.x))
	if first {
		dy0 = make([]float64, len(c.y0))
	}
	if err := u.Forward(p, c.x, c.y0); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Backward(dx, dy0, p, nil); err != nil {
		t.Fatal(err)
	}
	return dx, dy0
}

// TestFixedSweepEqualsPerStep checks that the sweep on a graph.Problem,
// which sums each run of equal batches' mixed products at the boundary
// of the part that does not depend on y (oracle.Capabilities.FixX), equals
// the sweep with one full mixed product per step to 1e-12 (relative, in
// norm), with the whole data set, one batch at every step, runs of
// batches, batches that change at every step (no run: the per-step path),
// momentum, truncation and the first adjoint.
func TestFixedSweepEqualsPerStep(t *testing.T) {
	var worst float64
	defer func() { t.Logf("largest relative difference %.2e", worst) }()
	for _, c := range sweepCases(t) {
		n := c.p.NumLower()
		b1, b2 := []int{n - 1, 0, 2}, []int{1, 2, n - 2}
		for _, s := range []struct {
			name    string
			u       unroll.Unroller
			batches [][]int // per step, cycled; nil: the whole data set
		}{
			{"whole", unroll.Unroller{Steps: 6}, nil},
			{"one batch", unroll.Unroller{Steps: 6}, [][]int{b1}},
			{"runs", unroll.Unroller{Steps: 7}, [][]int{b1, b1, b2, b2, b2, nil, nil}},
			{"every step", unroll.Unroller{Steps: 4}, [][]int{b1, b2}},
			{"momentum", unroll.Unroller{Steps: 6, Momentum: 0.5}, nil},
			{"truncated", unroll.Unroller{Steps: 6, Truncate: 3}, [][]int{b1, b1, b1, b1, b2, b2}},
		} {
			u := s.u
			u.Alpha = c.alpha
			if s.batches != nil {
				u.Batch = func(t int) []int { return s.batches[t%len(s.batches)] }
			}
			first := s.name != "truncated"
			got, gotY := sweep(t, &u, c.p, c, first)
			want, wantY := sweep(t, &u, perStep{c.p}, c, first)
			e, eY := unroll.RelErr(got, want), 0.0
			if first {
				eY = unroll.RelErr(gotY, wantY)
			}
			worst = max(worst, e, eY)
			if !(e <= 1e-12) {
				t.Errorf("%s, %s: the hypergradient differs from the per-step sweep's by %.2e (relative)", c.name, s.name, e)
			}
			if !(eY <= 1e-12) {
				t.Errorf("%s, %s: the first adjoint differs from the per-step sweep's by %.2e (relative)", c.name, s.name, eY)
			}
		}
	}
}

// TestFixedSweepEqualsInGraphUnroll checks the sweep with fixed oracles
// against the symbolic derivative of the unrolled iteration
// (graph.Problem.Unrolled) and against central differences of
// x ↦ f(x, y_T(x)).
func TestFixedSweepEqualsInGraphUnroll(t *testing.T) {
	for _, c := range sweepCases(t) {
		if c.name == "CNN" {
			continue // its Unrolled graph takes seconds to differentiate: TestFixedSweepEqualsPerStep covers it
		}
		const T, beta = 5, 0.3
		u := &unroll.Unroller{Steps: T, Alpha: c.alpha, Momentum: beta}
		got, _ := sweep(t, u, c.p, c, false)
		ref, err := c.p.Unrolled(T, c.alpha, beta)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(c.x))
		ref.Hypergradient(want, c.x, c.y0)
		e := unroll.RelErr(got, want)
		if !(e <= 1e-12) {
			t.Errorf("%s: the sweep differs from the in-graph unroll by %.2e (relative)", c.name, e)
		}
		unrolled := func(x []float64) float64 {
			v := &unroll.Unroller{Steps: T, Alpha: c.alpha, Momentum: beta}
			if err := v.Forward(c.p, x, c.y0); err != nil {
				t.Fatal(err)
			}
			return c.p.F(x, v.Final(), nil)
		}
		num := fd.Gradient(nil, unrolled, c.x, &fd.Settings{Formula: fd.Central, Step: 1e-5})
		eFD := unroll.RelErr(got, num)
		if !(eFD <= 1e-7) {
			t.Errorf("%s: the sweep differs from central differences by %.2e (relative)", c.name, eFD)
		}
		t.Logf("%s: relative difference %.1e from the in-graph unroll, %.1e from central differences", c.name, e, eFD)
	}
}
