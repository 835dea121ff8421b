package models

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
)

// CleaningSettings configures HyperCleaning. Zero values mean the
// defaults.
type CleaningSettings struct {
	// Cr is the weight C_r > 0 of C_r‖W‖² (default 0.001, paper 003's
	// value after Shaban et al. 2019).
	Cr float64
	// Bias adds an intercept b ∈ R^c to the logits, an inner variable
	// penalized with W: C_r(‖W‖² + ‖b‖²).
	Bias bool
	// Offset and Samples make the model a shard of a larger training set
	// (a worker's part in package dist): train holds the training samples
	// Offset, …, Offset+N−1 of Samples in all; λ keeps all Samples
	// entries, and each sample's weight is read at its global index. 0
	// and 0 mean the whole set (Offset 0, Samples N).
	Offset, Samples int
}

// CleaningModel is data hyper-cleaning, paper 003 (Ji, Yang, Liang 2021),
// App. B (shared/papers/003_1679196860c98ae9.txt, L487-491; also paper 002,
// §4.3, shared/papers/002_c6d05c6ad678f1f0.txt, L396): a linear
// classifier trained on corrupted labels with a learned weight σ(λ_i) per
// training sample,
//
//	g(λ, W) = mean_i σ(λ_i) CE(x_iᵀW, y_i) + C_r‖W‖²,  f(λ, W) = CE(X'W, Y'),
//
// with W ∈ R^{d×c} and λ ∈ R^n, n the number of training samples (all of
// them, CleaningSettings.Samples, when train is a shard of them). The
// weights are gathered by sample index (graph.Gather on a graph.SampleIndex
// data node), so an oracle on a batch of training samples reads and
// differentiates exactly the batch's λ_i. λ starts at 0 (every weight ½), W
// and b at 0.
type CleaningModel struct {
	Model
	Lambda *G.Node // λ, n
	W      *G.Node // W, d×c
	B      *G.Node // b, 1×c (nil without Settings.Bias)
	// Index is the lower-level data node holding the training samples'
	// indices.
	Index *G.Node
	// Cr is the penalty weight C_r used.
	Cr float64
}

// HyperCleaning returns the hyper-cleaning model with classes classes on
// train (lower level; its labels are the corrupted ones) and val (upper
// level), which need Labels.
func HyperCleaning(train, val Data, classes int, s CleaningSettings) (*CleaningModel, error) {
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
	cr := s.Cr
	switch {
	case cr == 0:
		cr = 0.001
	case !(cr > 0) || math.IsInf(cr, 1):
		return nil, fmt.Errorf("models: HyperCleaning: Cr = %v; want C_r > 0", s.Cr)
	}
	total := s.Samples
	if total == 0 {
		total = train.N
	}
	if s.Offset < 0 || s.Offset+train.N > total {
		return nil, fmt.Errorf("models: HyperCleaning: Offset = %d and Samples = %d for %d training samples; want 0 ≤ Offset ≤ Samples − %d", s.Offset, s.Samples, train.N, train.N)
	}
	m := &CleaningModel{Cr: cr}
	err := building("hyper-cleaning", func() {
		n, d, c := train.N, train.D, classes
		g := G.NewGraph()
		lambda := input(g, "lambda", make([]float64, total), total)
		w := input(g, "W", make([]float64, d*c), d, c)
		var idx *G.Node
		if total == n {
			idx = graph.SampleIndex(g, "sample", n)
		} else {
			global := make([]float64, n)
			for i := range global {
				global[i] = float64(s.Offset + i)
			}
			idx = input(g, "sample", global, n)
		}
		x := input(g, "X", train.X, n, d)
		y := input(g, "Y", oneHot(train.Labels, c), n, c)
		xv := input(g, "Xval", val.X, val.N, d)
		yv := input(g, "Yval", oneHot(val.Labels, c), val.N, c)
		inner := []*G.Node{w}
		var b *G.Node
		if s.Bias {
			b = input(g, "b", make([]float64, c), 1, c)
			inner = append(inner, b)
		}
		logits := func(x *G.Node) *G.Node {
			z := G.Must(G.Mul(x, w))
			if b != nil {
				z = G.Must(G.BroadcastAdd(z, b, nil, []byte{0}))
			}
			return z
		}
		// Per-sample cross-entropies CE_i = −Σ_k Y_ik log softmax(z_i)_k,
		// weighted by σ(λ_i) for the batch's samples i.
		logp := G.Must(graph.LogSoftmax(logits(x), 1))
		ce := G.Must(G.Neg(G.Must(G.Sum(G.Must(G.HadamardProd(y, logp)), 1))))
		weights := G.Must(G.Sigmoid(G.Must(graph.Gather(lambda, idx))))
		loss := G.Must(G.Mean(G.Must(G.HadamardProd(weights, ce))))
		norm := sumSquares(w)
		if b != nil {
			norm = G.Must(G.Add(norm, sumSquares(b)))
		}
		lower := G.Must(G.Add(loss, scale(cr, norm)))
		upper := G.Must(graph.SoftmaxCrossEntropy(logits(xv), yv))
		m.Objective = graph.Objective{Upper: upper, Lower: lower,
			Outer: []*G.Node{lambda}, Inner: inner,
			UpperData: []*G.Node{xv, yv}, LowerData: []*G.Node{idx, x, y}}
		m.Graph, m.Lambda, m.W, m.B, m.Index = g, lambda, w, b, idx
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
