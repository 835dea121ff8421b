package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	_ "go4.org/unsafe/assume-no-moving-gc"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// opCase is one row of the op table: expr(y, x) with y the inner and x the
// outer variable.
type opCase struct {
	name     string
	y, x     []int // shapes
	positive bool  // draw values in [0.5, 1.5] instead of N(0,1)
	square   bool  // square the expression so linear ops get a Hessian
	expr     func(y, x *G.Node) (*G.Node, error)
	// f32 makes R lower-level data held in float32 (Objective.Float32Data),
	// its values float32 numbers.
	f32 bool
	// noForward marks expressions whose value gorgonia's forward pass of
	// the graph does not give: random draws (gorgonia draws its own) and At
	// (which its machines skip). Their values are compared through the
	// translation check, which puts graph/'s draws, and Slice for At, into
	// gorgonia's copy of the graph.
	noForward bool
	// eval compares in evaluation mode (Problem.SetTraining(false) and
	// gorgonia's EvalMode) as well.
	eval bool
}

func unaryCase(name string, f func(*G.Node) (*G.Node, error), positive, square bool) opCase {
	return opCase{name: name, y: []int{3, 4}, x: []int{3, 4}, positive: positive, square: square,
		expr: func(y, x *G.Node) (*G.Node, error) {
			a, err := G.HadamardProd(y, x)
			if err != nil {
				return nil, err
			}
			return f(a)
		}}
}

func binaryCase(name string, ys, xs []int, positive, square bool, f func(y, x *G.Node) (*G.Node, error)) opCase {
	return opCase{name: name, y: ys, x: xs, positive: positive, square: square, expr: f}
}

