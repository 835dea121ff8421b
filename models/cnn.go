package models

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CNNSettings configures CNN. Zero values mean the defaults, which are the
// backbone of paper 003, App. A, on 28×28 grey images.
type CNNSettings struct {
	// Side is the side of the square grey input images (default 28).
	Side int
	// Blocks is the number of convolution blocks (default 4).
	Blocks int
	// Filters is the number of 3×3 filters of every convolution (default
	// 32, the paper's miniImageNet setting).
	Filters int
	// Lambda is λ of the head penalty (λ/2)(‖W‖² + ‖b‖²) (default 0.1). It
	// makes g strongly convex in the head. A negative value means λ = 0,
	// ANIL's unregularized inner loss, for which g is only convex.
	Lambda float64
	// Eps is ε of batch normalization, added to the variance (default 1e-5).
	Eps float64
	// NoBias drops the head's bias b: the head is W alone.
	NoBias bool
	// Seed seeds the initial filters, drawn N(0, 2/fan-in) (He et al.).
	Seed uint64
}

func (s CNNSettings) withDefaults() (CNNSettings, error) {
	if s.Side == 0 {
		s.Side = 28
	}
	if s.Blocks == 0 {
		s.Blocks = 4
	}
	if s.Filters == 0 {
		s.Filters = 32
	}
	switch {
	case s.Lambda == 0:
		s.Lambda = 0.1
	case s.Lambda < 0:
		s.Lambda = 0
	}
	if s.Eps == 0 {
		s.Eps = 1e-5
	}
	switch {
	case s.Side < 2:
		return s, fmt.Errorf("models: CNN: Side = %d; want images of at least 2×2 pixels", s.Side)
	case s.Blocks < 1:
		return s, fmt.Errorf("models: CNN: Blocks = %d; want at least one block", s.Blocks)
	case s.Side>>s.Blocks < 1:
		return s, fmt.Errorf("models: CNN: %d blocks of 2×2 pooling reduce %d×%d images to nothing; use at most %d blocks",
			s.Blocks, s.Side, s.Side, int(math.Log2(float64(s.Side))))
	case s.Filters < 1:
		return s, fmt.Errorf("models: CNN: Filters = %d; want at least one", s.Filters)
	case math.IsNaN(s.Lambda) || math.IsInf(s.Lambda, 1):
		return s, fmt.Errorf("models: CNN: Lambda = %v; want a finite λ > 0 (or < 0 for λ = 0)", s.Lambda)
	case !(s.Eps > 0) || math.IsInf(s.Eps, 1):
		return s, fmt.Errorf("models: CNN: Eps = %v; want a finite ε > 0", s.Eps)
	}
	return s, nil
}

// CNNFeatures returns the number of features the backbone of s produces
// per image: Filters·side², side = Side halved (rounding down) Blocks
// times; 32 for the defaults (28 → 14 → 7 → 3 → 1).
func CNNFeatures(s CNNSettings) (int, error) {
	s, err := s.withDefaults()
	if err != nil {
		return 0, err
	}
	side := s.Side >> s.Blocks
	return s.Filters * side * side, nil
}

// CNNModel is the few-shot meta-learning problem of paper 003, §5 and
// App. A (shared/papers/003_1679196860c98ae9.txt, L319-360 and L455-471):
// a shared embedding φ and, per task, a linear head fit on the support set,
//
//	g(φ, (W, b)) = CE(h_φ(X_s)W + b, Y_s) + (λ/2)(‖W‖² + ‖b‖²),
//	f(φ, (W, b)) = CE(h_φ(X_q)W + b, Y_q),
//
// with (X_s, Y_s) the support images and one-hot labels (the lower-level
// data), (X_q, Y_q) the query set (the upper-level data) and h_φ the
// backbone: Blocks blocks of a 3×3 convolution with Filters filters and
// padding 1 (no bias: batch normalization removes it), batch normalization,
// ReLU and 2×2 max pooling, flattened to CNNFeatures features. The outer
// variable x = φ is, block after block, the filters (Filters × channels ×
// 3 × 3) and the normalization scale γ and shift β (Filters each); the
// inner variable y is W (features × ways) and b (1 × ways).
//
// Batch normalization is in training mode, graph.BatchNorm (gorgonia's
// BatchNorm op is not supported):
//
//	BN(a)_{ncij} = γ_c (a_{ncij} − μ_c) / √(σ²_c + ε) + β_c,
//
// μ_c and σ²_c the mean and (biased) variance of channel c over the batch
// and spatial axes of the images the objective is evaluated on: the
// support set for g, the query set for f. The statistics therefore depend
// on the batch, like the cross-entropy's mean.
//
// The filters start N(0, 2/(9·channels)), γ at 1, β, W and b at 0.
type CNNModel struct {
	Model
	Backbone
	// W (features × ways) and B (1 × ways, nil with NoBias) are the head
	// (inner).
	W, B *G.Node
	// Support, SupportY, Query and QueryY are the data nodes: images
	// (samples × 1 × side × side) and one-hot labels (samples × ways). Use
	// graph.Problem.SetData on them to switch tasks (see OneHot).
	Support, SupportY, Query, QueryY *G.Node
	// Features is the backbone's output dimension, Ways the number of
	// classes of a task.
	Features, Ways int
}

