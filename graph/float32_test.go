package graph

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
)

// TestMatmulMixed checks products with a float32 operand against the
// float64 product of the widened values, for every route of matmulInto
// (narrow, short inner dimension, wide, transposed), with the data on
// either side or both, with and without AVX-512.
func TestMatmulMixed(t *testing.T) { withoutAVX512Too(func() { testMatmulMixed(t) }) }

// withoutAVX512Too runs f, and again without the AVX-512 kernels (as on a
// processor without them) when this one has them.
func withoutAVX512Too(f func()) {
	f()
	if useAVX512 {
		useAVX512 = false
		defer func() { useAVX512 = true }()
		f()
	}
}

// eachTranspose calls f with the operand shapes of op(x)·op(y), op(x)
// m×k and op(y) k×n, under each of the four transpose combinations.
func eachTranspose(m, k, n int, f func(xs, ys []int, tx, ty bool)) {
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		xs, ys := []int{m, k}, []int{k, n}
		if tr[0] {
			xs = []int{k, m}
		}
		if tr[1] {
			ys = []int{n, k}
		}
		f(xs, ys, tr[0], tr[1])
	}
}

func testMatmulMixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	randn := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(rng.NormFloat64()))
		}
		return v
	}
	for _, c := range []struct{ m, k, n int }{{1, 1, 1}, {3, 5, 2}, {7, 13, 9}, {37, 50, 12}, {1002, 784, 10}, {2000, 100, 10}, {9, 700, 25}, {5, 3000, 31}, {301, 32, 290}, {600, 40, 33}, {70, 500, 40}} {
		eachTranspose(c.m, c.k, c.n, func(xs, ys []int, tx, ty bool) {
			tr := [2]bool{tx, ty}
			for _, which := range []string{"x", "y", "both"} {
				x, y := randn(c.m*c.k), randn(c.k*c.n)
				want := make([]float64, c.m*c.n)
				matmulInto(want, x, y, xs, ys, tr[0], tr[1])
				var x32, y32 []float32
				xa, ya := x, y
				if which != "y" {
					x32, xa = narrowed(x), nil
				}
				if which != "x" {
					y32, ya = narrowed(y), nil
				}
				got := make([]float64, c.m*c.n)
				for i := range got {
					got[i] = math.NaN() // every element must be written
				}
				matmulMixed(got, xa, x32, ya, y32, xs, ys, tr[0], tr[1])
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-12*(math.Abs(want[i])+math.Sqrt(float64(c.k))) {
						t.Fatalf("%v transposes %v, %s in float32: out[%d] = %v, want %v", c, tr, which, i, got[i], want[i])
					}
				}
			}
		})
	}
}

func TestWidenInto(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1000} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i)*0.37 - 11
		}
		src = append(src, 99) // beyond the destination's length: not read
		dst := make([]float64, n+1)
		dst[n] = -1
		widenInto(dst[:n], src[:n])
		for i := 0; i < n; i++ {
			if dst[i] != float64(src[i]) {
				t.Fatalf("n = %d: dst[%d] = %v, want %v", n, i, dst[i], float64(src[i]))
			}
		}
		if dst[n] != -1 {
			t.Fatalf("n = %d: widenInto wrote past its length", n)
		}
	}
}

