package main

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"gonum.org/v1/gonum/mat"
)

// Federated hyper-representation learning, paper 004 Sec. 6.2 (Fig. 2):
// a 2-layer MLP whose hidden layer (the representation, x) is learned on
// the clients' validation images and whose head (y) on their training
// images with the penalty 0.05‖y‖², on a non-iid split of MNIST.

// hrObjective is the objective of the hyper-representation model on the
// given images: models.MLP with ReLU units, no biases and μ = 0.1 (the
// paper's 0.05‖y‖²), its first layer drawn from the seed.
func hrObjective(train, val *data.Dataset, s split) (graph.Objective, error) {
	m, err := models.MLP(experiment.ModelData(train), experiment.ModelData(val), train.Classes,
		models.MLPSettings{Hidden: s.Hidden, Activation: models.ReLU, Mu: 0.1, Seed: s.Seed})
	if err != nil {
		return graph.Objective{}, err
	}
	return m.Objective, nil
}

// fedBatches returns the per-client batch sizes: c.Batch, or each
// client's whole data (0) when c.Batch exceeds the smallest client's.
func fedBatches(c config, cl *clients) (lower, upper int) {
	lower, upper = c.Batch, c.Batch
	for m := range cl.fed.Clients() {
		l, u := cl.fed.Sizes(m)
		if lower > l {
			lower = 0
		}
		if upper > u {
			upper = 0
		}
	}
	return lower, upper
}

// hrRuns builds the runs of Fig. 2: E-AiPOD for each p (left; p = 0.1 is
// the paper's, right) and FedNest (right), with the settings of paper 004
// Appendix F: E-AiPOD S = 20, α = 0.01, β = 0.05, N' = 5 Neumann terms;
// FedNest τ = 10 local inner steps and T = 1 (one round in ten inner
// steps, as p = 0.1), α = 0.01, β = 0.02, N' = 5; batches of 256 per
// client. The Neumann step is 1/L (L by Lanczos on the average objective).
func hrRuns(c config, cl *clients, test *data.Dataset, seed uint64) []namedRun {
	lb, ub := fedBatches(c, cl)
	eval := func(st *optim.State) map[string]float64 {
		loss, acc, _ := mlpScores(test, st.X, nil, st.Y, nil, c.Hidden)
		return rounds(st, map[string]float64{"test_acc": acc, "test_loss": loss})
	}
	s := optim.Settings{Seed: seed*7 + 2}
	b := experiment.Budget{Iters: c.Iters, Points: c.Points}
	x0, y0 := cl.x0, cl.y0
	var runs []namedRun
	for _, p := range fedPs(c, 0.1) {
		runs = append(runs, namedRun{name: fmt.Sprintf("E-AiPOD p=%g", p), p: cl.p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedEAiPOD{
			EAiPOD:  optim.EAiPOD{Alpha: 0.01, Beta: 0.05, S: 20, N: 6, Series: optim.NeumannPartialSum, P: p, T: 1, InnerBatch: lb, HessianBatch: lb, UpperBatch: ub},
			Clients: cl.fed}})
	}
	return append(runs, namedRun{name: "FedNest", p: cl.p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedNest{
		Alpha: 0.01, Beta: 0.02, InnerSteps: 10, N: 6, Series: optim.NeumannPartialSum, InnerBatch: lb, HessianBatch: lb, UpperBatch: ub,
		Clients: cl.fed}})
}

// fedPs returns the p of the sweep, with the paper's p of the comparison
// with FedNest added when missing.
func fedPs(c config, paper float64) []float64 {
	ps := append([]float64(nil), c.FedPs...)
	for _, p := range ps {
		if p == paper {
			return ps
		}
	}
	return append(ps, paper)
}

// mlpScores evaluates on ds the MLP with first layer w1 (d×h), head w2
// (h×k) and biases b1, b2 (nil: none) with ReLU hidden units: the mean
// cross-entropy, the accuracy and the class-balanced accuracy (the mean
// over the classes of each class's accuracy).
func mlpScores(ds *data.Dataset, w1, b1, w2, b2 []float64, h int) (loss, acc, balanced float64) {
	d, k := ds.D, ds.Classes
	var hid mat.Dense
	hid.Mul(mat.NewDense(ds.N, d, ds.X), mat.NewDense(d, h, w1))
	raw := hid.RawMatrix().Data
	for i, v := range raw {
		if b1 != nil {
			v += b1[i%h]
		}
		raw[i] = math.Max(v, 0)
	}
	var z mat.Dense
	z.Mul(&hid, mat.NewDense(h, k, w2))
	return experiment.SoftmaxScores(z.RawMatrix().Data, ds.Labels, b2, k)
}
