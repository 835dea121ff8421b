package graph

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// rowModel builds a classifier on n samples of d features with c classes:
// logistic regression with per-feature penalties e^λ (x = λ, y = W and a
// bias b), or, with hidden > 0, the MLP of headMLP with a bias on the
// head.
func rowModel(t *testing.T, n, d, c, hidden int) *Problem {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	g := G.NewGraph()
	mat := func(name string, r, k int, scale float64, onehot bool) *G.Node {
		return randomMatrix(g, rng, name, r, k, scale, onehot)
	}
	X, Y := mat("X", n, d, 1, false), mat("Y", n, c, 0, true)
	Xv, Yv := mat("Xv", n/2, d, 1, false), mat("Yv", n/2, c, 0, true)
	B := mat("b", 1, c, 0.1, false)
	if hidden > 0 {
		W1, W2 := mat("W1", d, hidden, 1/math.Sqrt(float64(d)), false), mat("W2", hidden, c, 0.3, false)
		logits := func(X *G.Node) *G.Node {
			H := G.Must(G.Tanh(G.Must(G.Mul(X, W1))))
			return G.Must(G.BroadcastAdd(G.Must(G.Mul(H, W2)), B, nil, []byte{0}))
		}
		pen := G.Must(G.Mul(G.NewConstant(0.05), G.Must(G.Sum(G.Must(G.Square(W2))))))
		p, err := Compile(Objective{Upper: G.Must(SoftmaxCrossEntropy(logits(Xv), Yv)),
			Lower: G.Must(G.Add(G.Must(SoftmaxCrossEntropy(logits(X), Y)), pen)),
			Outer: []*G.Node{W1}, Inner: []*G.Node{W2, B}, LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lam := G.NewMatrix(g, G.Float64, G.WithShape(d, 1), G.WithName("lam"), G.WithValue(tensor.New(tensor.WithShape(d, 1), tensor.WithBacking(make([]float64, d)))))
	W := mat("W", d, c, 0.3, false)
	logits := func(X *G.Node) *G.Node { return G.Must(G.BroadcastAdd(G.Must(G.Mul(X, W)), B, nil, []byte{0})) }
	pen := G.Must(G.Sum(G.Must(G.BroadcastHadamardProd(G.Must(G.Exp(lam)), G.Must(G.Square(W)), []byte{1}, nil))))
	p, err := Compile(Objective{Upper: G.Must(SoftmaxCrossEntropy(logits(Xv), Yv)),
		Lower: G.Must(G.Add(G.Must(SoftmaxCrossEntropy(logits(X), Y)), G.Must(G.Mul(G.NewConstant(0.01), pen)))),
		Outer: []*G.Node{lam}, Inner: []*G.Node{W, B}, LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// oracleValues returns every oracle of p at one point, and those at a
// fixed outer point, on the whole data set and on a batch, one vector
// after the other.
func oracleValues(p *Problem, batch []int) [][]float64 {
	rng := rand.New(rand.NewPCG(9, 10))
	vec := func(n int, s float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = s * rng.NormFloat64()
		}
		return v
	}
	x, y := vec(p.DimX(), 0.3), vec(p.DimY(), 0.3)
	v, u := vec(p.DimY(), 1), vec(p.DimX(), 1)
	var out [][]float64
	for _, b := range [][]int{nil, batch} {
		gx, gy, fx, fy := make([]float64, p.DimX()), make([]float64, p.DimY()), make([]float64, p.DimX()), make([]float64, p.DimY())
		p.GradG(gx, gy, x, y, b)
		p.GradF(fx, fy, x, y, nil)
		h, m, mt := make([]float64, p.DimY()), make([]float64, p.DimX()), make([]float64, p.DimY())
		p.HVP(h, x, y, v, b)
		p.MixedXY(m, x, y, v, b)
		p.MixedYX(mt, x, y, u, b)
		lin := p.Linearize(x, y, b)
		hl := make([]float64, p.DimY())
		lin.HVP(hl, v)
		out = append(out, []float64{p.G(x, y, b), p.F(x, y, nil)}, gx, gy, fx, fy, h, m, mt, hl)
		// At a fixed x, the sweep program runs the steps each oracle
		// needs (masks): ∇y g, then an HVP after a mixed product at the
		// same point, and a sum of two mixed products.
		f := p.FixX(x, b, nil)
		fg, fh, fm := make([]float64, p.DimY()), make([]float64, p.DimY()), make([]float64, p.DimX())
		f.GradG(nil, fg, y)
		f.AddMixedXY(y, v)
		f.HVP(fh, y, v)
		f.AddMixedXY(v, y)
		f.MixedXYSum(fm)
		out = append(out, fg, fh, fm)
	}
	return out
}

// programs returns p's compiled programs, the sweep programs included.
func programs(p *Problem) []*program {
	var progs []*program
	for _, w := range p.worlds {
		progs = append(progs, slices.Collect(maps.Values(w.progs))...)
		if w.sweep != nil {
			progs = append(progs, w.sweep.prog)
		}
	}
	return progs
}

// segments counts the steps in row segments of p's compiled programs.
func segments(p *Problem) int {
	k := 0
	for _, pr := range programs(p) {
		if pr.rows == nil {
			continue
		}
		for _, s := range pr.rows.of {
			if s != nil {
				k++
			}
		}
	}
	return k
}

// rowBatch is the batch of the row-block tests: repeated samples, in no
// order.
var rowBatch = []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 35, 8, 9, 7, 9, 3, 2, 36, 0, 30, 31, 12, 13, 14}

// TestRowBlocks checks that programs run by blocks of rows (row
// segments, with blocks of 4 to 12 rows, parts that end in partial
// blocks) give every oracle — values, gradients, HVPs, both mixed
// products, the linearized HVP, and at a fixed outer point ∇y g, an HVP
// and a sum of mixed products (parts of the sweep program), on the whole
// data set and on a batch — to 1e-13 relative (in norm) of the programs
// run whole, on logistic
// regression with a bias and per-feature penalties and on an MLP whose
// head has a bias, and that the gradients' programs hold row segments.
func TestRowBlocks(t *testing.T) {
	defer func(b, m int) { blockBytes, blockMinBytes = b, m }(blockBytes, blockMinBytes)
	batch := rowBatch
	for _, c := range []struct {
		name               string
		n, d, k, h, blockB int
	}{
		{"logistic", 37, 6, 3, 0, 4 * 6 * 8},
		{"logistic, blocks of 12", 41, 6, 3, 0, 12 * 6 * 8},
		{"MLP", 37, 6, 3, 5, 4 * 6 * 8},
	} {
		blockBytes, blockMinBytes = 16<<20, 16<<20
		want := oracleValues(rowModel(t, c.n, c.d, c.k, c.h), batch)
		blockBytes, blockMinBytes = c.blockB, 0
		p := rowModel(t, c.n, c.d, c.k, c.h)
		got := oracleValues(p, batch)
		if segments(p) == 0 {
			t.Errorf("%s: no program runs by blocks of rows", c.name)
		}
		var worst float64
		for i := range want {
			var d, s float64
			for j := range want[i] {
				d, s = math.Max(d, math.Abs(got[i][j]-want[i][j])), math.Max(s, math.Abs(want[i][j]))
			}
			if !(d <= 1e-13*s) {
				t.Errorf("%s: oracle output %d differs by %.2e relative", c.name, i, d/s)
			}
			if d > 0 {
				worst = math.Max(worst, d/s)
			}
		}
		t.Logf("%s: %d steps in row segments, worst relative difference %.1e", c.name, segments(p), worst)
	}
}