// mixedObjective builds a problem that reads its data every way graph/
// allows: products (X·W), an elementwise operation (X²), the lower
// level's data read by the upper objective, and per-sample weights
// gathered at a SampleIndex. The data are float32-rounded when round is
// set.
func mixedObjective(n, d, c, nv int, seed uint64, round, f32 bool) Objective {
	rng := rand.New(rand.NewPCG(seed, 11))
	randn := func(k int) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = rng.NormFloat64()
			if round {
				v[i] = float64(float32(v[i]))
			}
		}
		return v
	}
	onehot := func(rows int) []float64 {
		v := make([]float64, rows*c)
		for i := 0; i < rows; i++ {
			v[i*c+rng.IntN(c)] = 1
		}
		return v
	}
	g := G.NewGraph()
	X := matNode(g, "X", n, d, randn(n*d))
	Y := matNode(g, "Y", n, c, onehot(n))
	Xv := matNode(g, "Xv", nv, d, randn(nv*d))
	Yv := matNode(g, "Yv", nv, c, onehot(nv))
	idx := SampleIndex(g, "sample", n)
	W := matNode(g, "W", d, c, make([]float64, d*c))
	lam := vecNode(g, "lambda", make([]float64, d))
	s := vecNode(g, "s", make([]float64, n))
	logp := G.Must(LogSoftmax(G.Must(G.Mul(X, W)), 1))
	ce := G.Must(G.Neg(G.Must(G.Sum(G.Must(G.HadamardProd(Y, logp)), 1))))
	wts := G.Must(G.Sigmoid(G.Must(Gather(s, idx))))
	loss := G.Must(G.Mean(G.Must(G.HadamardProd(wts, ce))))
	pen := G.Must(G.Mul(G.Must(G.Exp(lam)), G.Must(G.Sum(G.Must(G.Square(W)), 1))))
	energy := G.Must(G.Mean(G.Must(G.Square(X)))) // elementwise on the data
	lower := G.Must(G.Add(loss, G.Must(G.Mul(G.Must(G.Add(energy, G.NewConstant(1.0))), G.Must(G.Mul(pen, G.NewConstant(0.01)))))))
	upper := G.Must(SoftmaxCrossEntropy(G.Must(G.Mul(Xv, W)), Yv))
	seen := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(X, W)))))) // the lower level's data, read whole
	upper = G.Must(G.Add(upper, G.Must(G.Mul(seen, G.NewConstant(0.1)))))
	return Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam, s}, Inner: []*G.Node{W},
		LowerData: []*G.Node{idx, X, Y}, UpperData: []*G.Node{Xv, Yv}, Float32Data: f32}
}

// TestFloat32Data checks a problem with its data in float32 against the
// same problem in float64 on the rounded data (float32Scenario: to 1e-13,
// the order of the sums in the products), and its oracles against finite
// differences.
func TestFloat32Data(t *testing.T) {
	p32, x, y, worst := float32Scenario(t, func(o *Objective) { o.Float32Data = true }, 1e-13)
	lo := &p32.levels[lowerLevel]
	if lo.full[0].f64 == nil || lo.full[1].f32 == nil || lo.full[2].f32 == nil || p32.levels[upperLevel].full[0].f32 == nil {
		t.Fatal("Float32Data: want the index in float64 and the other data in float32")
	}
	t.Logf("largest relative difference from float64: %.2e", worst)
	if r := Check(p32, x, y, nil); r.Max() > 1e-6 {
		t.Errorf("finite differences: %v", r)
	}
}

// TestFloat32 checks a problem computed in float32 (Objective.Float32)
// against the same problem in float64 on the rounded data
// (float32Scenario: to 1e-5), and runs Check on it: its float64 twin
// against finite differences, its oracles against the twin's.
func TestFloat32(t *testing.T) {
	const tol = 1e-5
	p32, x, y, worst := float32Scenario(t, func(o *Objective) { o.Float32 = true }, tol)
	for _, w := range p32.worlds {
		for kind, pr := range w.progs {
			if !pr.f32 || w.sweep != nil && !w.sweep.prog.f32 {
				t.Fatalf("program %d of a Float32 problem computes in float64", kind)
			}
		}
	}
	t.Logf("largest relative difference of a float32 oracle from float64: %.2e (tolerance %g)", worst, tol)
	// WriteBack puts x and y, in float64, into the user's nodes.
	if err := p32.WriteBack(x, y); err != nil {
		t.Fatal(err)
	}
	for i, n := range append(append([]*G.Node{}, p32.outerNodes...), p32.innerNodes...) {
		v, want := n.Value().Data().([]float64), x
		vs := p32.outer
		if i >= len(p32.outerNodes) {
			i, want, vs = i-len(p32.outerNodes), y, p32.inner
		}
		if !slices.Equal(v, want[vs[i].Offset:vs[i].Offset+vs[i].Size]) {
			t.Errorf("after WriteBack, %s holds %v…", nodeName(n), v[:min(3, len(v))])
		}
	}
	r := Check(p32, x, y, nil)
	t.Logf("Check: %v", r)
	if r.Max() > 1e-6 || r.Float32 > tol || r.Translation32 > verifyTol32 || r.TranslationErr != nil {
		t.Errorf("Check: %v", r)
	}
}

