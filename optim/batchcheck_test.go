package optim_test

import (
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/optim"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestBatchSizeTheGraphCannotTake checks that a batch size a compiled graph
// cannot evaluate (its lower objective adds a constant of 4 rows to the
// data) is an error of Solve naming the setting and the shapes, before
// any oracle runs, and not a panic; the whole data set still runs.
func TestBatchSizeTheGraphCannotTake(t *testing.T) {
	g := G.NewGraph()
	mat := func(name string, r, c int, v []float64) *G.Node {
		return G.NewMatrix(g, G.Float64, G.WithShape(r, c), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v))))
	}
	X := mat("X", 4, 2, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	C := mat("C", 4, 2, []float64{1, 1, 1, 1, 1, 1, 1, 1})
	w := mat("w", 2, 1, []float64{0.5, 0.5})
	lam := mat("lam", 1, 1, []float64{1})
	fit := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(G.Must(G.Add(X, C)), w))))))
	lower := G.Must(G.Add(fit, G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Exp(lam)))), G.Must(G.Sum(G.Must(G.Square(w))))))))
	upper := G.Must(G.Sum(G.Must(G.Square(w))))
	p, err := graph.Compile(graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w},
		LowerData: []*G.Node{X}, Constants: []*G.Node{C}})
	if err != nil {
		t.Fatal(err)
	}
	s := &optim.Settings{MaxIter: 2}
	m := optim.StocBiO{D: 2, Q: 2, InnerBatch: 2, Outer: optim.SGD{LR: 0.01}}
	_, err = optim.Solve(p, p.X0(nil), p.Y0(nil), s, m)
	if err == nil {
		t.Fatal("Solve accepted a batch of 2 rows for a graph that adds a constant of 4 rows")
	}
	for _, want := range []string{"StocBiO.InnerBatch = 2", "[2 2]", "[4 2]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	m.InnerBatch = 0
	if _, err := optim.Solve(p, p.X0(nil), p.Y0(nil), s, m); err != nil {
		t.Errorf("the whole data set: %v", err)
	}
}
