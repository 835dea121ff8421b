package graph

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gorgoniaForward returns the values of roots by gorgonia's own forward
// pass (a TapeMachine on the roots' exact subgraph).
func gorgoniaForward(t *testing.T, root *G.Node, opts ...G.VMOpt) []float64 {
	t.Helper()
	return gorgoniaValues(t, []*G.Node{root}, opts...)
}

// gorgoniaValues returns the values of roots by gorgonia's own forward
// pass.
func gorgoniaValues(t *testing.T, roots []*G.Node, opts ...G.VMOpt) []float64 {
	t.Helper()
	vm := G.NewTapeMachine(roots[0].Graph().ExactSubgraphRoots(roots...), opts...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("gorgonia's forward pass: %v", err)
	}
	r := make([]float64, len(roots))
	for i, n := range roots {
		r[i] = n.Value().Data().(float64)
	}
	return r
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// staleCase is the minimal case of gorgonia's stale id→index
// cache: after G.Grad (which makes NewConstant(1.0) gorgonia's internal
// one), log(1 + q1²) is stabilized into log1p(q1²) and the node 1 + q1²
// removed from the graph, after which ExprGraph.From(id) of nodes built
// between its creation and its removal returns the next node's arguments.
func staleCase(t *testing.T) (Objective, *G.ExprGraph) {
	t.Helper()
	g := G.NewGraph()
	X1 := matNode(g, "X1", 3, 2, []float64{0.5, -1, 1.5, 0.25, -0.75, 2})
	X2 := matNode(g, "X2", 3, 2, []float64{1, 0.5, -0.5, 1, 2, -1})
	w := vecNode(g, "w", []float64{0.3, -0.7})
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(0.1))
	mse := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(X1, w))))))
	if _, err := G.Grad(mse, w); err != nil {
		t.Fatal(err)
	}
	q1 := G.Must(G.Mul(X1, w))
	q2 := G.Must(G.Mul(X2, w))
	a := G.Must(G.Add(G.NewConstant(1.0), G.Must(G.Square(q1))))
	u1 := G.Must(G.Tanh(q1))
	u2 := G.Must(G.Sin(q2))
	l := G.Must(G.Sum(G.Must(G.Log(a))))
	reg := G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(w))))))
	lower := G.Must(G.Add(G.Must(G.Add(G.Must(G.Add(G.Must(G.Sum(u1)), G.Must(G.Sum(u2)))), l)), reg))
	upper := G.Must(G.Add(mse, G.Must(G.Sum(u1))))
	return Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}, LowerData: []*G.Node{X1, X2}}, g
}

// TestStaleArgumentCache: the objectives compiled from the issue's
// minimal case have gorgonia's values, and the case does reproduce the
// stale cache (some node's From(id) disagrees with its own arguments).
func TestStaleArgumentCache(t *testing.T) {
	obj, g := staleCase(t)
	stale := 0
	for _, n := range g.AllNodes() {
		var from []*G.Node
		it := g.From(n.ID())
		for it != nil && it.Next() {
			from = append(from, it.Node().(*G.Node))
		}
		args := nodeArgs(n)
		if len(from) != len(args) {
			stale++
			continue
		}
		for i := range args {
			if args[i] != from[i] {
				stale++
				break
			}
		}
	}
	if stale == 0 {
		t.Fatal("the case no longer leaves gorgonia's id cache stale; it tests nothing")
	}
	want := gorgoniaValues(t, []*G.Node{obj.Lower, obj.Upper})
	p, err := Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	x, y := p.X0(nil), p.Y0(nil)
	if got := p.G(x, y, nil); !near(got, want[0], 1e-13) {
		t.Errorf("g = %.10f, gorgonia's forward pass gives %.10f", got, want[0])
	}
	if got := p.F(x, y, nil); !near(got, want[1], 1e-13) {
		t.Errorf("f = %.10f, gorgonia's forward pass gives %.10f", got, want[1])
	}
	if r := Check(p, x, y, nil); r.Max() > 1e-6 {
		t.Errorf("oracles against finite differences: %v", r)
	}
}

// binaryXent builds a logistic model g = mean BinaryXent(σ(Xw), t) + λ‖w‖²
// with f the same loss, optionally after a hand-written log(1 − σ(Xw)).
func binaryXent(t *testing.T, handWrittenFirst bool) Objective {
	t.Helper()
	g := G.NewGraph()
	X := matNode(g, "X", 4, 3, ridgeA)
	T := vecNode(g, "t", []float64{1, 0, 0, 1})
	w := vecNode(g, "w", []float64{0.2, -0.4, 0.6})
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(0.3))
	p := G.Must(G.Sigmoid(G.Must(G.Mul(X, w))))
	var extra *G.Node
	if handWrittenFirst {
		extra = G.Must(G.Sum(G.Must(G.Log(G.Must(G.Sub(G.NewConstant(1.0), p))))))
	}
	loss := G.Must(G.Mean(G.Must(G.BinaryXent(p, T))))
	lower := G.Must(G.Add(loss, G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(w))))))))
	upper := loss
	if extra != nil {
		upper = G.Must(G.Add(upper, extra))
	}
	return Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}, LowerData: []*G.Node{X, T}}
}