// TestFloat32RowBlocks runs the float32 scenario with row blocks planned
// wherever they apply (rowblock.go; blocks of 24 rows, then of 12, in two
// parts with partial blocks), the float32 and the float64 problems' programs
// run by blocks: the float32 problem's programs must hold row segments,
// agree with the float64 problem to float32 rounding (float32Scenario,
// 1e-5), and every oracle of rowBlockOracles agree with the same float32
// problem run unblocked to 1e-6 relative (in norm): the blocks only
// change the order of the float64 sums over rows and add one float32
// rounding per block's product.
func TestFloat32RowBlocks(t *testing.T) {
	defer func(b, m int) { blockBytes, blockMinBytes = b, m }(blockBytes, blockMinBytes)
	const tol = 1e-6
	const n, d, c, nv = 300, 40, 3, 50
	compile := func() *Problem {
		o := mixedObjective(n, d, c, nv, 5, false, false)
		o.Float32 = true
		p, err := Compile(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	batch := append([]int{299, 150, 151}, rowBatch...)
	blockBytes, blockMinBytes = 16<<20, 16<<20
	want := oracleValues(compile(), batch)
	for _, rows := range []int{24, 12} {
		blockBytes, blockMinBytes = rows*d*4, 0
		p32, _, _, worst := float32Scenario(t, func(o *Objective) { o.Float32 = true }, 1e-5)
		if segments(p32) == 0 {
			t.Errorf("blocks of %d rows: no float32 program runs by blocks of rows", rows)
		}
		t.Logf("blocks of %d rows: %d steps in row segments, largest relative difference from float64 %.2e", rows, segments(p32), worst)
		p := compile()
		got := oracleValues(p, batch)
		worst = 0
		for i := range want {
			e := relErr(got[i], want[i])
			worst = max(worst, e)
			if !(e <= tol) {
				t.Errorf("blocks of %d rows: oracle output %d differs from the unblocked float32 program by %.2e relative", rows, i, e)
			}
		}
		t.Logf("blocks of %d rows: worst relative difference from the unblocked float32 program %.1e (tolerance %g)", rows, worst, tol)
	}
}

// float32Scenario compiles mixedObjective with set applied to it (data in
// float32) and the same objective in float64 on the rounded data, and
// compares the two oracle by oracle to tol relative, on all samples and
// on batches, through Linearize, FixX (with its sums of mixed products),
// Unrolled and after SetData. It returns the float32 problem, the point
// compared and the largest relative difference. (It is long: one
// scenario, with its comparisons as closures, reads best in one piece.)
func float32Scenario(t *testing.T, set func(*Objective), tol float64) (p32 *Problem, x, y []float64, worst float64) {
	t.Helper()
	const n, d, c, nv = 300, 40, 3, 50
	o32 := mixedObjective(n, d, c, nv, 5, false, false)
	set(&o32)
	p32, err := Compile(o32)
	if err != nil {
		t.Fatal(err)
	}
	p64, err := Compile(mixedObjective(n, d, c, nv, 5, true, false))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	randn := func(k int) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = 0.3 * rng.NormFloat64()
		}
		return v
	}
	x, y = randn(d+n), randn(d*c)
	v, u := randn(d*c), randn(d+n)
	cmp := func(name string, a, b []float64) {
		t.Helper()
		e := relErr(a, b)
		worst = max(worst, e)
		if e > tol {
			t.Errorf("%s: float32 %v, float64 %v (relative difference %.1e)", name, a[:min(3, len(a))], b[:min(3, len(b))], e)
		}
	}
	both := func(f func(p *Problem, dst []float64), size int, name string) {
		t.Helper()
		a, b := make([]float64, size), make([]float64, size)
		f(p32, a)
		f(p64, b)
		cmp(name, a, b)
	}
	check := func(batch, ubatch []int, tag string) {
		t.Helper()
		both(func(p *Problem, dst []float64) { dst[0] = p.G(x, y, batch) }, 1, tag+"g")
		both(func(p *Problem, dst []float64) { dst[0] = p.F(x, y, ubatch) }, 1, tag+"f")
		both(func(p *Problem, dst []float64) { p.GradG(dst[:d+n], dst[d+n:], x, y, batch) }, d+n+d*c, tag+"∇g")
		both(func(p *Problem, dst []float64) { p.GradF(dst[:d+n], dst[d+n:], x, y, ubatch) }, d+n+d*c, tag+"∇f")
		both(func(p *Problem, dst []float64) { p.HVP(dst, x, y, v, batch) }, d*c, tag+"HVP")
		both(func(p *Problem, dst []float64) { p.MixedXY(dst, x, y, v, batch) }, d+n, tag+"MixedXY")
		both(func(p *Problem, dst []float64) { p.MixedYX(dst, x, y, u, batch) }, d*c, tag+"MixedYX")
		both(func(p *Problem, dst []float64) { p.Linearize(x, y, batch).HVP(dst, v) }, d*c, tag+"linearized HVP")
		both(func(p *Problem, dst []float64) { p.Linearize(x, y, batch).MixedXY(dst, v) }, d+n, tag+"linearized MixedXY")
		both(func(p *Problem, dst []float64) { p.HVPAt(x, y, batch)(dst, v) }, d*c, tag+"HVPAt")
		both(func(p *Problem, dst []float64) { p.FixX(x, batch, ubatch).HVP(dst, y, v) }, d*c, tag+"FixX HVP")
		both(func(p *Problem, dst []float64) { p.FixX(x, batch, ubatch).GradF(dst[:d+n], dst[d+n:], y) }, d+n+d*c, tag+"FixX ∇f")
		both(func(p *Problem, dst []float64) {
			f := p.FixX(x, batch, ubatch)
			f.AddMixedXY(y, v)
			f.AddMixedXY(v, y)
			f.MixedXYSum(dst)
		}, d+n, tag+"FixX MixedXYSum")
	}
	check(nil, nil, "")
	check([]int{5, 17, 3, 299, 0, 42}, []int{1, 7, 49}, "batch: ")
	both(func(p *Problem, dst []float64) {
		h := mat.NewSymDense(d*c, nil)
		p.HessYY(h, x, y, nil)
		copy(dst, h.RawSymmetric().Data)
	}, d*c*d*c, "HessYY")
	both(func(p *Problem, dst []float64) {
		h := mat.NewDense(d+n, d*c, dst)
		p.HessXY(h, x, y, []int{1, 2, 3})
	}, (d+n)*d*c, "HessXY")
	both(func(p *Problem, dst []float64) {
		un, err := p.Unrolled(3, 0.2, 0)
		if err != nil {
			t.Fatal(err)
		}
		un.Hypergradient(dst, x, y)
	}, d+n, "Unrolled")

	// SetData rounds the new values and keeps the index exact.
	newX := randn(n * d)
	rounded := make([]float64, len(newX))
	for i, w := range newX {
		rounded[i] = float64(float32(w))
	}
	if err := p32.SetData(o32.LowerData[1], newX); err != nil {
		t.Fatal(err)
	}
	if err := p64.SetData(p64.levels[lowerLevel].data[1], rounded); err != nil {
		t.Fatal(err)
	}
	check(nil, nil, "after SetData: ")
	if err := p32.SetData(o32.LowerData[1], newX[1:]); err == nil {
		t.Error("SetData with the wrong length accepted")
	}
	return p32, x, y, worst
}

