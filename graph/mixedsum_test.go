package graph

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestMixedXYSum checks FixedX's sums of mixed products on ridge
// regression against the closed form Σ_i ∇λw g(y_i)·v_i = Σ_i e^λ⊙y_i⊙v_i
// and against the sum of MixedXY products, with two FixedX values (one
// on a batch) used in turn, an empty sum (zero), a sum restarted by
// MixedXYSum, and one count per product added.
func TestMixedXYSum(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	x1, x2 := []float64{0.1, -0.2, 0.3}, []float64{1, 0, -1}
	ys := [][]float64{{0.5, 1, -2}, {1, 0.25, 3}, {-1, 2, 0.5}}
	vs := [][]float64{{1, -1, 0.5}, {0.3, 2, -1}, {2, 0.5, 1}}
	fs := []*FixedX{p.FixX(x1, []int{3, 1}, nil), p.FixX(x2, nil, nil)}
	xs, batches := [][]float64{x1, x2}, [][]int{{3, 1}, nil}
	got, want, mixed := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	for _, f := range fs {
		got[0] = math.NaN()
		f.MixedXYSum(got)
		for i, g := range got {
			if g != 0 {
				t.Errorf("empty sum[%d] = %v, want 0", i, g)
			}
		}
	}
	before := p.Stats().MixedXYProducts
	for round := range 2 {
		for k := range round + 2 { // two products, then three
			for _, f := range fs {
				f.AddMixedXY(ys[k], vs[k])
			}
		}
		for i, f := range fs {
			f.MixedXYSum(got)
			clear(want)
			var direct []float64
			for k := range round + 2 {
				p.MixedXY(mixed, xs[i], ys[k], vs[k], batches[i])
				direct = append(direct, mixed...)
				for j := range want {
					want[j] += math.Exp(xs[i][j]) * ys[k][j] * vs[k][j]
				}
			}
			for j := range got {
				var sum float64
				for k := 0; k < len(direct); k += 3 {
					sum += direct[k+j]
				}
				if math.Abs(got[j]-want[j]) > 1e-14*(1+math.Abs(want[j])) || math.Abs(got[j]-sum) > 1e-14*(1+math.Abs(sum)) {
					t.Errorf("round %d, FixedX %d: sum[%d] = %v, closed form %v, sum of MixedXY %v", round, i, j, got[j], want[j], sum)
				}
			}
		}
	}
	// 2·(2 + 3) products added, as many MixedXY calls to check them.
	if n := p.Stats().MixedXYProducts - before; n != 20 {
		t.Errorf("%d mixed products counted, want 20", n)
	}
}

// TestSweepProgram checks that FixedX's ∇y g and HVP, which run the
// dynamic steps they need of the shared sweep program, equal the direct
// oracles bit for bit, before and after sums of mixed products on the same
// program, for two FixedX values used in turn.
func TestSweepProgram(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	xs, batches := [][]float64{{0.1, -0.2, 0.3}, {1, 0, -1}}, [][]int{{3, 1}, nil}
	fs := []*FixedX{p.FixX(xs[0], batches[0], nil), p.FixX(xs[1], batches[1], nil)}
	y, v := []float64{0.5, 1, -2}, []float64{1, -1, 0.5}
	a, b, sum := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	for round := range 2 {
		for i, f := range fs {
			f.GradG(nil, a, y)
			p.GradG(nil, b, xs[i], y, batches[i])
			for j := range a {
				if a[j] != b[j] {
					t.Errorf("round %d, FixedX %d: ∇y g[%d] = %v, directly %v", round, i, j, a[j], b[j])
				}
			}
			f.AddMixedXY(y, v)
			f.HVP(a, y, v)
			p.HVP(b, xs[i], y, v, batches[i])
			for j := range a {
				if a[j] != b[j] {
					t.Errorf("round %d, FixedX %d: HVP[%d] = %v, directly %v", round, i, j, a[j], b[j])
				}
			}
			f.MixedXYSum(sum)
		}
	}
}

// randomMatrix makes a named r×k gorgonia matrix with N(0, scale²)
// entries, or one-hot rows when onehot is set.
func randomMatrix(g *G.ExprGraph, rng *rand.Rand, name string, r, k int, scale float64, onehot bool) *G.Node {
	v := make([]float64, r*k)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	if onehot {
		clear(v)
		for i := range r {
			v[i*k+rng.IntN(k)] = 1
		}
	}
	return G.NewMatrix(g, G.Float64, G.WithShape(r, k), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(r, k), tensor.WithBacking(v))))
}