var opCases = []opCase{
	unaryCase("abs", G.Abs, true, true),
	unaryCase("sin", G.Sin, false, false),
	unaryCase("cos", G.Cos, false, false),
	unaryCase("exp", G.Exp, false, false),
	unaryCase("ln", G.Log, true, false),
	unaryCase("log2", G.Log2, true, false),
	unaryCase("neg", G.Neg, false, true),
	unaryCase("square", G.Square, false, false),
	unaryCase("sqrt", G.Sqrt, true, false),
	unaryCase("inv", G.Inverse, true, false),
	unaryCase("invSqrt", G.InverseSqrt, true, false),
	unaryCase("cube", G.Cube, false, false),
	unaryCase("tanh", G.Tanh, false, false),
	unaryCase("sigmoid", G.Sigmoid, false, false),
	unaryCase("log1p", G.Log1p, true, false),
	unaryCase("expm1", G.Expm1, false, false),
	unaryCase("softplus", G.Softplus, false, false),
	unaryCase("Rectify", G.Rectify, false, true),
	unaryCase("LeakyRelu", func(a *G.Node) (*G.Node, error) { return G.LeakyRelu(a, 0.1) }, false, true),
	unaryCase("SoftMax", func(a *G.Node) (*G.Node, error) { return G.SoftMax(a) }, false, false),
	unaryCase("LogSoftMax", func(a *G.Node) (*G.Node, error) { return G.LogSoftMax(a) }, false, false),
	unaryCase("SoftMax axis 0", func(a *G.Node) (*G.Node, error) { return G.SoftMax(a, 0) }, false, false),
	unaryCase("graph.LogSoftmax", func(a *G.Node) (*G.Node, error) { return LogSoftmax(a, -1) }, false, false),
	unaryCase("Sum axis 0", func(a *G.Node) (*G.Node, error) { return G.Sum(a, 0) }, false, true),
	unaryCase("Sum axis 1", func(a *G.Node) (*G.Node, error) { return G.Sum(a, 1) }, false, true),
	unaryCase("Sum all then square", func(a *G.Node) (*G.Node, error) {
		s, err := G.Sum(a)
		if err != nil {
			return nil, err
		}
		return G.Square(s)
	}, false, false),
	unaryCase("Mean all then exp", func(a *G.Node) (*G.Node, error) {
		s, err := G.Mean(a)
		if err != nil {
			return nil, err
		}
		return G.Exp(s)
	}, false, false),
	unaryCase("Mean axis 1", func(a *G.Node) (*G.Node, error) { return G.Mean(a, 1) }, false, true),
	unaryCase("Max axis 1", func(a *G.Node) (*G.Node, error) { return G.Max(a, 1) }, false, true),
	unaryCase("Max axis 0", func(a *G.Node) (*G.Node, error) { return G.Max(a, 0) }, false, true),
	unaryCase("Norm axis 1", func(a *G.Node) (*G.Node, error) { return G.Norm(a, 1, 2) }, false, false),
	unaryCase("Reshape", func(a *G.Node) (*G.Node, error) { return G.Reshape(a, tensor.Shape{2, 6}) }, false, true),
	unaryCase("Transpose", func(a *G.Node) (*G.Node, error) { return G.Transpose(a) }, false, true),
	unaryCase("Slice rows 1:3", func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(1, 3)) }, false, true),
	unaryCase("Slice cols step 2", func(a *G.Node) (*G.Node, error) { return G.Slice(a, nil, G.S(0, 4, 2)) }, false, true),
	unaryCase("Slice one row", func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(2)) }, false, true),
	binaryCase("Add", []int{3, 4}, []int{3, 4}, false, true, G.Add),
	binaryCase("Sub", []int{3, 4}, []int{3, 4}, false, true, G.Sub),
	binaryCase("HadamardProd", []int{3, 4}, []int{3, 4}, false, true, G.HadamardProd),
	binaryCase("HadamardDiv", []int{3, 4}, []int{3, 4}, true, false, G.HadamardDiv),
	binaryCase("Pow", []int{3, 4}, []int{3, 4}, true, false, G.Pow),
	binaryCase("Pow const 3", []int{3, 4}, []int{3, 4}, false, false, func(y, x *G.Node) (*G.Node, error) {
		p, err := G.Pow(y, G.NewConstant(3.0))
		if err != nil {
			return nil, err
		}
		return G.HadamardProd(p, x)
	}),
	binaryCase("scalar x · tensor", []int{3, 4}, []int{}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.Mul(x, y) }),
	binaryCase("tensor ÷ scalar x", []int{3, 4}, []int{}, true, false, func(y, x *G.Node) (*G.Node, error) { return G.Div(y, x) }),
	binaryCase("scalar y in exp(x·y)", []int{}, []int{2, 3}, false, false, func(y, x *G.Node) (*G.Node, error) {
		m, err := G.Mul(y, x)
		if err != nil {
			return nil, err
		}
		return G.Exp(m)
	}),
	binaryCase("Mul matrix×matrix", []int{4, 3}, []int{3, 2}, false, true, G.Mul),
	binaryCase("Mul matrix×matrix (x first)", []int{3, 2}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.Mul(x, y) }),
	binaryCase("Mul matrix×vector (wrt matrix)", []int{4, 3}, []int{3}, false, true, G.Mul),
	binaryCase("Mul matrix×vector (wrt vector)", []int{3}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.Mul(x, y) }),
	binaryCase("Mul vector×matrix", []int{4}, []int{4, 3}, false, true, G.Mul),
	binaryCase("Mul vector·vector", []int{5}, []int{5}, false, true, G.Mul),
	binaryCase("OuterProd", []int{4}, []int{3}, false, true, G.OuterProd),
	binaryCase("Concat axis 0", []int{2, 3}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.Concat(0, y, x, y) }),
	binaryCase("Concat axis 1", []int{3, 2}, []int{3, 4}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.Concat(1, x, y) }),
	binaryCase("BroadcastAdd (4,3)+(1,3)", []int{4, 3}, []int{1, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.BroadcastAdd(y, x, nil, []byte{0})
	}),
	binaryCase("BroadcastSub (4,3)−(1,3) wrt broadcast side", []int{1, 3}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.BroadcastSub(x, y, nil, []byte{0})
	}),
	binaryCase("BroadcastHadamardProd (4,3)*(4,1)", []int{4, 3}, []int{4, 1}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.BroadcastHadamardProd(y, x, nil, []byte{1})
	}),
	binaryCase("BroadcastHadamardProd (1,3)*(4,3) wrt broadcast side", []int{1, 3}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.BroadcastHadamardProd(y, x, []byte{0}, nil)
	}),
	binaryCase("Conv2d wrt image", []int{1, 2, 5, 5}, []int{3, 2, 3, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Conv2d(y, x, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})
	}),
	binaryCase("Conv2d wrt filter, stride 2", []int{3, 2, 3, 3}, []int{2, 2, 6, 6}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Conv2d(x, y, tensor.Shape{3, 3}, []int{0, 0}, []int{2, 2}, []int{1, 1})
	}),
	binaryCase("MaxPool2D 2x2", []int{1, 2, 4, 4}, []int{1, 2, 4, 4}, false, true, func(y, x *G.Node) (*G.Node, error) {
		a, err := G.HadamardProd(y, x)
		if err != nil {
			return nil, err
		}
		return G.MaxPool2D(a, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
	}),
	binaryCase("MaxPool2D 3x3 pad 1 stride 2", []int{1, 1, 5, 5}, []int{1, 1, 5, 5}, false, true, func(y, x *G.Node) (*G.Node, error) {
		a, err := G.HadamardProd(y, x)
		if err != nil {
			return nil, err
		}
		return G.MaxPool2D(a, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2})
	}),
	unaryCase("ceil (times sin)", func(a *G.Node) (*G.Node, error) { return G.HadamardProd(G.Must(G.Ceil(a)), G.Must(G.Sin(a))) }, false, false),
	unaryCase("floor (times sin)", func(a *G.Node) (*G.Node, error) { return G.HadamardProd(G.Must(G.Floor(a)), G.Must(G.Sin(a))) }, false, false),
	unaryCase("Mish", G.Mish, false, false),
	{name: "At(1, 2)", y: []int{3, 4}, x: []int{3, 4}, square: true, noForward: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.At(G.Must(G.HadamardProd(y, x)), 1, 2)
	}},
	unaryCase("Norm p = 1 (no absolute values)", func(a *G.Node) (*G.Node, error) { return G.Norm(a, 1, 1) }, false, true),
	unaryCase("Norm p = 3", func(a *G.Node) (*G.Node, error) { return G.Norm(a, 0, 3) }, true, false),
	unaryCase("Ravel", G.Ravel, false, true),
	unaryCase("KeepDims of Sum", func(a *G.Node) (*G.Node, error) {
		return G.KeepDims(a, false, func(a *G.Node) (*G.Node, error) { return G.Sum(a, 1) })
	}, false, true),
	unaryCase("Unconcat then ReduceAdd", func(a *G.Node) (*G.Node, error) {
		parts, err := G.Unconcat(a, 0, 3)
		if err != nil {
			return nil, err
		}
		return G.ReduceAdd(parts)
	}, false, true),
	unaryCase("Iop", func(a *G.Node) (*G.Node, error) { return G.ApplyOp(G.Iop{}, a) }, false, true),
	binaryCase("ReduceMul", []int{4}, []int{4}, false, false, func(y, x *G.Node) (*G.Node, error) { return G.ReduceMul(G.Nodes{y, x, y}) }),
	binaryCase("MaxBetween", []int{3, 4}, []int{3, 4}, false, true, G.MaxBetween),
	binaryCase("MinBetween", []int{3, 4}, []int{3, 4}, false, true, G.MinBetween),
	binaryCase("LogSumExp of a vector", []int{5}, []int{5}, false, false, func(y, x *G.Node) (*G.Node, error) {
		return G.LogSumExp(G.Must(G.HadamardProd(y, x)), 0)
	}),
	binaryCase("BatchedMatMul", []int{2, 3, 4}, []int{2, 4, 2}, false, true, func(y, x *G.Node) (*G.Node, error) { return G.BatchedMatMul(y, x) }),
	binaryCase("BatchedMatMul transposed, 4-D", []int{2, 2, 4, 3}, []int{2, 2, 2, 4}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.BatchedMatMul(y, x, true, true)
	}),
	binaryCase("Tensordot one axis", []int{3, 4, 2}, []int{4, 5}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Tensordot([]int{1}, []int{0}, y, x)
	}),
	binaryCase("Tensordot two axes, b's order", []int{3, 4, 2}, []int{2, 5, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Tensordot([]int{2, 0}, []int{0, 2}, y, x)
	}),
	binaryCase("BinaryXent", []int{3, 4}, []int{3, 4}, false, false, func(y, x *G.Node) (*G.Node, error) {
		target := G.NewTensor(y.Graph(), G.Float64, 2, G.WithShape(3, 4), G.WithName("target"),
			G.WithValue(tensor.New(tensor.WithShape(3, 4), tensor.WithBacking([]float64{1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}))))
		return G.BinaryXent(G.Must(G.Sigmoid(G.Must(G.HadamardProd(y, x)))), target)
	}),
	binaryCase("AveragePool2D 2x2 (divides by the width)", []int{1, 2, 4, 4}, []int{1, 2, 4, 4}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.AveragePool2D(G.Must(G.HadamardProd(y, x)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
	}),
	binaryCase("AveragePool2D 3x3 pad 1 stride 2", []int{1, 1, 5, 5}, []int{1, 1, 5, 5}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.AveragePool2D(G.Must(G.HadamardProd(y, x)), tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2})
	}),
	binaryCase("AveragePool2D pads {0,1,0,1}", []int{1, 1, 4, 4}, []int{1, 1, 4, 4}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.AveragePool2D(G.Must(G.HadamardProd(y, x)), tensor.Shape{2, 2}, []int{0, 1, 0, 1}, []int{2, 2})
	}),
	binaryCase("AveragePool1D (a max pool)", []int{1, 2, 1, 6}, []int{1, 2, 1, 6}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.AveragePool1D(G.Must(G.HadamardProd(y, x)), 2, 0, 2)
	}),
	binaryCase("MaxPool2D pads {0,1,0,1}", []int{1, 1, 4, 4}, []int{1, 1, 4, 4}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.MaxPool2D(G.Must(G.HadamardProd(y, x)), tensor.Shape{2, 2}, []int{0, 1, 0, 1}, []int{2, 2})
	}),
	binaryCase("GlobalAveragePool2D", []int{2, 2, 3, 3}, []int{2, 2, 3, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.GlobalAveragePool2D(G.Must(G.HadamardProd(y, x)))
	}),
	binaryCase("Upsample2D ×2", []int{1, 2, 2, 3}, []int{1, 2, 2, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Upsample2D(G.Must(G.HadamardProd(y, x)), 2)
	}),
	binaryCase("Conv1d", []int{1, 2, 1, 7}, []int{3, 2, 1, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		return G.Conv1d(y, x, 3, 1, 2, 1)
	}),
	binaryCase("BatchNorm 4-D, scale and shift", []int{3, 2, 3, 3}, []int{1, 2, 1, 1}, false, true, func(y, x *G.Node) (*G.Node, error) {
		bias := G.NewTensor(y.Graph(), G.Float64, 4, G.WithShape(1, 2, 1, 1), G.WithName("bias"),
			G.WithValue(tensor.New(tensor.WithShape(1, 2, 1, 1), tensor.WithBacking([]float64{0.5, -1}))))
		r, _, _, _, err := G.BatchNorm(y, x, bias, 0.9, 0.01)
		return r, err
	}),
	binaryCase("BatchNorm 2-D wrt scale", []int{1, 3}, []int{5, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		bias := G.NewMatrix(y.Graph(), G.Float64, G.WithShape(1, 3), G.WithName("bias"),
			G.WithValue(tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float64{0.5, -1, 0}))))
		r, _, _, _, err := G.BatchNorm(x, G.Must(G.Square(y)), bias, 0.9, 0.001)
		return r, err
	}),
	{name: "BatchNorm 4-D in evaluation mode", y: []int{2, 2, 2, 2}, x: []int{1, 2, 1, 1}, square: true, expr: func(y, x *G.Node) (*G.Node, error) {
		r, _, _, op, err := G.BatchNorm(y, x, x, 0.9, 0.01)
		if err != nil {
			return nil, err
		}
		mean := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.25, -0.5}))
		variance := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{2, 0.5}))
		return r, op.SetStats(mean, variance)
	}, eval: true},
	{name: "Dropout p = 0.3", y: []int{4, 5}, x: []int{4, 5}, noForward: true, square: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.Dropout(G.Must(G.HadamardProd(y, x)), 0.3)
	}},
	{name: "Dropout in evaluation", y: []int{4, 5}, x: []int{4, 5}, square: true, noForward: true, eval: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.Dropout(G.Must(G.HadamardProd(y, x)), 0.3)
	}},
	{name: "UniformRandomNode", y: []int{3, 4}, x: []int{3, 4}, noForward: true, square: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.Add(G.Must(G.HadamardProd(y, x)), G.UniformRandomNode(y.Graph(), G.Float64, -1, 2, 3, 4))
	}},
	{name: "GaussianRandomNode", y: []int{3, 4}, x: []int{3, 4}, noForward: true, square: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.HadamardProd(G.Must(G.HadamardProd(y, x)), G.GaussianRandomNode(y.Graph(), G.Float64, 1, 0.5, 3, 4))
	}},
	{name: "BinomialRandomNode (denoising mask)", y: []int{3, 4}, x: []int{3, 4}, noForward: true, square: true, expr: func(y, x *G.Node) (*G.Node, error) {
		return G.HadamardProd(G.Must(G.HadamardProd(y, x)), G.BinomialRandomNode(y.Graph(), G.Float64, 1, 0.7, 3, 4))
	}},
	binaryCase("graph.BatchNorm wrt input", []int{6, 3}, []int{3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		beta := G.NewVector(y.Graph(), G.Float64, G.WithShape(3), G.WithName("beta"),
			G.WithValue(tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0.5, -1, 2}))))
		return BatchNorm(y, x, beta, 0.1)
	}),
	binaryCase("graph.BatchNorm wrt scale and shift", []int{3}, []int{5, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		s, err := G.Square(y)
		if err != nil {
			return nil, err
		}
		return BatchNorm(x, s, y, 1e-3)
	}),
	{name: "Float32Data: R read elementwise (widen)", y: []int{3, 4}, x: []int{3, 4}, f32: true, expr: G.HadamardProd},
	binaryCase("graph.Gather", []int{5, 3}, []int{4, 3}, false, true, func(y, x *G.Node) (*G.Node, error) {
		idx := G.NewVector(y.Graph(), G.Float64, G.WithShape(4), G.WithName("idx"),
			G.WithValue(tensor.New(tensor.WithShape(4), tensor.WithBacking([]float64{0, 2, 2, 4}))))
		r, err := Gather(y, idx)
		if err != nil {
			return nil, err
		}
		return G.HadamardProd(r, x)
	}),
}

