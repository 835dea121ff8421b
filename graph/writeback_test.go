package graph_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// writeBackObjective is a problem whose variables have every rank: outer
// λ (a vector of 3) and s (a scalar), inner W (3×2) and b (a vector of 2),
//
//	g = mean_i ‖x_iᵀW + b − t_i‖² + Σ_j e^{λ_j}‖W_j‖² + s²‖b‖²,
//	f = mean_i ‖x'_iᵀW + b − t'_i‖²,
//
// on 5 training and 4 validation samples.
func writeBackObjective(t *testing.T) (graph.Objective, *G.ExprGraph) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	g := G.NewGraph()
	data := func(name string, shape ...int) *G.Node {
		v := make([]float64, shape[0]*shape[1])
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return G.NewMatrix(g, G.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))))
	}
	X, T, Xv, Tv := data("X", 5, 3), data("T", 5, 2), data("Xv", 4, 3), data("Tv", 4, 2)
	lambda := G.NewVector(g, G.Float64, G.WithShape(3), G.WithName("lambda"), G.WithInit(G.Zeroes()))
	s := G.NewScalar(g, G.Float64, G.WithName("s"), G.WithValue(1.0))
	W := G.NewMatrix(g, G.Float64, G.WithShape(3, 2), G.WithName("W"), G.WithInit(G.Zeroes()))
	b := G.NewVector(g, G.Float64, G.WithShape(2), G.WithName("b"), G.WithInit(G.Zeroes()))
	loss := func(X, T *G.Node) *G.Node {
		z := G.Must(G.BroadcastAdd(G.Must(G.Mul(X, W)), b, nil, []byte{0}))
		return G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(z, T)))), 1))))
	}
	rows := G.Must(G.Sum(G.Must(G.Square(W)), 1))
	pen := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Exp(lambda)), rows))))
	bias := G.Must(G.Mul(G.Must(G.Square(s)), G.Must(G.Sum(G.Must(G.Square(b))))))
	lower := G.Must(G.Add(loss(X, T), G.Must(G.Add(pen, bias))))
	return graph.Objective{Upper: loss(Xv, Tv), Lower: lower,
		Outer: []*G.Node{lambda, s}, Inner: []*G.Node{W, b},
		LowerData: []*G.Node{X, T}, UpperData: []*G.Node{Xv, Tv}}, g
}

// TestWriteBack writes x and y into the variable nodes, reads them back
// from the nodes, and runs gorgonia's own forward pass, whose f and g must
// be Problem.F and Problem.G at (x, y).
func TestWriteBack(t *testing.T) {
	obj, g := writeBackObjective(t)
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.3, -0.2, 0.1, 1.5}            // λ, then s
	y := []float64{1, -2, 0.5, 0.25, -1, 3, 7, -4} // W row-major, then b
	if err := p.WriteBack(x, y); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, n := range append(append([]*G.Node{}, obj.Outer...), obj.Inner...) {
		switch d := n.Value().Data().(type) {
		case float64:
			got = append(got, d)
		case []float64:
			got = append(got, d...)
		}
	}
	if want := append(append([]float64{}, x...), y...); !slices.Equal(got, want) {
		t.Fatalf("the nodes hold %v after WriteBack; want %v", got, want)
	}
	if x0 := p.X0(nil); x0[3] != 1 || x0[0] != 0 {
		t.Errorf("X0 = %v changed; want the values at Compile", x0)
	}

	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		gorgonia  *G.Node
		ours      float64
		tolerance float64
	}{{"f", obj.Upper, p.F(x, y, nil), 1e-12}, {"g", obj.Lower, p.G(x, y, nil), 1e-12}} {
		v := c.gorgonia.Value().Data().(float64)
		if math.Abs(v-c.ours) > c.tolerance*math.Max(1, math.Abs(v)) {
			t.Errorf("%s: gorgonia's forward pass after WriteBack gives %.15g, Problem.%s %.15g", c.name, v, strings.ToUpper(c.name), c.ours)
		}
	}

	// nil leaves a level alone.
	if err := p.WriteBack(nil, make([]float64, 8)); err != nil {
		t.Fatal(err)
	}
	if s := obj.Outer[1].Value().Data().(float64); s != 1.5 {
		t.Errorf("s = %v after WriteBack(nil, y); want 1.5", s)
	}
}

// TestWriteBackRefused requires wrong lengths and non-finite values to be
// errors that change no node.
func TestWriteBackRefused(t *testing.T) {
	obj, _ := writeBackObjective(t)
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	x, y := make([]float64, 4), make([]float64, 8)
	bad := append([]float64{}, y...)
	bad[5] = math.NaN()
	for _, c := range []struct {
		name, want string
		x, y       []float64
	}{
		{"short x", "x has length 3", x[:3], y},
		{"long y", "y has length 9", x, append(y, 0)},
		{"NaN in y", `y[5] = NaN is not finite; it would be written to W[2,1]`, x, bad},
	} {
		err := p.WriteBack(c.x, c.y)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one saying %q", c.name, err, c.want)
		}
		if s := obj.Outer[1].Value().Data().(float64); s != 1 {
			t.Errorf("%s: s = %v; a refused WriteBack changed a node", c.name, s)
		}
	}
}