// TestFloat32Indices: a Float32 problem reads indices in float32, so an
// index that float32 does not hold exactly is an error naming it, at
// Compile (a Gather's constant indices) and at SetData (SampleIndex data).
func TestFloat32Indices(t *testing.T) {
	g := G.NewGraph()
	y := matNode(g, "y", 3, 2, []float64{1, 2, 3, 4, 5, 6})
	x := vecNode(g, "x", []float64{0.5})
	idx := vecNode(g, "idx", []float64{0, 1<<24 + 1})
	s := G.Must(G.Sum(G.Must(G.Square(G.Must(Gather(y, idx))))))
	obj := Objective{Upper: s, Lower: G.Must(G.Add(s, G.Must(G.Sum(G.Must(G.Square(x)))))), Outer: []*G.Node{x}, Inner: []*G.Node{y},
		Constants: []*G.Node{idx}, Float32: true}
	if _, err := Compile(obj); err == nil || !strings.Contains(err.Error(), "16777217") || !strings.Contains(err.Error(), "idx") {
		t.Errorf("Compile with an index inexact in float32: %v", err)
	}

	o := mixedObjective(30, 4, 3, 5, 5, false, false)
	o.Float32 = true
	p, err := Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	bad := indexValues(30)
	bad[7] = 1<<24 + 3
	if err := p.SetData(o.LowerData[0], bad); err == nil || !strings.Contains(err.Error(), "16777219") {
		t.Errorf("SetData with an index inexact in float32: %v", err)
	}
	if err := p.SetData(o.LowerData[0], indexValues(30)); err != nil {
		t.Errorf("SetData with exact indices: %v", err)
	}
}