func randTensor(rng *rand.Rand, shape []int, positive bool) G.Value {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float64, n)
	for i := range data {
		if positive {
			data[i] = 0.5 + rng.Float64()
		} else {
			data[i] = rng.NormFloat64()
		}
	}
	if len(shape) == 0 {
		return G.NewF64(data[0])
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

func newInput(g *G.ExprGraph, name string, v G.Value) *G.Node {
	if len(v.Shape()) == 0 {
		return G.NewScalar(g, G.Float64, G.WithName(name), G.WithValue(v))
	}
	return G.NewTensor(g, G.Float64, len(v.Shape()), G.WithShape(v.Shape()...), G.WithName(name), G.WithValue(v))
}

// buildOpCase returns the problem of an op case: g = Σ R ⊙ s(expr(y, x)),
// with s the square or the identity, and f = Σ sin(y) + Σ x².
func buildOpCase(c opCase, seed uint64) (*G.ExprGraph, Objective, error) {
	rng := rand.New(rand.NewPCG(seed, 3))
	g := G.NewGraph()
	y := newInput(g, "y", randTensor(rng, c.y, c.positive))
	x := newInput(g, "x", randTensor(rng, c.x, c.positive))
	e, err := c.expr(y, x)
	if err != nil {
		return nil, Objective{}, err
	}
	if c.square {
		if e, err = G.Square(e); err != nil {
			return nil, Objective{}, err
		}
	}
	rv := randTensor(rng, e.Shape(), false)
	if c.f32 {
		for i, v := range rv.Data().([]float64) {
			rv.Data().([]float64)[i] = float64(float32(v))
		}
	}
	r := newInput(g, "R", rv)
	prod, err := G.HadamardProd(r, e)
	if err != nil {
		return nil, Objective{}, err
	}
	lower, err := G.Sum(prod)
	if err != nil {
		return nil, Objective{}, err
	}
	upper := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Sin(y)))), G.Must(G.Sum(G.Must(G.Square(x))))))
	obj := Objective{Upper: upper, Lower: lower, Outer: []*G.Node{x}, Inner: []*G.Node{y}}
	if c.f32 {
		obj.LowerData, obj.Float32Data = []*G.Node{r}, true
	}
	obj.Constants = otherInputs(g, append([]*G.Node{x, y}, obj.LowerData...)...)
	return g, obj, nil
}

