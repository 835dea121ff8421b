package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The model code of gorgonia v0.9.18's own examples (examples/convnet,
// examples/stacked_autoencoder, examples/logisticregression,
// examples/iris), written as they write it, at small sizes, and put into
// bilevel problems: the example's training cost with a learned L2 penalty
// (one weight per layer) as g, the example's loss on validation data as f.
// Each is compiled, its values compared with gorgonia's own forward pass
// and its oracles with finite differences (graph.Check, which also
// compares every node with gorgonia's forward pass once more).

// exampleData returns n rows of d values in (0, 1).
func exampleData(rng *rand.Rand, name string, n, d int) (*tensor.Dense, []float64) {
	v := make([]float64, n*d)
	for i := range v {
		v[i] = 0.05 + 0.9*rng.Float64()
	}
	return tensor.New(tensor.WithShape(n, d), tensor.WithBacking(v)), v
}

// oneHotRows returns n one-hot rows of classes.
func oneHotRows(n, classes int) *tensor.Dense {
	v := make([]float64, n*classes)
	for i := 0; i < n; i++ {
		v[i*classes+i%classes] = 1
	}
	return tensor.New(tensor.WithShape(n, classes), tensor.WithBacking(v))
}

// penalty returns Σ_l exp(λ_l)·‖w_l‖² with λ a vector of one value per w.
func penalty(lam *G.Node, ws ...*G.Node) *G.Node {
	var sum *G.Node
	for i, w := range ws {
		term := G.Must(G.Mul(G.Must(G.Exp(G.Must(G.Slice(lam, G.S(i))))), G.Must(G.Sum(G.Must(G.Square(w))))))
		if sum == nil {
			sum = term
		} else {
			sum = G.Must(G.Add(sum, term))
		}
	}
	return sum
}

// Randomness of an example model.
const (
	deterministic = iota
	dropout       // Dropout only: deterministic in evaluation
	randomNodes   // random nodes, which gorgonia draws anew at every run
)