// CNN returns the meta-learning model of ways-way tasks with the given
// support (lower level) and query (upper level) sets, whose X holds
// row-major side×side images (D = Side²) and whose Labels lie in
// [0, ways). The sets are the model's first task; later tasks of the same
// sizes are swapped in with graph.Problem.SetData.
func CNN(support, query Data, ways int, s CNNSettings) (*CNNModel, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkClasses(ways); err != nil {
		return nil, err
	}
	if err := support.checkLabels("support set", ways); err != nil {
		return nil, err
	}
	if err := query.checkLabels("query set", ways); err != nil {
		return nil, err
	}
	if err := checkPair(support, query); err != nil {
		return nil, err
	}
	if support.D != s.Side*s.Side {
		return nil, fmt.Errorf("models: CNN: samples of %d values; want %d×%d images (set CNNSettings.Side)", support.D, s.Side, s.Side)
	}
	feats, _ := CNNFeatures(s)
	m := &CNNModel{Features: feats, Ways: ways}
	m.Settings = s
	err = building("CNN", func() {
		g := G.NewGraph()
		outer := m.vars(g)
		m.W = input(g, "W", make([]float64, feats*ways), feats, ways)
		inner := []*G.Node{m.W}
		if !s.NoBias {
			m.B = input(g, "b", make([]float64, ways), 1, ways)
			inner = append(inner, m.B)
		}
		m.Support = input(g, "Xs", support.X, support.N, 1, s.Side, s.Side)
		m.SupportY = input(g, "Ys", OneHot(nil, support.Labels, ways), support.N, ways)
		m.Query = input(g, "Xq", query.X, query.N, 1, s.Side, s.Side)
		m.QueryY = input(g, "Yq", OneHot(nil, query.Labels, ways), query.N, ways)
		lower, upper := headObjectives(m.embed(m.Support), m.SupportY, m.embed(m.Query), m.QueryY, m.W, m.B, s.Lambda)
		m.Graph = g
		m.Objective = graph.Objective{Upper: upper, Lower: lower, Outer: outer, Inner: inner,
			LowerData: []*G.Node{m.Support, m.SupportY}, UpperData: []*G.Node{m.Query, m.QueryY}}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// headObjectives returns g = CE(F_s W + b, Y_s) + (λ/2)(‖W‖² + ‖b‖²) and
// f = CE(F_q W + b, Y_q); b may be nil.
func headObjectives(fs, ys, fq, yq, w, b *G.Node, lambda float64) (lower, upper *G.Node) {
	logits := func(f *G.Node) *G.Node {
		z := G.Must(G.Mul(f, w))
		if b != nil {
			z = G.Must(G.BroadcastAdd(z, b, nil, []byte{0}))
		}
		return z
	}
	lower = G.Must(graph.SoftmaxCrossEntropy(logits(fs), ys))
	if lambda > 0 {
		norm := sumSquares(w)
		if b != nil {
			norm = G.Must(G.Add(norm, sumSquares(b)))
		}
		lower = G.Must(G.Add(lower, scale(lambda/2, norm)))
	}
	return lower, G.Must(graph.SoftmaxCrossEntropy(logits(fq), yq))
}

// Backbone is the embedding h_φ shared by CNN and CNNEmbedding: its
// outer variables, per block, and the settings they were made with.
type Backbone struct {
	// Conv, Scale and Shift hold, per block, the filters (Filters ×
	// channels × 3 × 3), γ and β (Filters each): the outer variables, in
	// this order block after block.
	Conv, Scale, Shift []*G.Node
	// Settings holds the settings with the defaults filled in.
	Settings CNNSettings
}

// vars creates the outer variables on g, block after block the filters,
// γ and β, with their initial values, and returns them in the order of x.
func (m *Backbone) vars(g *G.ExprGraph) []*G.Node {
	s := m.Settings
	rng := rand.New(rand.NewPCG(s.Seed, 0xc0a7))
	var outer []*G.Node
	in := 1
	for k := 0; k < s.Blocks; k++ {
		fan := 9 * in
		w := make([]float64, s.Filters*fan)
		for i := range w {
			w[i] = rng.NormFloat64() * math.Sqrt(2/float64(fan))
		}
		gamma := make([]float64, s.Filters)
		for i := range gamma {
			gamma[i] = 1
		}
		conv := input(g, fmt.Sprintf("conv%d", k+1), w, s.Filters, in, 3, 3)
		scale := input(g, fmt.Sprintf("gamma%d", k+1), gamma, s.Filters)
		shift := input(g, fmt.Sprintf("beta%d", k+1), make([]float64, s.Filters), s.Filters)
		m.Conv, m.Scale, m.Shift = append(m.Conv, conv), append(m.Scale, scale), append(m.Shift, shift)
		outer = append(outer, conv, scale, shift)
		in = s.Filters
	}
	return outer
}

// CNNEmbeddingModel is the probe of CNNEmbedding.
type CNNEmbeddingModel struct {
	Model
	Backbone
	// E is the inner variable (images × Features) and Images the data node
	// (images × 1 × side × side).
	E, Images *G.Node
	// Features is the backbone's output dimension.
	Features int
}

// CNNEmbedding returns a probe that reads the backbone's features through
// compiled oracles: a problem on the same outer variables as CNN (same
// names, shapes, order and initial values for equal settings, so the same
// x serves both) with inner variable E (images.N × features) and
//
//	f(φ, E) = Σ E ⊙ h_φ(X),   g(φ, E) = ½‖E‖²,
//
// X = images.X the upper-level data (Images). Whatever E, ∇E f = h_φ(X):
// GradF(nil, dy, x, y, nil) writes the features of the images, one row
// each, into dy. The bilevel problem itself means nothing. Batch
// normalization uses the statistics of the images given, as CNN's f and g
// do of the query and support sets, so the features of a task's query
// set are those the upper objective of CNN sees. The head settings
// (Lambda, NoBias) are ignored.
func CNNEmbedding(images Data, s CNNSettings) (*CNNEmbeddingModel, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := images.checkX("images"); err != nil {
		return nil, err
	}
	if images.D != s.Side*s.Side {
		return nil, fmt.Errorf("models: CNNEmbedding: samples of %d values; want %d×%d images (set CNNSettings.Side)", images.D, s.Side, s.Side)
	}
	feats, _ := CNNFeatures(s)
	m := &CNNEmbeddingModel{Features: feats}
	m.Settings = s
	err = building("CNN embedding", func() {
		g := G.NewGraph()
		outer := m.vars(g)
		m.E = input(g, "E", make([]float64, images.N*feats), images.N, feats)
		m.Images = input(g, "X", images.X, images.N, 1, s.Side, s.Side)
		upper := G.Must(G.Sum(G.Must(G.HadamardProd(m.E, m.embed(m.Images)))))
		m.Graph = g
		m.Objective = graph.Objective{Upper: upper, Lower: scale(0.5, sumSquares(m.E)), Outer: outer, Inner: []*G.Node{m.E},
			UpperData: []*G.Node{m.Images}}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// embed writes the backbone h_φ on images x (n × 1 × side × side) and
// returns the n × Features matrix of features. Each convolution is
// written, as gorgonia's Conv2d does, as im2col followed by a product with
// the flattened filters; batch normalization and ReLU are applied to that
// product, an (n·h·w) × Filters matrix with one row per pixel, where every
// broadcast is along rows, before the transpose back to
// n × Filters × h × w that pooling and the next im2col read.
func (m *Backbone) embed(x *G.Node) *G.Node {
	a := x
	for k, conv := range m.Conv {
		col := G.Must(G.Im2Col(a, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		s := col.Shape() // n × h × w × (channels·9)
		n, h, w, c := s[0], s[1], s[2], m.Settings.Filters
		patches := G.Must(G.Reshape(col, tensor.Shape{n * h * w, s[3]}))
		filters := G.Must(G.Reshape(conv, tensor.Shape{c, s[3]}))
		z := G.Must(G.Mul(patches, G.Must(G.Transpose(filters))))
		z = G.Must(graph.BatchNorm(z, m.Scale[k], m.Shift[k], m.Settings.Eps))
		z = G.Must(G.Rectify(z))
		z = G.Must(G.Transpose(G.Must(G.Reshape(z, tensor.Shape{n, h, w, c})), 0, 3, 1, 2))
		a = G.Must(G.MaxPool2D(z, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	}
	sh := a.Shape()
	return G.Must(G.Reshape(a, tensor.Shape{sh[0], sh[1] * sh[2] * sh[3]}))
}

// OneHot writes the n × classes one-hot rows of labels into dst, reusing
// its storage when it has that length, and returns it: the values of the
// label nodes SupportY and QueryY.
func OneHot(dst []float64, labels []int, classes int) []float64 {
	n := len(labels) * classes
	if len(dst) != n {
		dst = make([]float64, n)
	} else {
		clear(dst)
	}
	for i, l := range labels {
		dst[i*classes+l] = 1
	}
	return dst
}

// CNNHeadModel is the head problem of CNN with the features as the outer
// variable: for support features F_s (support × features) and query
// features F_q (query × features),
//
//	g(F, (W, b)) = CE(F_s W + b, Y_s) + (λ/2)(‖W‖² + ‖b‖²),
//	f(F, (W, b)) = CE(F_q W + b, Y_q),
//
// x = F = (F_s, F_q) and y = (W, b) in CNN's layout. By the chain rule,
// CNN's oracles in φ are those of the head model in F followed by the
// vector-Jacobian product of the backbone, F ↦ h_φ(X): for instance
// ∇φ∇y g·v = J_φ(h_φ(X_s))ᵀ (∇F_s∇y g·v), which CNNEmbedding's ∇x f
// computes at E = ∇F_s∇y g·v. Every second-order operation then touches
// only the head, and the backbone is run once forward and once backward
// per set of images, whatever the number of inner steps.
//
// The labels are data (Ys and Yq, one-hot); the features, being
// variables, do not follow minibatches, so the oracles must be evaluated
// on all samples (nil batches).
type CNNHeadModel struct {
	Model
	Fs, Fq   *G.Node // outer: support × features, query × features
	W, B     *G.Node // inner: features × ways, 1 × ways (B nil with NoBias)
	Ys, Yq   *G.Node // data: one-hot labels
	Features int
	Ways     int
	Lambda   float64
}

// CNNHead returns the head model for ways-way tasks with the given
// support and query labels (in [0, ways)) and features features per image;
// s supplies Lambda and NoBias. The features start at 0: set them with
// the x given to the oracles.
func CNNHead(supportLabels, queryLabels []int, ways, features int, s CNNSettings) (*CNNHeadModel, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkClasses(ways); err != nil {
		return nil, err
	}
	if features < 1 {
		return nil, fmt.Errorf("models: CNNHead: %d features; want at least one", features)
	}
	for _, set := range []struct {
		what   string
		labels []int
	}{{"support", supportLabels}, {"query", queryLabels}} {
		if len(set.labels) == 0 {
			return nil, fmt.Errorf("models: CNNHead: empty %s set", set.what)
		}
		for i, l := range set.labels {
			if l < 0 || l >= ways {
				return nil, fmt.Errorf("models: CNNHead: label %d of %s sample %d is outside [0, %d)", l, set.what, i, ways)
			}
		}
	}
	ns, nq := len(supportLabels), len(queryLabels)
	m := &CNNHeadModel{Features: features, Ways: ways, Lambda: s.Lambda}
	err = building("CNN head", func() {
		g := G.NewGraph()
		m.Fs = input(g, "Fs", make([]float64, ns*features), ns, features)
		m.Fq = input(g, "Fq", make([]float64, nq*features), nq, features)
		m.W = input(g, "W", make([]float64, features*ways), features, ways)
		inner := []*G.Node{m.W}
		if !s.NoBias {
			m.B = input(g, "b", make([]float64, ways), 1, ways)
			inner = append(inner, m.B)
		}
		m.Ys = input(g, "Ys", OneHot(nil, supportLabels, ways), ns, ways)
		m.Yq = input(g, "Yq", OneHot(nil, queryLabels, ways), nq, ways)
		lower, upper := headObjectives(m.Fs, m.Ys, m.Fq, m.Yq, m.W, m.B, s.Lambda)
		m.Graph = g
		m.Objective = graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{m.Fs, m.Fq}, Inner: inner,
			LowerData: []*G.Node{m.Ys}, UpperData: []*G.Node{m.Yq}}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