// otherInputs returns the input nodes of g other than vars: the constants
// of a test objective.
func otherInputs(g *G.ExprGraph, vars ...*G.Node) []*G.Node {
	var r []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() == nil && !slices.Contains(vars, n) {
			r = append(r, n)
		}
	}
	return r
}

// TestOpTable checks, for every supported operation, the value against
// gorgonia's own forward pass (the objective's and, through Check's
// translation check, every node's) and every first- and second-order
// oracle against central finite differences, in float64 and in float32
// (opRow32). A panic in one row fails that row only: graph/ runs its
// kernels on the caller's goroutine, so recover reaches it. When every row
// runs, it then checks that the rows together compute every IR operation
// of the registry in both precisions and read every kind of gorgonia
// operation that graph/ recognizes.
func TestOpTable(t *testing.T) {
	const tol = 1e-6
	irOps, irOps32, kinds := map[opKind]bool{}, map[opKind]bool{}, map[string]bool{}
	ran, worst32 := 0, opWorst32{}
	for _, c := range opCases {
		if t.Run(c.name, func(t *testing.T) {
			p64 := opRow(t, c, tol, irOps, kinds)
			opRow32(t, c, p64, tol, irOps32, &worst32)
		}) {
			ran++
		}
	}
	t.Logf("float32, worst over the rows (tolerance %.1e = %g·2⁻²⁴): value against gorgonia %.1e (%s), oracles against float64 %.1e (%s), against the same objective in float64 on the rounded data %.1e (%s); translation %.1e (tolerance %g)",
		tol32, tol32*(1<<24), worst32.value, worst32.valueRow, worst32.oracles, worst32.oraclesRow, worst32.twin, worst32.twinRow, worst32.translation, verifyTol32)
	if ran < len(opCases) {
		return // some rows failed or were not selected
	}
	for k := range ops {
		if !irOps[opKind(k)] {
			t.Errorf("no row of the op table computes IR operation %s", opKind(k))
		}
		// Float32 programs read float32 data as they are, never widened.
		if !irOps32[opKind(k)] && opKind(k) != opWiden {
			t.Errorf("no row of the op table computes IR operation %s in float32", opKind(k))
		}
	}
	for kind := range importRules {
		if !kinds[kind] {
			t.Errorf("no row of the op table reads gorgonia's %s", kind)
		}
	}
}