// checkExample compiles obj and checks it: f and g equal gorgonia's
// forward pass (in evaluation, gorgonia's EvalMode, for a model with
// Dropout; a model with random nodes has no value of gorgonia's own to
// compare with, and is compared node by node with gorgonia's forward pass
// with graph/'s draws put in, by Compile and by Check), and every oracle
// agrees with finite differences at a point near the declared values, on
// all samples and on the given batches (nil: none).
func checkExample(t *testing.T, obj graph.Objective, randomness int, lower, upper []int) {
	t.Helper()
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	var opts []G.VMOpt
	if randomness == dropout {
		opts = append(opts, G.EvalMode())
		if err := p.SetTraining(false); err != nil {
			t.Fatalf("SetTraining(false): %v", err)
		}
	}
	x, y := p.X0(nil), p.Y0(nil)
	if randomness != randomNodes {
		vm := G.NewTapeMachine(obj.Lower.Graph().ExactSubgraphRoots(obj.Lower, obj.Upper), opts...)
		if err := vm.RunAll(); err != nil {
			t.Fatalf("gorgonia's forward pass: %v", err)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"g", p.G(x, y, nil), obj.Lower.Value().Data().(float64)}, {"f", p.F(x, y, nil), obj.Upper.Value().Data().(float64)}} {
			if math.Abs(c.got-c.want) > 1e-12*math.Max(1, math.Abs(c.want)) {
				t.Errorf("%s = %.15g, gorgonia's forward pass gives %.15g", c.name, c.got, c.want)
			}
		}
		vm.Close()
	}
	if randomness == dropout {
		if err := p.SetTraining(true); err != nil {
			t.Fatalf("SetTraining(true): %v", err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range x {
		x[i] += 0.1 * rng.NormFloat64()
	}
	for i := range y {
		y[i] += 0.05 * rng.NormFloat64()
	}
	p32 := compile32(t, obj)
	for _, s := range []*graph.CheckSettings{nil, {LowerBatch: lower, UpperBatch: upper}} {
		if s != nil && lower == nil && upper == nil {
			continue
		}
		checkBoth(t, fmt.Sprintf("graph.Check (batches %v)", s), p, p32, x, y, s)
	}
}

// TestGorgoniaConvnet: examples/convnet's network (three blocks of
// Conv2d, Rectify, MaxPool2D and Dropout, a Dropout after the first dense
// layer, SoftMax), on 8×8 images of 3 classes, with the example's
// commented "correct" loss −mean(y ⊙ log(out)); G.Grad is called as the
// example calls it.
func TestGorgoniaConvnet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	g := G.NewGraph()
	const n, nv, side, classes = 6, 4, 8, 3
	init := func(name string, shape ...int) *G.Node {
		size := 1
		for _, d := range shape {
			size *= d
		}
		v := make([]float64, size)
		for i := range v {
			v[i] = rng.NormFloat64() * math.Sqrt(2/float64(size/shape[0]))
		}
		return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))))
	}
	w0, w1, w2 := init("w0", 4, 1, 3, 3), init("w1", 8, 4, 3, 3), init("w2", 8, 8, 3, 3)
	w3, w4 := init("w3", 8*1*1, 16), init("w4", 16, classes)
	fwd := func(x *G.Node) *G.Node {
		block := func(in, w *G.Node, drop bool) *G.Node {
			c := G.Must(G.Conv2d(in, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
			p := G.Must(G.MaxPool2D(G.Must(G.Rectify(c)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
			if drop {
				p = G.Must(G.Dropout(p, 0.2))
			}
			return p
		}
		p2 := block(block(block(x, w0, true), w1, true), w2, false)
		b, c, h, w := p2.Shape()[0], p2.Shape()[1], p2.Shape()[2], p2.Shape()[3]
		l2 := G.Must(G.Dropout(G.Must(G.Reshape(p2, tensor.Shape{b, c * h * w})), 0.2))
		l3 := G.Must(G.Dropout(G.Must(G.Rectify(G.Must(G.Mul(l2, w3)))), 0.55))
		return G.Must(G.SoftMax(G.Must(G.Mul(l3, w4))))
	}
	images := func(name string, k int) *G.Node {
		t, _ := exampleData(rng, name, k, side*side)
		t.Reshape(k, 1, side, side)
		return G.NewTensor(g, G.Float64, 4, G.WithShape(k, 1, side, side), G.WithName(name), G.WithValue(t))
	}
	labels := func(name string, k int) *G.Node {
		return G.NewMatrix(g, G.Float64, G.WithShape(k, classes), G.WithName(name), G.WithValue(oneHotRows(k, classes)))
	}
	X, Y, Xv, Yv := images("x", n), labels("y", n), images("xv", nv), labels("yv", nv)
	cost := func(x, y *G.Node) *G.Node {
		losses := G.Must(G.HadamardProd(G.Must(G.Neg(G.Must(G.Log(fwd(x))))), y))
		return G.Must(G.Mean(losses))
	}
	learnables := G.Nodes{w0, w1, w2, w3, w4}
	lam := G.NewVector(g, G.Float64, G.WithShape(5), G.WithName("lambda"),
		G.WithValue(tensor.New(tensor.WithShape(5), tensor.WithBacking([]float64{-3, -3, -3, -2, -2}))))
	lower := G.Must(G.Add(cost(X, Y), penalty(lam, learnables...)))
	if _, err := G.Grad(lower, learnables...); err != nil {
		t.Fatalf("gorgonia's Grad, as the example calls it: %v", err)
	}
	obj := graph.Objective{Upper: cost(Xv, Yv), Lower: lower, Outer: []*G.Node{lam}, Inner: learnables,
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}, RandomSeed: 5}
	checkExample(t, obj, dropout, []int{4, 1, 1}, []int{2, 0})
}

// TestGorgoniaDenoisingAutoencoder: one layer of
// examples/stacked_autoencoder as NewDATiedWeights writes it — a scalar
// BinomialRandomNode corruption, sigmoid encoder, tied-weight decoder with
// per-row biases of the batch size, mean BinaryXent reconstruction loss.
func TestGorgoniaDenoisingAutoencoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	g := G.NewGraph()
	const batch, inputs, hidden = 5, 6, 3
	wv := make([]float64, inputs*hidden)
	for i := range wv {
		wv[i] = 0.5 * rng.NormFloat64()
	}
	w := G.NewMatrix(g, G.Float64, G.WithShape(inputs, hidden), G.WithName("w"), G.WithValue(tensor.New(tensor.WithShape(inputs, hidden), tensor.WithBacking(wv))))
	b := G.NewMatrix(g, G.Float64, G.WithShape(batch, hidden), G.WithName("b"), G.WithInit(G.Zeroes()))
	hb := G.NewMatrix(g, G.Float64, G.WithShape(batch, inputs), G.WithName("hb"), G.WithInit(G.Zeroes()))
	hw := G.Must(G.Transpose(w))
	corruption := G.BinomialRandomNode(g, G.Float64, 1, 0.7)
	daCost := func(input *G.Node) *G.Node {
		corrupted := G.Must(G.HadamardProd(corruption, input))
		output := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(corrupted, w)), b))))
		hiddenOut := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(output, hw)), hb))))
		return G.Must(G.Mean(G.Must(G.BinaryXent(hiddenOut, input))))
	}
	in := func(name string) *G.Node {
		v, _ := exampleData(rng, name, batch, inputs)
		return G.NewMatrix(g, G.Float64, G.WithShape(batch, inputs), G.WithName(name), G.WithValue(v))
	}
	X, Xv := in("x"), in("xv")
	lam := G.NewVector(g, G.Float64, G.WithShape(1), G.WithName("lambda"),
		G.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{-2}))))
	lower := G.Must(G.Add(daCost(X), penalty(lam, w)))
	if _, err := G.Grad(lower, w, b, hb); err != nil {
		t.Fatalf("gorgonia's Grad, as the example calls it: %v", err)
	}
	obj := graph.Objective{Upper: daCost(Xv), Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{w, b, hb},
		LowerData: []*G.Node{X}, UpperData: []*G.Node{Xv}, RandomSeed: 9}
	checkExample(t, obj, randomNodes, nil, nil)
}

