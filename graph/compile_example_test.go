package graph_test

import (
	"fmt"
	"strings"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ExampleCompile compiles ridge regression with one penalty per feature,
//
//	g(λ, w) = ½ mean_train (x_iᵀw − t_i)² + ½ Σ_j e^{λ_j} w_j²,   f(λ, w) = ½ mean_val (x_iᵀw − t_i)²,
//
// evaluates its oracles on all samples and on a minibatch, and shows that a
// graph with an operation outside graph.Supported is refused before
// anything runs.
func ExampleCompile() {
	g := G.NewGraph()
	data := func(name string, v []float64, shape ...int) *G.Node {
		return G.NewTensor(g, G.Float64, len(shape), G.WithName(name), G.WithShape(shape...),
			G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))))
	}
	X, T := data("X", []float64{1, 0, 0, 1, 1, 1, 2, 1}, 4, 2), data("t", []float64{1, 2, 3, 4}, 4)
	Xv, Tv := data("Xval", []float64{1, 1, 0, 2}, 2, 2), data("tval", []float64{2, 3}, 2)
	w := G.NewVector(g, G.Float64, G.WithName("w"), G.WithShape(2), G.WithInit(G.Zeroes()))
	lam := G.NewVector(g, G.Float64, G.WithName("lambda"), G.WithShape(2), G.WithInit(G.Zeroes()))
	half := G.NewConstant(0.5)
	loss := func(X, T *G.Node) *G.Node {
		return G.Must(G.Mul(half, G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(X, w)), T))))))))
	}
	pen := G.Must(G.Mul(half, G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Exp(lam)), G.Must(G.Square(w))))))))
	obj := graph.Objective{
		Lower: G.Must(G.Add(loss(X, T), pen)), Upper: loss(Xv, Tv),
		Outer: []*G.Node{lam}, Inner: []*G.Node{w},
		LowerData: []*G.Node{X, T}, UpperData: []*G.Node{Xv, Tv},
	}
	p, err := graph.Compile(obj)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("x = %s (%d values), y = %s (%d values), %d samples\n",
		p.OuterVars()[0].Name, p.DimX(), p.InnerVars()[0].Name, p.DimY(), p.NumLower())

	x, y := p.X0(nil), []float64{1, 1}
	gy, hv := make([]float64, 2), make([]float64, 2)
	p.GradG(nil, gy, x, y, nil)
	fmt.Printf("g = %.3f, ∇w g = %.3f on all samples\n", p.G(x, y, nil), gy)
	p.GradG(nil, gy, x, y, []int{0, 1})
	fmt.Printf("∇w g = %.3f on samples 0 and 1\n", gy)
	p.HVP(hv, x, y, []float64{1, 0}, nil)
	fmt.Printf("∇ww g·e₁ = %.3f\n", hv)

	obj.Lower = G.Must(G.Add(obj.Lower, G.Must(G.Sum(G.Must(G.Sparsemax(w))))))
	_, err = graph.Compile(obj)
	msg, _, _ := strings.Cut(err.Error(), " (supported operations:") // the list of graph.Supported follows
	fmt.Println(msg)
	// Output:
	// x = lambda (2 values), y = w (2 values), 4 samples
	// g = 1.375, ∇w g = [0.250 0.250] on all samples
	// ∇w g = [1.000 0.500] on samples 0 and 1
	// ∇ww g·e₁ = [2.500 0.750]
	// graph: node "Sparsemax{}()(%4)" (Sparsemax{}()): unsupported operation Sparsemax{}(): graph/ has no rule for sparsemax; use SoftMax, which graph/ differentiates any number of times
}

// ExampleObjective_float32Data holds the data of a least-squares problem in
// float32: the oracles are those of the float64 problem on the rounded
// data. Of the data 0.1, 1 and 2, only 0.1 is not a float32 number; its
// rounding δ = 1.49e-9 moves ∇w g = (2/3) Σ x_i (x_i w − s) by
// (2/3)(2·0.1·w − s)·δ, and nothing else does.
func ExampleObjective_float32Data() {
	build := func(f32 bool) *graph.Problem {
		g := G.NewGraph()
		X := G.NewMatrix(g, G.Float64, G.WithName("X"), G.WithShape(3, 1),
			G.WithValue(tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0.1, 1, 2}))))
		w := G.NewMatrix(g, G.Float64, G.WithName("w"), G.WithShape(1, 1), G.WithInit(G.Zeroes()))
		s := G.NewScalar(g, G.Float64, G.WithName("s"), G.WithValue(1.0))
		// g(s, w) = mean((Xw − s)²), f(s, w) = (w − 1)²
		lower := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(X, w)), s))))))
		upper := G.Must(G.Square(G.Must(G.Sub(G.Must(G.Sum(w)), G.NewConstant(1.0)))))
		p, err := graph.Compile(graph.Objective{Lower: lower, Upper: upper,
			Outer: []*G.Node{s}, Inner: []*G.Node{w}, LowerData: []*G.Node{X}, Float32Data: f32})
		if err != nil {
			panic(err)
		}
		return p
	}
	x, y := []float64{1}, []float64{0.5}
	d64, d32 := make([]float64, 1), make([]float64, 1)
	build(false).GradG(nil, d64, x, y, nil)
	build(true).GradG(nil, d32, x, y, nil)
	delta := float64(float32(0.1)) - 0.1
	fmt.Printf("∇w g = %.12f with float64 data, %.12f with float32 data\n", d64[0], d32[0])
	fmt.Printf("difference %.4e, predicted %.4e\n", d32[0]-d64[0], 2.0/3*(2*0.1*y[0]-x[0])*delta)
	// Output:
	// ∇w g = -0.396666666667 with float64 data, -0.396666667561 with float32 data
	// difference -8.9407e-10, predicted -8.9407e-10
}
