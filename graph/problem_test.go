package graph

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func vecNode(g *G.ExprGraph, name string, v []float64) *G.Node {
	return G.NewVector(g, G.Float64, G.WithShape(len(v)), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(append([]float64{}, v...)))))
}

func matNode(g *G.ExprGraph, name string, r, c int, v []float64) *G.Node {
	return G.NewMatrix(g, G.Float64, G.WithShape(r, c), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64{}, v...)))))
}

// ridge builds g(λ, w) = ½ mean_i (a_iᵀw − t_i)² + ½ Σ_j exp(λ_j) w_j² and
// f(λ, w) = ½ Σ_j (w_j − 1)², with rows a_i as lower-level data.
func ridge(a []float64, t []float64, n, d int) Objective {
	g := G.NewGraph()
	A := matNode(g, "A", n, d, a)
	T := matNode(g, "t", n, 1, t)
	w := matNode(g, "w", d, 1, make([]float64, d))
	lam := matNode(g, "lambda", d, 1, make([]float64, d))
	r := G.Must(G.Sub(G.Must(G.Mul(A, w)), T))
	fit := G.Must(G.Mul(G.Must(G.Mean(G.Must(G.Square(r)))), G.NewConstant(0.5)))
	reg := G.Must(G.Mul(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Exp(lam)), G.Must(G.Square(w)))))), G.NewConstant(0.5)))
	lower := G.Must(G.Add(fit, reg))
	upper := G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(w, G.NewConstant(1.0))))))), G.NewConstant(0.5)))
	return Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}, LowerData: []*G.Node{A, T}}
}

var (
	ridgeA = []float64{1, 2, 0.5, -1, 0.3, 0.7, 2, -0.4, 1.1, 0.2, 0.9, -1.3}
	ridgeT = []float64{1, -1, 0.5, 2}
)

// TestClosedFormRidge checks the oracles of ridge regression against their
// closed forms: ∇w g = Aᵀ(Aw − t)/n + e^λ⊙w, ∇ww g·v = AᵀAv/n + e^λ⊙v,
// ∇λw g·v = e^λ⊙w⊙v and ∇wλ g·u = e^λ⊙w⊙u.
func TestClosedFormRidge(t *testing.T) {
	const n, d = 4, 3
	p, err := Compile(ridge(ridgeA, ridgeT, n, d))
	if err != nil {
		t.Fatal(err)
	}
	lam := []float64{0.1, -0.2, 0.3}
	w := []float64{0.5, -1, 2}
	v := []float64{1, 0.5, -0.25}
	gw, hv, mx, my := make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
	p.GradG(nil, gw, lam, w, nil)
	p.HVP(hv, lam, w, v, nil)
	p.MixedXY(mx, lam, w, v, nil)
	p.MixedYX(my, lam, w, v, nil)
	for j := 0; j < d; j++ {
		var wantG, wantH float64
		for i := 0; i < n; i++ {
			ri, avi := -ridgeT[i], 0.0
			for k := 0; k < d; k++ {
				ri += ridgeA[i*d+k] * w[k]
				avi += ridgeA[i*d+k] * v[k]
			}
			wantG += ridgeA[i*d+j] * ri / n
			wantH += ridgeA[i*d+j] * avi / n
		}
		e := math.Exp(lam[j])
		wantG += e * w[j]
		wantH += e * v[j]
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"∇w g", gw[j], wantG}, {"HVP", hv[j], wantH}, {"∇λw g·v", mx[j], e * w[j] * v[j]}, {"∇wλ g·u", my[j], e * w[j] * v[j]}} {
			if math.Abs(c.got-c.want) > 1e-14*math.Max(1, math.Abs(c.want)) {
				t.Errorf("%s[%d] = %.17g, closed form %.17g", c.name, j, c.got, c.want)
			}
		}
	}
}