// TestGorgoniaLogisticRegression: examples/logisticregression's model and
// cost as it writes them (NewConstant(1.0), Log(Sub(one, prob)) — which
// gorgonia stabilizes, removing a node — and its Grad and update nodes in
// the graph), its l2reg constant made a learned λ.
func TestGorgoniaLogisticRegression(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	g := G.NewGraph()
	const n, nv, feats = 12, 8, 4
	data := func(name string, k int) (*G.Node, *G.Node) {
		xv, xs := exampleData(rng, name, k, feats)
		yv := make([]float64, k)
		for i := range yv {
			if xs[i*feats]+xs[i*feats+1] > 1 {
				yv[i] = 1
			}
		}
		yv[0] = 1 - yv[0] // not separable
		return G.NewMatrix(g, G.Float64, G.WithName(name), G.WithShape(k, feats), G.WithValue(xv)),
			G.NewVector(g, G.Float64, G.WithName(name+"y"), G.WithShape(k), G.WithValue(tensor.New(tensor.WithShape(k), tensor.WithBacking(yv))))
	}
	x, y := data("x", n)
	xv, yv := data("xv", nv)
	w := G.NewVector(g, G.Float64, G.WithName("w"), G.WithShape(feats), G.WithValue(tensor.New(tensor.WithShape(feats), tensor.WithBacking([]float64{0.3, -0.2, 0.1, 0.4}))))
	b := G.NewScalar(g, G.Float64, G.WithName("bias"), G.WithValue(0.1))
	one := G.NewConstant(1.0)
	loss := func(x, y *G.Node) *G.Node {
		xwmb := G.Must(G.Add(G.Must(G.Mul(x, w)), b))
		prob := G.Must(G.Sigmoid(xwmb))
		G.Must(G.Gt(prob, G.NewConstant(0.5), false)) // pred, as in the example
		logProb := G.Must(G.Log(prob))
		fstTerm := G.Must(G.HadamardProd(G.Must(G.Neg(y)), logProb))
		oneMinusY := G.Must(G.Sub(one, y))
		logOneMinusProb := G.Must(G.Log(G.Must(G.Sub(one, prob))))
		sndTerm := G.Must(G.HadamardProd(oneMinusY, logOneMinusProb))
		return G.Must(G.Mean(G.Must(G.Sub(fstTerm, sndTerm))))
	}
	lam := G.NewVector(g, G.Float64, G.WithShape(1), G.WithName("lambda"),
		G.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{math.Log(0.01)}))))
	cost := G.Must(G.Add(loss(x, y), penalty(lam, w)))
	grads, err := G.Grad(cost, w, b)
	if err != nil {
		t.Fatalf("gorgonia's Grad, as the example calls it: %v", err)
	}
	learnRate := G.NewConstant(0.1)
	G.Must(G.Sub(w, G.Must(G.Mul(learnRate, grads[0]))))
	G.Must(G.Sub(b, G.Must(G.Mul(learnRate, grads[1]))))
	obj := graph.Objective{Upper: loss(xv, yv), Lower: cost, Outer: []*G.Node{lam}, Inner: []*G.Node{w, b},
		LowerData: []*G.Node{x, y}, UpperData: []*G.Node{xv, yv}}
	checkExample(t, obj, deterministic, []int{11, 0, 5}, []int{7, 7})
}