// TestMatmul32 checks float32 products against the float64 product of
// the same float32 values, on every route of matmul32 (wide, narrow with
// gemm and with the narrow kernels, short inner dimension, transposed
// result) and every transpose, with and without AVX-512: to
// 2⁻²⁴·(√k + 4)·Σ_p |x_ip·y_pj| per element (float32 sums of k terms
// round about √k times on random signs; the margin covers the last
// rounding and blocking).
func TestMatmul32(t *testing.T) { withoutAVX512Too(func() { testMatmul32(t) }) }

func testMatmul32(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	worst := 0.0
	for _, c := range []struct{ m, k, n int }{{1, 1, 1}, {3, 5, 2}, {7, 13, 9}, {37, 50, 12}, {1002, 300, 10}, {2000, 100, 16},
		{9, 700, 25}, {5, 3000, 31}, {301, 32, 290}, {600, 40, 33}, {70, 500, 40}, {500, 9, 32}, {40, 288, 32}, {33, 70, 20}} {
		eachTranspose(c.m, c.k, c.n, func(xs, ys []int, tx, ty bool) {
			tr := [2]bool{tx, ty}
			x, y := randn(c.m*c.k), randn(c.k*c.n)
			want := make([]float64, c.m*c.n)
			matmulInto(want, widened(x), widened(y), xs, ys, tr[0], tr[1])
			abs := func(v []float32) []float64 {
				a := widened(v)
				for i := range a {
					a[i] = math.Abs(a[i])
				}
				return a
			}
			bound := make([]float64, c.m*c.n)
			matmulInto(bound, abs(x), abs(y), xs, ys, tr[0], tr[1])
			got := make([]float32, c.m*c.n)
			for i := range got {
				got[i] = float32(math.NaN()) // every element must be written
			}
			matmul32(got, x, y, xs, ys, tr[0], tr[1])
			scale := (math.Sqrt(float64(c.k)) + 4) / (1 << 24)
			for i := range got {
				e := math.Abs(float64(got[i])-want[i]) / bound[i]
				worst = max(worst, e/scale)
				if !(e <= scale) {
					t.Fatalf("%v transposes %v: out[%d] = %v, want %v (error %.1e of Σ|x·y|, bound %.1e)", c, tr, i, got[i], want[i], e, scale)
				}
			}
		})
	}
	t.Logf("worst error %.2f of the bound (AVX-512 %v)", worst, useAVX512)
}

// BenchmarkMatmul32Routes times the two routes of a narrow float32
// product, the narrow kernels with float64 sums (mulNarrow32) and gemm's
// float32 kernels on the transposed product (gemmNarrow32), on the shapes
// of logistic regression (10 classes), of an MLP's head and of a CNN's
// convolutions (16 and 32 filters), forward and weight gradient: the
// measurements behind gemmColumns32.
//
//	go test -run '^$' -bench '^BenchmarkMatmul32Routes$' ./graph/
func BenchmarkMatmul32Routes(b *testing.B) {
	benchRoutes(b, []routeShape{
		{20000, 784, 10, false}, {784, 20000, 10, true}, {10000, 256, 10, false}, {256, 10000, 10, true},
		{20000, 100, 20, false}, {14700, 288, 16, false}, {288, 14700, 16, true},
		{14700, 288, 32, false}, {288, 14700, 32, true}, {58800, 9, 32, false},
	}, map[string]func(s routeShape, out, x, y []float32, xs, ys []int){
		"narrow": func(s routeShape, out, x, y []float32, xs, ys []int) { mulNarrow32(out, x, y, xs, ys, s.tx, false) },
		"gemm": func(s routeShape, out, x, y []float32, _, _ []int) {
			gemmNarrow32(out, x, y, s.m, s.k, s.n, s.tx, false)
		},
	})
}