// TestRerunGivesNewValues guards against gorgonia's stale-value trap: every
// oracle call with new values must give the new answer, not the last one.
func TestRerunGivesNewValues(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := []float64{1, 2, 3}, []float64{-1, 0, 1}
	lam := []float64{0, 0, 0}
	g1 := p.G(lam, w1, nil)
	g2 := p.G(lam, w2, nil)
	if g1 == g2 {
		t.Fatalf("g is %v at two different points", g1)
	}
	if again := p.G(lam, w1, nil); again != g1 {
		t.Errorf("g at the first point: %v, then %v", g1, again)
	}
	a, b := make([]float64, 3), make([]float64, 3)
	p.HVP(a, lam, w1, []float64{1, 0, 0}, nil)
	p.HVP(b, lam, w1, []float64{0, 1, 0}, nil)
	if a[0] == b[0] && a[1] == b[1] {
		t.Errorf("HVP with two different vectors gave %v and %v", a, b)
	}
	// Two linearizations used in turn each keep their own point.
	l1 := p.Linearize([]float64{0, 0, 0}, w1, nil)
	l2 := p.Linearize([]float64{1, 1, 1}, w1, nil)
	v := []float64{1, 1, 1}
	h1, h2, d1 := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	l1.HVP(h1, v)
	l2.HVP(h2, v)
	p.HVP(d1, []float64{0, 0, 0}, w1, v, nil)
	for i := range h1 {
		if h1[i] != d1[i] {
			t.Errorf("first linearization after the second: HVP[%d] = %v, direct %v", i, h1[i], d1[i])
		}
		if h1[i] == h2[i] {
			t.Errorf("linearizations at different λ give the same HVP[%d] = %v", i, h1[i])
		}
	}
	l1.HVP(h2, v)
	for i := range h1 {
		if h1[i] != h2[i] {
			t.Errorf("first linearization used again: HVP[%d] = %v, before %v", i, h2[i], h1[i])
		}
	}
}

// TestBatch checks that oracles on a batch equal the oracles of a problem
// built on the batch's rows alone.
func TestBatch(t *testing.T) {
	const n, d = 4, 3
	p, err := Compile(ridge(ridgeA, ridgeT, n, d))
	if err != nil {
		t.Fatal(err)
	}
	batch := []int{3, 1, 1}
	var a, tt []float64
	for _, i := range batch {
		a = append(a, ridgeA[i*d:(i+1)*d]...)
		tt = append(tt, ridgeT[i])
	}
	q, err := Compile(ridge(a, tt, len(batch), d))
	if err != nil {
		t.Fatal(err)
	}
	lam, w, v := []float64{0.1, 0.2, -0.3}, []float64{1, -1, 0.5}, []float64{0.3, 0.2, 0.1}
	if got, want := p.G(lam, w, batch), q.G(lam, w, nil); math.Abs(got-want) > 1e-15 {
		t.Errorf("g on the batch = %v, on its rows %v", got, want)
	}
	h1, h2 := make([]float64, d), make([]float64, d)
	p.HVP(h1, lam, w, v, batch)
	q.HVP(h2, lam, w, v, nil)
	if e := relErr(h1, h2); e > 1e-15 {
		t.Errorf("HVP on the batch differs from HVP on its rows by %v", e)
	}
	if err := p.CheckBatch(false, 0); err == nil {
		t.Error("CheckBatch accepts a batch of 0 samples")
	}
	if err := p.CheckBatch(false, 2); err != nil {
		t.Errorf("CheckBatch(2): %v", err)
	}
}

