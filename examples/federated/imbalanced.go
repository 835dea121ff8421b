package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/optim"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Federated learning from imbalanced data, paper 004 Sec. 6.3 (Fig. 3):
// the vector-scaling loss of Kini et al. (2021),
//
//	f_vs(x, y; D) = −(1/|D|) Σ_n ω_{l_n} log softmax(δ ⊙ h(y; d_n) + τ)_{l_n},
//
// with the network weights y (a 2-layer MLP with biases: the whole network
// is the lower variable, so the lower level is not convex) trained on the
// clients' imbalanced training images, and the loss-tuning parameters
// x = (δ, τ) ∈ R^C × R^C on their validation images by f_vs with δ = 1,
// τ = 0. As in the companion code (imbalance/main_imbalance.py) ω is fixed,
// ω_c ∝ μ^{−c} for the class sizes ∝ μ^c, here normalized to mean 1; δ
// starts at 1 and τ at 0 (the paper's parameterization; the companion code
// scales by sigmoid(δ) from δ = 0).

// vsWeights returns ω: μ^{−c} over its mean, μ = ratio^(−1/(k−1)).
func vsWeights(k int, ratio float64) []float64 {
	mu := math.Pow(ratio, -1/float64(k-1))
	w := make([]float64, k)
	var sum float64
	for c := range w {
		w[c] = math.Pow(mu, -float64(c))
		sum += w[c]
	}
	for c := range w {
		w[c] *= float64(k) / sum
	}
	return w
}

// vsObjective is the objective of Fig. 3 on the given images: lower f_vs
// on train, upper f_vs with δ = 1, τ = 0 on val. The network's layers are
// drawn from the seed (Glorot-uniform weights, zero biases).
func vsObjective(train, val *data.Dataset, s split) (graph.Objective, error) {
	d, h, k := train.D, s.Hidden, train.Classes
	rng := rand.New(rand.NewPCG(s.Seed, 0xe5))
	glorot := func(r, c int) []float64 {
		a := math.Sqrt(6 / float64(r+c))
		w := make([]float64, r*c)
		for i := range w {
			w[i] = a * (2*rng.Float64() - 1)
		}
		return w
	}
	omega := vsWeights(k, s.Ratio)
	targets := func(ds *data.Dataset) []float64 {
		t := make([]float64, ds.N*k)
		for i, l := range ds.Labels {
			t[i*k+l] = omega[l]
		}
		return t
	}
	ones := make([]float64, k)
	for i := range ones {
		ones[i] = 1
	}
	g := G.NewGraph()
	w1, b1 := vsNode(g, "W1", glorot(d, h), d, h), vsNode(g, "b1", make([]float64, h), 1, h)
	w2, b2 := vsNode(g, "W2", glorot(h, k), h, k), vsNode(g, "b2", make([]float64, k), 1, k)
	delta, tau := vsNode(g, "delta", ones, 1, k), vsNode(g, "tau", make([]float64, k), 1, k)
	x, t := vsNode(g, "X", train.X, train.N, d), vsNode(g, "T", targets(train), train.N, k)
	xv, tv := vsNode(g, "Xval", val.X, val.N, d), vsNode(g, "Tval", targets(val), val.N, k)
	logits := func(x *G.Node) *G.Node {
		hid := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
		return G.Must(G.BroadcastAdd(G.Must(G.Mul(hid, w2)), b2, nil, []byte{0}))
	}
	scaled := G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(logits(x), delta, nil, []byte{0})), tau, nil, []byte{0}))
	lower, err := graph.SoftmaxCrossEntropy(scaled, t)
	if err != nil {
		return graph.Objective{}, err
	}
	upper, err := graph.SoftmaxCrossEntropy(logits(xv), tv)
	if err != nil {
		return graph.Objective{}, err
	}
	return graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{delta, tau}, Inner: []*G.Node{w1, b1, w2, b2},
		UpperData: []*G.Node{xv, tv}, LowerData: []*G.Node{x, t}}, nil
}

func vsNode(g *G.ExprGraph, name string, v []float64, shape ...int) *G.Node {
	tt := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))
	return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(tt))
}

// vsRuns builds the runs of Fig. 3: E-AiPOD for each p (left; p = 0.3 is
// the paper's, right) and FedNest (right), with the settings of paper 004
// Appendix F: E-AiPOD S = 20, α = 0.01, β = 0.04, N' = 3 Neumann terms;
// FedNest τ = 3 local inner steps and T = 3 (one round in three inner
// steps, as p = 0.3), α = 0.01, β = 0.02, N' = 3; batches of 256 per
// client. The Neumann step is 1/L (L by Lanczos on the average objective).
func vsRuns(c config, cl *clients, test *data.Dataset, seed uint64) []namedRun {
	lb, ub := fedBatches(c, cl)
	h, k := c.Hidden, test.Classes
	eval := func(st *optim.State) map[string]float64 {
		d := test.D
		y := st.Y
		w1, b1 := y[:d*h], y[d*h:d*h+h]
		w2, b2 := y[d*h+h:d*h+h+h*k], y[d*h+h+h*k:]
		loss, acc, bal := mlpScores(test, w1, b1, w2, b2, h)
		return rounds(st, map[string]float64{"test_acc": acc, "test_loss": loss, "balanced_acc": bal})
	}
	s := optim.Settings{Seed: seed*7 + 3}
	b := experiment.Budget{Iters: c.Iters, Points: c.Points}
	x0, y0 := cl.x0, cl.y0
	var runs []namedRun
	for _, p := range fedPs(c, 0.3) {
		runs = append(runs, namedRun{name: fmt.Sprintf("E-AiPOD p=%g", p), p: cl.p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedEAiPOD{
			EAiPOD:  optim.EAiPOD{Alpha: 0.01, Beta: 0.04, S: 20, N: 4, Series: optim.NeumannPartialSum, P: p, T: 1, InnerBatch: lb, HessianBatch: lb, UpperBatch: ub},
			Clients: cl.fed}})
	}
	return append(runs, namedRun{name: "FedNest", p: cl.p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedNest{
		Alpha: 0.01, Beta: 0.02, T: 3, InnerSteps: 3, N: 4, Series: optim.NeumannPartialSum, InnerBatch: lb, HessianBatch: lb, UpperBatch: ub,
		Clients: cl.fed}})
}