// headMLP is g = CE(tanh(X·W1)·W2, Y) + 0.05‖W2‖², f the same on other
// samples, with W1 (d×h) the outer variable and W2 (h×c) the inner one;
// normal data, one-hot targets. With transposed, the logits are formed as
// (W2ᵀ·tanh(X·W1)ᵀ)ᵀ.
func headMLP(t testing.TB, n, d, h, c int, transposed bool) *Problem {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	g := G.NewGraph()
	mat := func(name string, r, k int, scale float64, onehot bool) *G.Node {
		return randomMatrix(g, rng, name, r, k, scale, onehot)
	}
	X, Y := mat("X", n, d, 1, false), mat("Y", n, c, 0, true)
	Xv, Yv := mat("Xv", n/2, d, 1, false), mat("Yv", n/2, c, 0, true)
	W1 := mat("W1", d, h, 1/math.Sqrt(float64(d)), false)
	W2 := mat("W2", h, c, 0.1, false)
	logits := func(X *G.Node) *G.Node {
		H := G.Must(G.Tanh(G.Must(G.Mul(X, W1))))
		if transposed {
			return G.Must(G.Transpose(G.Must(G.Mul(G.Must(G.Transpose(W2)), G.Must(G.Transpose(H))))))
		}
		return G.Must(G.Mul(H, W2))
	}
	pen := G.Must(G.Mul(G.NewConstant(0.05), G.Must(G.Sum(G.Must(G.Square(W2))))))
	lower := G.Must(G.Add(G.Must(SoftmaxCrossEntropy(logits(X), Y)), pen))
	upper := G.Must(SoftmaxCrossEntropy(logits(Xv), Yv))
	p, err := Compile(Objective{Upper: upper, Lower: lower, Outer: []*G.Node{W1}, Inner: []*G.Node{W2},
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLowRankSum checks the sum of mixed products at features read by a
// head, whose adjoints are kept as the factors of products with the
// head's narrow inner size (two terms of rank 3 per product, buffers of
// rank 16, so that the factors are multiplied out twice in seven
// products), against the sum of MixedXY products to 1e-13 relative, on
// the whole data set and on a batch.
func TestLowRankSum(t *testing.T) {
	for _, transposed := range []bool{false, true} {
		lowRankSum(t, headMLP(t, 40, 6, 16, 3, transposed), transposed)
	}
}

func lowRankSum(t *testing.T, p *Problem, transposed bool) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y, v := p.X0(nil), make([]float64, p.DimY()), make([]float64, p.DimY())
	got, want, mixed := make([]float64, p.DimX()), make([]float64, p.DimX()), make([]float64, p.DimX())
	for _, batch := range [][]int{nil, {3, 1, 4, 1, 5, 9, 2, 6, 5, 35, 8, 9, 7, 9, 3, 2, 38}} {
		f := p.FixX(x, batch, nil)
		ms := f.p.mustWorld(lowerLevel, batch).sweepProgram()
		if len(ms.bounds) != 1 || len(ms.bounds[0].terms) != 2 || ms.bounds[0].dense >= 0 || ms.bounds[0].kmax != 16 {
			t.Fatalf("the features' adjoint: %d boundaries, %+v; want one, two rank-3 terms, nothing dense, buffers of rank 16", len(ms.bounds), ms.bounds)
		}
		if tr := ms.bounds[0].terms[0].ta || ms.bounds[0].terms[1].ta; tr != transposed {
			t.Fatalf("the features' adjoint: terms %+v; want a transposed factor: %v", ms.bounds[0].terms, transposed)
		}
		clear(want)
		for range 7 {
			for i := range y {
				y[i], v[i] = 0.3*rng.NormFloat64(), rng.NormFloat64()
			}
			f.AddMixedXY(y, v)
			p.MixedXY(mixed, x, y, v, batch)
			for i, m := range mixed {
				want[i] += m
			}
		}
		f.MixedXYSum(got)
		var d, s float64
		for i := range got {
			d, s = math.Max(d, math.Abs(got[i]-want[i])), math.Max(s, math.Abs(want[i]))
		}
		if !(d <= 1e-13*s) {
			t.Errorf("transposed %v, batch %v: the sum of seven mixed products differs from MixedXY's by %.2e relative", transposed, batch, d/s)
		}
	}
}

// TestSweepMemo checks that FixedX's oracles, which skip the steps of the
// sweep program already run at the same y and v, give the direct oracles'
// bits through a sequence that reuses, changes y alone, changes v alone,
// and changes both, with a second FixedX used in between.
func TestSweepMemo(t *testing.T) {
	p := headMLP(t, 40, 6, 16, 3, false)
	rng := rand.New(rand.NewPCG(5, 6))
	vec := func() []float64 {
		v := make([]float64, p.DimY())
		for i := range v {
			v[i] = 0.3 * rng.NormFloat64()
		}
		return v
	}
	x, x2 := p.X0(nil), p.X0(nil)
	x2[0] += 0.5
	f, other := p.FixX(x, nil, nil), p.FixX(x2, nil, nil)
	y1, y2, v1, v2 := vec(), vec(), vec(), vec()
	got, want := make([]float64, p.DimY()), make([]float64, p.DimY())
	check := func(what string, y, v []float64) {
		t.Helper()
		if v == nil {
			f.GradG(nil, got, y)
			p.GradG(nil, want, x, y, nil)
		} else {
			f.HVP(got, y, v)
			p.HVP(want, x, y, v, nil)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: [%d] = %v, directly %v", what, i, got[i], want[i])
			}
		}
	}
	f.AddMixedXY(y1, v1)
	check("HVP after a mixed product at the same y and v", y1, v1)
	check("HVP at a new v", y1, v2)
	check("∇y g at the same y", y1, nil)
	check("HVP at a new y and the same v", y2, v2)
	f.AddMixedXY(y2, v1)
	check("HVP at the v of the mixed product", y2, v1)
	other.AddMixedXY(y2, v1)
	check("HVP after another FixedX at the same y and v", y2, v1)
	check("∇y g at a new y", y1, nil)
	sum, mixed := make([]float64, p.DimX()), make([]float64, p.DimX())
	f.MixedXYSum(sum)
	other.MixedXYSum(sum)
	p.MixedXY(mixed, x2, y2, v1, nil)
	for i := range sum {
		if !(math.Abs(sum[i]-mixed[i]) <= 1e-13*(1+math.Abs(mixed[i]))) {
			t.Fatalf("the other FixedX's mixed product [%d] = %v, directly %v", i, sum[i], mixed[i])
		}
	}
	check("HVP after the sums", y1, v1)
}