// TestBadInput checks that every kind of bad objective is an error that
// names what is wrong, before anything runs.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name  string
		build func() Objective
		want  []string
	}{
		{"unsupported op", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(G.Must(G.Sparsemax(G.Must(G.Reshape(o.Inner[0], tensor.Shape{3}))))))))
			return o
		}, []string{"unsupported operation", "sparsemax"}},
		{"float32", func() Objective {
			g := G.NewGraph()
			w := G.NewVector(g, G.Float32, G.WithShape(2), G.WithName("w32"), G.WithInit(G.Zeroes()))
			l := G.NewVector(g, G.Float32, G.WithShape(2), G.WithName("l32"), G.WithInit(G.Zeroes()))
			s := G.Must(G.Sum(G.Must(G.HadamardProd(w, l))))
			return Objective{Upper: s, Lower: s, Outer: []*G.Node{l}, Inner: []*G.Node{w}}
		}, []string{"w32", "float32", "Objective.Float32 to compute in float32"}},
		{"inner variable unused by g", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			g := o.Lower.Graph()
			extra := vecNode(g, "extra", []float64{1})
			o.Inner = append(o.Inner, extra)
			return o
		}, []string{"does not depend on inner variable", "extra"}},
		{"outer variable unused", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Outer = append(o.Outer, vecNode(o.Lower.Graph(), "unused", []float64{1}))
			return o
		}, []string{"neither objective depends on outer variable", "unused"}},
		{"computed variable", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Inner = []*G.Node{G.Must(G.Neg(o.Inner[0]))}
			return o
		}, []string{"is computed"}},
		{"data of unequal lengths", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.LowerData = append(o.LowerData, vecNode(o.Lower.Graph(), "short", []float64{1, 2}))
			return o
		}, []string{"different sample counts", "short"}},
		{"declared twice", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Outer = append(o.Outer, o.Inner[0])
			return o
		}, []string{"declared twice"}},
		{"objective not scalar", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Upper = o.Inner[0]
			return o
		}, []string{"want a scalar"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(c.build())
			if err == nil {
				t.Fatal("Compile accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestBatchShapeError checks that a graph tied to the full sample count is
// rejected for other batch sizes with an error naming the node and shapes.
func TestBatchShapeError(t *testing.T) {
	g := G.NewGraph()
	X := matNode(g, "X", 4, 2, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	C := matNode(g, "C", 4, 2, []float64{1, 1, 1, 1, 1, 1, 1, 1})
	w := matNode(g, "w", 2, 1, []float64{0.5, 0.5})
	lam := vecNode(g, "lam", []float64{1})
	lower := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Mul(G.Must(G.Add(X, C)), w)))),
		G.Must(G.Sum(G.Must(G.Mul(G.Must(G.Sum(lam)), G.Must(G.Sum(G.Must(G.Square(w))))))))))
	p, err := Compile(Objective{Upper: lower, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}, LowerData: []*G.Node{X}, Constants: []*G.Node{C}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckBatch(false, 2)
	if err == nil {
		t.Fatal("a batch of 2 rows added to a constant of 4 rows was accepted")
	}
	for _, want := range []string{"[2 2]", "[4 2]", "batch of 2", `constant "C" has 4 rows`, "declare it in LowerData"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestUnrolled checks the in-graph unrolled hypergradient against central
// finite differences of F(x) = f(x, y_T(x)), with and without momentum.
func TestUnrolled(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	x, y0 := []float64{0.2, -0.1, 0.3}, []float64{0.5, 0.5, -0.5}
	for _, beta := range []float64{0, 0.5} {
		u, err := p.Unrolled(7, 0.3, beta)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, 3)
		u.Hypergradient(got, x, y0)
		scratch := make([]float64, 3)
		want := make([]float64, 3)
		for j := range x {
			xp, xm := append([]float64{}, x...), append([]float64{}, x...)
			xp[j] += 1e-6
			xm[j] -= 1e-6
			want[j] = (u.Hypergradient(scratch, xp, y0) - u.Hypergradient(scratch, xm, y0)) / 2e-6
		}
		if e := relErr(got, want); e > 1e-8 {
			t.Errorf("β = %v: unrolled hypergradient %v, finite differences %v (error %.1e)", beta, got, want, e)
		}
	}
	if _, err := p.Unrolled(3, -1, 0); err == nil {
		t.Error("Unrolled accepted a negative step")
	}
}

func TestSetData(t *testing.T) {
	o := ridge(ridgeA, ridgeT, 4, 3)
	p, err := Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	other := []float64{0, 1, 2, 3}
	q, err := Compile(ridge(ridgeA, other, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetData(o.LowerData[1], other); err != nil {
		t.Fatal(err)
	}
	lam, w := []float64{0, 0, 0}, []float64{1, 2, 3}
	if got, want := p.G(lam, w, nil), q.G(lam, w, nil); got != want {
		t.Errorf("after SetData g = %v, want %v", got, want)
	}
	if got, want := p.G(lam, w, []int{2, 3}), q.G(lam, w, []int{2, 3}); got != want {
		t.Errorf("after SetData g on a batch = %v, want %v", got, want)
	}
	if err := p.SetData(o.LowerData[1], []float64{1}); err == nil || !strings.Contains(err.Error(), "1 values") {
		t.Errorf("SetData with the wrong length: %v", err)
	}
	if err := p.SetData(o.Inner[0], other); err == nil {
		t.Error("SetData accepted a variable")
	}
}

// TestNoRetention checks that an oracle call does not keep the caller's
// vectors alive: a Problem must not pin ITD's stored iterates, say.
func TestNoRetention(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	freed := make(chan bool, 1)
	func() {
		w := make([]float64, 3)
		runtime.AddCleanup(&w[0], func(c chan bool) { c <- true }, freed)
		p.HVP(make([]float64, 3), []float64{0, 0, 0}, w, []float64{1, 1, 1}, nil)
		p.G([]float64{0, 0, 0}, w, nil)
	}()
	for i := 0; i < 10; i++ {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(p)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	runtime.KeepAlive(p)
	t.Error("the problem still references the caller's inner vector after the calls returned")
}

// TestFixedX checks that oracles evaluated with x fixed equal the direct
// ones bit for bit, including when two FixedX values are used in turn.
func TestFixedX(t *testing.T) {
	o := ridge(ridgeA, ridgeT, 4, 3)
	p, err := Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	x1, x2 := []float64{0.1, -0.2, 0.3}, []float64{1, 0, -1}
	y, v := []float64{0.5, 1, -2}, []float64{1, -1, 0.5}
	batch := []int{2, 0}
	f1, f2 := p.FixX(x1, batch, nil), p.FixX(x2, nil, nil)
	eq := func(name string, a, b []float64) {
		t.Helper()
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s[%d] = %v with x fixed, %v directly", name, i, a[i], b[i])
			}
		}
	}
	for round := 0; round < 2; round++ {
		for _, c := range []struct {
			f     *FixedX
			x     []float64
			batch []int
		}{{f1, x1, batch}, {f2, x2, nil}} {
			a, b := make([]float64, 3), make([]float64, 3)
			ax, bx := make([]float64, 3), make([]float64, 3)
			c.f.GradG(ax, a, y)
			p.GradG(bx, b, c.x, y, c.batch)
			eq("∇y g", a, b)
			eq("∇x g", ax, bx)
			c.f.HVP(a, y, v)
			p.HVP(b, c.x, y, v, c.batch)
			eq("HVP", a, b)
			c.f.MixedXY(a, y, v)
			p.MixedXY(b, c.x, y, v, c.batch)
			eq("MixedXY", a, b)
			c.f.MixedYX(a, y, v)
			p.MixedYX(b, c.x, y, v, c.batch)
			eq("MixedYX", a, b)
			c.f.GradF(ax, a, y)
			p.GradF(bx, b, c.x, y, nil)
			eq("∇y f", a, b)
			if g1, g2 := c.f.G(y), p.G(c.x, y, c.batch); g1 != g2 {
				t.Errorf("g = %v with x fixed, %v directly", g1, g2)
			}
			if g1, g2 := c.f.F(y), p.F(c.x, y, nil); g1 != g2 {
				t.Errorf("f = %v with x fixed, %v directly", g1, g2)
			}
		}
	}
}

// TestHVPAt checks the linearized operator against HVP at two points and
// batches used in turn (each switch recomputes the fixed part), and that
// each product is counted once.
func TestHVPAt(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	y, v := []float64{1, 2, 3}, []float64{0.5, -1, 2}
	pts := []struct {
		x     []float64
		batch []int
	}{{[]float64{0.1, -0.2, 0.3}, nil}, {[]float64{1, 0.5, -1}, []int{1, 2}}}
	ops := []func(dst, v []float64){p.HVPAt(pts[0].x, y, pts[0].batch), p.HVPAt(pts[1].x, y, pts[1].batch)}
	before := p.Stats().HessVecProducts
	got, want := make([]float64, 3), make([]float64, 3)
	for round := 0; round < 3; round++ {
		for k, pt := range pts {
			ops[k](got, v)
			p.HVP(want, pt.x, y, v, pt.batch)
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-14*(1+math.Abs(want[i])) {
					t.Errorf("round %d, point %d: HVPAt[%d] = %v, HVP %v", round, k, i, got[i], want[i])
				}
			}
		}
	}
	if n := p.Stats().HessVecProducts - before; n != 12 {
		t.Errorf("%d products counted, want 12", n)
	}
}