// tol32 is the op table's tolerance for float32: 100 units of float32's
// rounding 2⁻²⁴ (6.0e-6). A row's value and oracles go through a few
// dozen operations, each rounding once to float32 and amplifying its
// arguments' rounding by its condition number (a few units for the
// functions and inputs of the table), from inputs rounded once; the worst
// row measured is at 9 units (the log2 row, 5.3e-7).
const tol32 = 100.0 / (1 << 24)

// opWorst32 records the worst float32 differences of the op table and
// their rows.
type opWorst32 struct {
	value, oracles, twin, translation float64
	valueRow, oraclesRow, twinRow     string
}

// opRow32 runs one row of the op table computed in float32
// (Objective.Float32): its value against gorgonia's forward pass (and,
// through Compile's translation check, every node's float32 value); its
// oracles against those of p64, the row in float64, and through Check
// against the same objective in float64 on the float32 data, which Check
// compares with finite differences (to tol, as in float64). It records the
// IR operations its programs compute.
func opRow32(t *testing.T, c opCase, p64 *Problem, tol float64, irOps map[opKind]bool, worst *opWorst32) {
	if p64 == nil {
		return // the float64 row failed
	}
	if c.eval { // opRow left it in evaluation
		if err := p64.SetTraining(true); err != nil {
			t.Fatalf("SetTraining(true): %v", err)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("float32: panic: %v", r)
		}
	}()
	_, obj, err := buildOpCase(c, 1)
	if err != nil {
		t.Fatalf("building the case: %v", err)
	}
	obj.Float32 = true
	p, err := Compile(obj)
	if err != nil {
		t.Fatalf("float32: Compile: %v", err)
	}
	x, y := p.X0(nil), p.Y0(nil)
	note := func(d float64, w *float64, row *string) {
		if d > *w {
			*w, *row = d, c.name
		}
	}
	value := func(opts ...G.VMOpt) {
		want := gorgoniaForward(t, obj.Lower, opts...)[0]
		d := math.Abs(p.G(x, y, nil)-want) / math.Max(1, math.Abs(want))
		note(d, &worst.value, &worst.valueRow)
		if d > tol32 {
			t.Errorf("float32: g differs from gorgonia's forward pass by %.1e relative (tolerance %.1e)", d, tol32)
		}
	}
	if !c.noForward {
		value()
	}
	compare := func(mode string) {
		r := Check(p, x, y, nil)
		t.Logf("float32%s: %v", mode, r)
		d := compareOracles(p, p64, x, y, nil)
		note(d, &worst.oracles, &worst.oraclesRow)
		note(r.Float32, &worst.twin, &worst.twinRow)
		worst.translation = max(worst.translation, r.Translation32)
		if r.Max() > tol || r.Float32 > tol32 || d > tol32 || r.TranslationErr != nil {
			t.Errorf("float32%s: oracles against float64 %.1e (tolerance %.1e); Check: %v", mode, d, tol32, r)
		}
	}
	compare("")
	if c.eval {
		if err := p.SetTraining(false); err != nil {
			t.Fatalf("float32: SetTraining(false): %v", err)
		}
		if err := p64.SetTraining(false); err != nil {
			t.Fatalf("SetTraining(false): %v", err)
		}
		value(G.EvalMode())
		compare(" in evaluation")
	}
	for _, w := range p.worlds {
		for _, pr := range w.progs {
			if !pr.f32 {
				t.Fatalf("float32: a program computes in float64")
			}
			for _, st := range pr.steps {
				irOps[st.n.op] = true
			}
		}
	}
}