// TestBinaryXent: gorgonia's BinaryXent (whose log(σ) gorgonia stabilizes,
// removing a node) compiles to gorgonia's values, also after a
// hand-written log(1 − p).
func TestBinaryXent(t *testing.T) {
	for _, first := range []bool{false, true} {
		obj := binaryXent(t, first)
		want := gorgoniaValues(t, []*G.Node{obj.Lower, obj.Upper})
		p, err := Compile(obj)
		if err != nil {
			t.Fatalf("hand-written log(1−p) first %v: %v", first, err)
		}
		x, y := p.X0(nil), p.Y0(nil)
		if got := p.G(x, y, nil); !near(got, want[0], 1e-13) {
			t.Errorf("hand-written first %v: g = %.10f, gorgonia gives %.10f", first, got, want[0])
		}
		if got := p.F(x, y, nil); !near(got, want[1], 1e-13) {
			t.Errorf("hand-written first %v: f = %.10f, gorgonia gives %.10f", first, got, want[1])
		}
		if r := Check(p, x, y, nil); r.Max() > 1e-6 {
			t.Errorf("hand-written first %v: oracles against finite differences: %v", first, r)
		}
	}
}

// TestMaxPoolAsymmetricPadding: with four padding values {north, south,
// west, east} = {0, 1, 0, 1}, gorgonia's kernel starts each window one row
// above and one column left of the image; on x[i][j] = 4i+j (1×1×4×4,
// 2×2 windows, stride 2) it pools 0, 2, 8, 10, and so must graph/.
func TestMaxPoolAsymmetricPadding(t *testing.T) {
	g := G.NewGraph()
	x := make([]float64, 16)
	for i := range x {
		x[i] = float64(i)
	}
	y := G.NewTensor(g, G.Float64, 4, G.WithShape(1, 1, 4, 4), G.WithName("y"),
		G.WithValue(tensor.New(tensor.WithShape(1, 1, 4, 4), tensor.WithBacking(x))))
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(1.0))
	pool := G.Must(G.MaxPool2D(y, tensor.Shape{2, 2}, []int{0, 1, 0, 1}, []int{2, 2}))
	if !pool.Shape().Eq(tensor.Shape{1, 1, 2, 2}) {
		t.Fatalf("gorgonia's pooled shape is %v", pool.Shape())
	}
	weights := G.NewTensor(g, G.Float64, 4, G.WithShape(1, 1, 2, 2), G.WithName("c"),
		G.WithValue(tensor.New(tensor.WithShape(1, 1, 2, 2), tensor.WithBacking([]float64{1, 10, 100, 1000}))))
	lower := G.Must(G.Add(G.Must(G.Sum(G.Must(G.HadamardProd(weights, pool)))), G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(y))))))))
	upper := G.Must(G.Sum(G.Must(G.Square(y))))
	obj := Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{y}, Constants: []*G.Node{weights}}
	want := gorgoniaForward(t, lower)[0]
	p, err := Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	reg := 0.0
	for _, v := range x {
		reg += v * v
	}
	if pooled := 0 + 10*2 + 100*8 + 1000*10.0; want != pooled+reg {
		t.Fatalf("gorgonia's g = %v, want pooled maxima 0, 2, 8, 10 (%v)", want, pooled+reg)
	}
	if got := p.G(p.X0(nil), p.Y0(nil), nil); got != want {
		t.Errorf("g = %v, gorgonia gives %v", got, want)
	}
}

// TestArgumentCrossChecks: a node whose recorded shape or arity disagrees
// with its arguments is an error naming it, not a panic or a silent
// translation.
func TestArgumentCrossChecks(t *testing.T) {
	g := G.NewGraph()
	w := vecNode(g, "w", []float64{1, 2, 3})
	lam := vecNode(g, "lam", []float64{1, 2, 3})
	sum := G.Must(G.Add(w, lam))
	for _, c := range []struct {
		name string
		node func() *G.Node
		want string
	}{
		{"wrong shape", func() *G.Node {
			return G.NewUniqueNode(G.WithOp(sum.Op()), G.WithChildren(G.Nodes{w, lam}), G.In(g), G.WithType(w.Type()), G.WithName("badshape"), G.WithShape(4))
		}, "badshape"},
		{"wrong arity", func() *G.Node {
			return G.NewUniqueNode(G.WithOp(sum.Op()), G.WithChildren(G.Nodes{w}), G.In(g), G.WithType(w.Type()), G.WithName("badarity"), G.WithShape(3))
		}, "takes 2 arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := c.node()
			lower := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Square(w)), lam))))
			lower = G.Must(G.Add(lower, G.Must(G.Sum(bad))))
			_, err := Compile(Objective{Upper: lower, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Compile: %v, want an error containing %q", err, c.want)
			} else {
				t.Log(err)
			}
		})
	}
}
