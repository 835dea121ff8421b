package graph

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
)

func TestZZDump(t *testing.T) {
	n, d, c := 50, 52, 100
	g := G.NewGraph()
	X := matNode(g, "X", n, d, make([]float64, n*d))
	yv := make([]float64, n*c)
	for i := 0; i < n; i++ {
		yv[i*c+i%c] = 1
	}
	Y := matNode(g, "Y", n, c, yv)
	W := matNode(g, "W", d, c, make([]float64, d*c))
	lam := vecNode(g, "lambda", make([]float64, d))
	rows := G.Must(G.Sum(G.Must(G.Square(W)), 1))
	pen := G.Must(G.Mul(G.NewConstant(0.001), G.Must(G.Mul(G.Must(G.Exp(lam)), rows))))
	lower := G.Must(G.Add(G.Must(SoftmaxCrossEntropy(G.Must(G.Mul(X, W)), Y)), pen))
	p, err := Compile(Objective{Upper: lower, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{W}, LowerData: []*G.Node{X, Y}, Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []int{progGradY, progHVP, progLinear} {
		w := p.worlds[worldKey{lowerLevel, -1}]
		pr := w.program(p, kind)
		fmt.Println("kind", kind)
		for i, st := range pr.steps {
			if st.n.op == opLeaf || st.n.op == opConst || st.alias {
				continue
			}
			fmt.Printf("  %3d %-12s %v args %v dyn %v\n", i, st.n.op, st.n.shape, st.args, st.dyn)
		}
	}
}