// opRow runs one row of the op table and records the IR operations its
// programs compute and the gorgonia operations its graph holds. It returns
// the row's problem, nil when it fails.
func opRow(t *testing.T, c opCase, tol float64, irOps map[opKind]bool, kinds map[string]bool) (prob *Problem) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
		if t.Failed() {
			prob = nil
		}
	}()
	_, obj, err := buildOpCase(c, 1)
	if err != nil {
		t.Fatalf("building the case: %v", err)
	}
	p, err := Compile(obj)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	x, y := p.X0(nil), p.Y0(nil)
	if !c.noForward {
		want := gorgoniaForward(t, obj.Lower)[0]
		if got := p.G(x, y, nil); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("g = %.15g, gorgonia's forward pass gives %.15g", got, want)
		}
	}
	if c.eval {
		if err := p.SetTraining(false); err != nil {
			t.Fatalf("SetTraining(false): %v", err)
		}
		want := gorgoniaForward(t, obj.Lower, G.EvalMode())[0]
		if got := p.G(x, y, nil); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("in evaluation g = %.15g, gorgonia's forward pass in EvalMode gives %.15g", got, want)
		}
	}
	r := Check(p, x, y, nil)
	t.Logf("%v", r)
	if r.Max() > tol {
		t.Errorf("oracle errors above %g: %v", tol, r)
	}
	for _, w := range p.worlds {
		for _, pr := range w.progs {
			for _, st := range pr.steps {
				irOps[st.n.op] = true
			}
		}
	}
	for _, n := range p.src.order {
		if n.Op() != nil {
			kinds[typeName(n.Op())] = true
		}
	}
	return p
}