// TestGorgoniaIris: examples/iris's linear regression of the species on
// the measurements and a bias column (NodeFromAny, Mul, Square, Sub,
// Mean, Grad), on rows of Fisher's iris data, with a learned ridge
// penalty; f is the error on other rows.
func TestGorgoniaIris(t *testing.T) {
	rows := [][5]float64{ // sepal length, sepal width, petal length, petal width, species
		{5.1, 3.5, 1.4, 0.2, 1}, {4.9, 3.0, 1.4, 0.2, 1}, {4.7, 3.2, 1.3, 0.2, 1}, {5.0, 3.6, 1.4, 0.2, 1},
		{7.0, 3.2, 4.7, 1.4, 2}, {6.4, 3.2, 4.5, 1.5, 2}, {6.9, 3.1, 4.9, 1.5, 2}, {5.5, 2.3, 4.0, 1.3, 2},
		{6.3, 3.3, 6.0, 2.5, 3}, {5.8, 2.7, 5.1, 1.9, 3}, {7.1, 3.0, 5.9, 2.1, 3}, {6.3, 2.9, 5.6, 1.8, 3},
		{4.6, 3.1, 1.5, 0.2, 1}, {6.5, 2.8, 4.6, 1.5, 2}, {6.5, 3.0, 5.8, 2.2, 3}, {5.4, 3.9, 1.7, 0.4, 1},
	}
	g := G.NewGraph()
	xy := func(name string, rs [][5]float64) (*G.Node, *G.Node) {
		var xs, ys []float64
		for _, r := range rs {
			xs = append(xs, r[0], r[1], r[2], r[3], 1)
			ys = append(ys, r[4])
		}
		X := G.NodeFromAny(g, tensor.New(tensor.WithShape(len(rs), 5), tensor.WithBacking(xs)), G.WithName(name))
		Y := G.NodeFromAny(g, tensor.New(tensor.WithShape(len(rs)), tensor.WithBacking(ys)), G.WithName(name+"y"))
		return X, Y
	}
	X, Y := xy("x", rows[:12])
	Xv, Yv := xy("xv", rows[12:])
	theta := G.NewVector(g, G.Float64, G.WithName("theta"), G.WithShape(5),
		G.WithValue(tensor.New(tensor.WithShape(5), tensor.WithBacking([]float64{0.1, -0.2, 0.3, 0.4, 0.5}))))
	mse := func(X, Y *G.Node) *G.Node {
		pred := G.Must(G.Mul(X, theta))
		return G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, Y))))))
	}
	cost := mse(X, Y)
	if _, err := G.Grad(cost, theta); err != nil {
		t.Fatalf("gorgonia's Grad, as the example calls it: %v", err)
	}
	lam := G.NewVector(g, G.Float64, G.WithShape(1), G.WithName("lambda"),
		G.WithValue(tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{-1}))))
	obj := graph.Objective{Upper: mse(Xv, Yv), Lower: G.Must(G.Add(cost, penalty(lam, theta))), Outer: []*G.Node{lam}, Inner: []*G.Node{theta},
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}}
	checkExample(t, obj, deterministic, []int{0, 4, 8, 11}, []int{1, 2})
}
