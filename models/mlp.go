package models

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
)

// Activation is the hidden layer's nonlinearity.
type Activation int

const (
	Tanh Activation = iota // tanh, smooth: the default
	ReLU                   // max(0, t); its second derivative is 0 almost everywhere
)

// MLPSettings configures MLP. Zero values mean the defaults.
type MLPSettings struct {
	// Hidden is the width h of the hidden layer (default 32).
	Hidden int
	// Activation is the hidden nonlinearity (default Tanh).
	Activation Activation
	// Mu is the weight μ > 0 of the inner penalty ½μ‖W2‖² (default 0.1,
	// the 0.05‖y‖² of paper 004's hyper-representation experiment).
	Mu float64
	// LearnPenalty makes log μ an outer variable (the penalty becomes
	// ½e^{log μ}(‖W2‖² + ‖b2‖²)), starting at the log of Mu.
	LearnPenalty bool
	// Bias adds the biases b1 ∈ R^h (outer) and b2 ∈ R^c (inner, penalized
	// with W2: ½μ(‖W2‖² + ‖b2‖²)).
	Bias bool
	// Seed seeds the initial first layer: W1 has N(0, 1/d) entries.
	Seed uint64
}

// MLPModel is a hyper-representation problem on a two-layer perceptron:
// the first layer is the outer variable, the last layer the inner one,
//
//	h(X) = a(XW1 + b1),
//	g = CE(h(X)W2 + b2, Y) + ½μ(‖W2‖² + ‖b2‖²),  f = CE(h(X')W2 + b2, Y'),
//
// as in paper 004's federated hyper-representation experiment (a 2-layer
// MLP whose representation layer is x and head y). g is strongly convex in
// the head for μ > 0; f and Φ are not convex in the representation. W2 and
// the biases start at 0.
type MLPModel struct {
	Model
	W1, B1 *G.Node // outer: d×h and 1×h (B1 nil without Settings.Bias)
	W2, B2 *G.Node // inner: h×c and 1×c (B2 nil without Settings.Bias)
	// LogMu is the outer scalar log μ of a learned penalty (nil without
	// Settings.LearnPenalty).
	LogMu *G.Node
}

// MLP returns the hyper-representation model with classes classes on train
// (lower level) and val (upper level), which need Labels.
func MLP(train, val Data, classes int, s MLPSettings) (*MLPModel, error) {
	if err := checkClasses(classes); err != nil {
		return nil, err
	}
	if err := train.checkLabels("training data", classes); err != nil {
		return nil, err
	}
	if err := val.checkLabels("validation data", classes); err != nil {
		return nil, err
	}
	if err := checkPair(train, val); err != nil {
		return nil, err
	}
	h, mu := s.Hidden, s.Mu
	if h == 0 {
		h = 32
	}
	if mu == 0 {
		mu = 0.1
	}
	switch {
	case h < 0:
		return nil, fmt.Errorf("models: MLP: Hidden = %d; want a positive width", s.Hidden)
	case !(mu > 0) || math.IsInf(mu, 1):
		return nil, fmt.Errorf("models: MLP: Mu = %v; want μ > 0", s.Mu)
	case s.Activation != Tanh && s.Activation != ReLU:
		return nil, fmt.Errorf("models: MLP: unknown Activation %d", s.Activation)
	}
	m := &MLPModel{}
	err := building("MLP", func() {
		d, c := train.D, classes
		rng := rand.New(rand.NewPCG(s.Seed, 0x3c1f))
		w1v := make([]float64, d*h)
		for i := range w1v {
			w1v[i] = rng.NormFloat64() / math.Sqrt(float64(d))
		}
		g := G.NewGraph()
		w1 := input(g, "W1", w1v, d, h)
		w2 := input(g, "W2", make([]float64, h*c), h, c)
		x := input(g, "X", train.X, train.N, d)
		y := input(g, "Y", oneHot(train.Labels, c), train.N, c)
		xv := input(g, "Xval", val.X, val.N, d)
		yv := input(g, "Yval", oneHot(val.Labels, c), val.N, c)
		outer, inner := []*G.Node{w1}, []*G.Node{w2}
		var b1, b2 *G.Node
		if s.Bias {
			b1 = input(g, "b1", make([]float64, h), 1, h)
			b2 = input(g, "b2", make([]float64, c), 1, c)
			outer, inner = append(outer, b1), append(inner, b2)
		}
		layer := func(x, w, b *G.Node) *G.Node {
			z := G.Must(G.Mul(x, w))
			if b != nil {
				z = G.Must(G.BroadcastAdd(z, b, nil, []byte{0}))
			}
			return z
		}
		act := G.Tanh
		if s.Activation == ReLU {
			act = G.Rectify
		}
		logits := func(x *G.Node) *G.Node {
			return layer(G.Must(act(layer(x, w1, b1))), w2, b2)
		}
		norm := sumSquares(w2)
		if b2 != nil {
			norm = G.Must(G.Add(norm, sumSquares(b2)))
		}
		var penalty *G.Node
		if s.LearnPenalty {
			m.LogMu = input(g, "logmu", []float64{math.Log(mu)})
			outer = append(outer, m.LogMu)
			penalty = scale(0.5, G.Must(G.Mul(G.Must(G.Exp(m.LogMu)), norm)))
		} else {
			penalty = scale(0.5*mu, norm)
		}
		lower := G.Must(G.Add(G.Must(graph.SoftmaxCrossEntropy(logits(x), y)), penalty))
		upper := G.Must(graph.SoftmaxCrossEntropy(logits(xv), yv))
		m.Objective = graph.Objective{Upper: upper, Lower: lower, Outer: outer, Inner: inner,
			UpperData: []*G.Node{xv, yv}, LowerData: []*G.Node{x, y}}
		m.Graph, m.W1, m.B1, m.W2, m.B2 = g, w1, b1, w2, b2
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