// TestRegistry checks that every IR operation is defined whole, and that
// every gorgonia operation graph/ reads or rejects says what it is.
func TestRegistry(t *testing.T) {
	for k, d := range ops {
		if d.name == "" || d.shape == nil || d.f64 == nil || d.f32 == nil || (d.vjp == nil) != (d.constant || d.fuse != nil) {
			t.Errorf("operation %d (%q): name, shape rule, kernels in float64 and float32 and a derivative rule unless constant are required", k, d.name)
		}
	}
	for kind, r := range importRules {
		if r.translate == nil || r.doc == "" {
			t.Errorf("gorgonia's %s: a translation and the constructors it covers are required", kind)
		}
	}
	for kind, advice := range rejected {
		if advice == "" {
			t.Errorf("gorgonia's %s is rejected without saying what to write instead", kind)
		}
		if _, ok := importRules[kind]; ok {
			t.Errorf("gorgonia's %s is both read and rejected", kind)
		}
	}
}

func ExampleCheck() {
	g := G.NewGraph()
	w := G.NewVector(g, G.Float64, G.WithShape(3), G.WithName("w"), G.WithInit(G.Ones()))
	lam := G.NewScalar(g, G.Float64, G.WithName("lambda"), G.WithValue(0.5))
	// g(λ, w) = Σ exp(w) + λ Σ w², f(λ, w) = Σ (w − 1)².
	lower := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Exp(w)))), G.Must(G.Mul(lam, G.Must(G.Sum(G.Must(G.Square(w))))))))
	upper := G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(w, G.NewConstant(1.0)))))))
	p, err := Compile(Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w}})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := Check(p, p.X0(nil), p.Y0(nil), nil)
	fmt.Println("all oracles within 1e-8 of finite differences:", r.Max() < 1e-8)
	// Output:
	// all oracles within 1e-8 of finite differences: true
}