// TestCol2imPadded checks col2im through padded planes against the
// bounds-tested loop, bit for bit in float64 (the same terms in the same
// order), for several kernels, paddings and strides.
func TestCol2imPadded(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, p := range []convParams{{3, 3, 1, 1, 1, 1, 1, 1}, {3, 3, 0, 0, 2, 2, 1, 1}, {2, 3, 1, 0, 1, 2, 1, 1}, {1, 3, 0, 2, 1, 1, 1, 1}, {5, 5, 2, 2, 3, 3, 1, 1}} {
		shape := []int{2, 3, 9, 8}
		oh, ow := p.outHW(shape[2], shape[3])
		col := make([]float64, shape[0]*oh*ow*shape[1]*p.kh*p.kw)
		for i := range col {
			col[i] = rng.NormFloat64()
		}
		want, got := make([]float64, sizeOf(shape)), make([]float64, sizeOf(shape))
		col2imBounded(want, col, shape, p)
		for i := range got {
			got[i] = math.NaN() // every element must be written
		}
		col2imInto(got, col, shape, p)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%+v: element %d is %v, the bounds-tested loop gives %v", p, i, got[i], want[i])
			}
		}
	}
}

// TestTranspose checks transposeInto against the definition
// out[o] = x[i] with o and i the same element's positions, in both
// precisions, with and without the register transposes of the packing
// routines, on 2-D shapes of every size modulo 8 and the batched
// transposes of a CNN's layouts.
func TestTranspose(t *testing.T) {
	withoutAVX512Too(func() {
		testTranspose[float64](t)
		testTranspose[float32](t)
	})
}

func testTranspose[T float](t *testing.T) {
	for _, c := range []struct{ shape, perm []int }{
		{[]int{1, 1}, []int{1, 0}}, {[]int{7, 9}, []int{1, 0}}, {[]int{8, 8}, []int{1, 0}}, {[]int{17, 33}, []int{1, 0}},
		{[]int{64, 15}, []int{1, 0}}, {[]int{3, 13, 11, 10}, []int{0, 3, 1, 2}}, {[]int{3, 10, 13, 11}, []int{0, 2, 3, 1}},
		{[]int{2, 3, 4, 5}, []int{2, 0, 3, 1}},
	} {
		n := sizeOf(c.shape)
		x, out := make([]T, n), make([]T, n)
		for i := range x {
			x[i] = T(i) + 0.5
		}
		transposeInto(out, x, c.shape, c.perm)
		oshape := make([]int, len(c.perm))
		for i, p := range c.perm {
			oshape[i] = c.shape[p]
		}
		is := strides(c.shape)
		for o := range out {
			// the input index of output element o
			i, rest := 0, o
			for ax := len(oshape) - 1; ax >= 0; ax-- {
				i += rest % oshape[ax] * is[c.perm[ax]]
				rest /= oshape[ax]
			}
			if out[o] != x[i] {
				t.Fatalf("%T transpose of %v by %v: out[%d] = %v, want x[%d] = %v", x, c.shape, c.perm, o, out[o], i, x[i])
			}
		}
	}
}

// TestEmptyProduct: every product's dispatch sets out to zero when k is 0
// and writes nothing when m or n is 0 (emptyProduct).
func TestEmptyProduct(t *testing.T) {
	const m, n = 3, 4
	fill := func() ([]float64, []float32) {
		a, b := make([]float64, m*n), make([]float32, m*n)
		for i := range a {
			a[i], b[i] = 7, 7
		}
		return a, b
	}
	xs, ys := []int{m, 0}, []int{0, n}
	o64, o32 := fill()
	mixed, _ := fill()
	matmulInto(o64, nil, nil, xs, ys, false, false)
	matmul32(o32, nil, nil, xs, ys, false, false)
	matmulMixed(mixed, nil, []float32{}, nil, []float32{}, xs, ys, false, false)
	for i := range o64 {
		if o64[i] != 0 || o32[i] != 0 || mixed[i] != 0 {
			t.Fatalf("k = 0: element %d is %v, %v, %v; want 0", i, o64[i], o32[i], mixed[i])
		}
	}
	if !emptyProduct([]float64{7}, 0, n, 5) || !emptyProduct([]float32{7}, m, 0, 5) || emptyProduct(make([]float64, m*n), m, n, 1) {
		t.Error("emptyProduct: m = 0 or n = 0 must report empty, m, n, k ≥ 1 not")
	}
}
