package graph

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Randomness: gorgonia's Dropout and its random nodes (UniformRandomNode,
// GaussianRandomNode, BinomialRandomNode) draw new numbers at each run, so
// the function a gorgonia graph with them computes is different at each
// call. graph/ draws them as a deterministic function of the objective's
// seed (Objective.RandomSeed), the node and the samples of the batch, so
// that every oracle of one batch — value, gradient, Hessian-vector and
// mixed products — sees the same numbers, and finite differences of the
// value agree with the gradient.
//
// Element j of row r of a node whose axis 0 has as many entries as its
// level has samples (a dropout of activations, noise the shape of the
// data) is drawn for sample s = batch[r]; elements of other nodes are
// drawn for s = r (row r of the node: with no axis, r = 0). The draw is
//
//	U(seed, node, s, j, k) = mix(mix(mix(mix(mix(seed) ⊕ id) ⊕ s) ⊕ j) ⊕ k) / 2⁶⁴,
//
// top 53 bits, with id the node's gorgonia ID, k the index of the draw
// for the element (0 for one draw), ⊕ exclusive or, mix one step of
// SplitMix64 (the golden-ratio increment, then its finalizer). Dropout with probability p keeps element j when U < 1 − p,
// scaled by 1/(1 − p) as gorgonia does; a uniform node on [a, b) is
// a + (b − a)·U; a Gaussian node N(μ, σ) is μ + σ·√(−2 ln(1 − U₀))·cos(2πU₁);
// a binomial node of t trials with probability q counts the k < t with
// U_k < q.
//
// Problem.SetTraining(false) switches to evaluation, as gorgonia's
// TapeMachine with EvalMode does: Dropout is the identity and BatchNorm
// normalizes with its running statistics. Random nodes then hold their
// means (a + b)/2, μ, t·q (gorgonia's draw in evaluation too). gorgonia
// sets the mode of its operations whenever a machine is made, so graph/
// reads the mode from the Problem, not from the operations.

var opDropout, opRandom opKind

// Random distributions of opRandom (ints[4]).
const (
	randUniform = iota
	randGaussian
	randBinomial
)

// maxTrials bounds the trials of a binomial node.
const maxTrials = 1 << 12

func init() {
	opDropout = define(opDef{name: "dropout", arity: 2, // of args[0]; args[1] the batch's sample indices; eps: p; ints: see drawIndex
		shape: sameAsArg,
		f64:   dropoutInto[float64],
		f32:   dropoutInto[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node {
			if k > 0 {
				return nil
			}
			return b.add(&node{op: opDropout, args: []*node{g, n.args[1]}, eps: n.eps, ints: n.ints})
		},
	})
	opRandom = define(opDef{name: "random", arity: 1, constant: true, // args[0]: the batch's sample indices; ints: see drawIndex, then the distribution; data: its two parameters
		shape: func(n *node) []int { return n.shape },
		f64:   randomInto[float64],
		f32:   randomInto[float32],
	})
	recognize("dropoutOp", importRule{doc: "Dropout (a deterministic mask; see Objective.RandomSeed)",
		translate: translateDropout, remake: remakeRandom})
	recognize("randomOp", importRule{doc: "UniformRandomNode, GaussianRandomNode, BinomialRandomNode (deterministic draws; see Objective.RandomSeed)",
		check: func(op G.Op) error {
			if kind, t, _ := randomParams(op); kind == randBinomial {
				if !(t >= 0 && t <= maxTrials) {
					return fmt.Errorf("unsupported operation %s: binomial nodes of %v trials; graph/ draws up to %d", op, t, maxTrials)
				}
			}
			return nil
		},
		translate: translateRandom, remake: remakeRandom})
}

// drawIndex is what the ints of opDropout and opRandom hold: the seed in
// two halves, the node's gorgonia ID, and 1 when rows are samples.
type drawIndex struct {
	seed, node uint64
	perSample  bool
}

func (d drawIndex) ints() []int {
	return []int{int(d.seed & 0xffffffff), int(d.seed >> 32), int(d.node), b2i(d.perSample)}
}

func drawFrom(ints []int) drawIndex {
	return drawIndex{seed: uint64(ints[0]) | uint64(ints[1])<<32, node: uint64(ints[2]), perSample: ints[3] == 1}
}

// mix is one step of SplitMix64: the golden-ratio increment, then the
// finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// uniform is U(seed, node, s, j, k) of the file comment, in [0, 1).
func (d drawIndex) uniform(s, j, k uint64) float64 {
	h := mix(mix(mix(mix(mix(d.seed)^d.node)^s)^j) ^ k)
	return float64(h>>11) / (1 << 53)
}

// drawRows calls f(s, lo, hi) for each row of a node of the given shape:
// elements [lo, hi) drawn for sample s (idx holds the batch's samples)
// under the draws d.
func drawRows[T float](d drawIndex, shape []int, idx []T, f func(s uint64, lo, hi int)) {
	rows, size := 1, sizeOf(shape)
	if len(shape) > 0 {
		rows = shape[0]
	}
	row := size / max(rows, 1)
	for r := 0; r < rows; r++ {
		s := uint64(r)
		if d.perSample {
			s = uint64(idx[r])
		}
		f(s, r*row, (r+1)*row)
	}
}

// keepScale returns the factor of element j of sample s under dropout with
// probability p: 1/(1 − p) or 0.
func (d drawIndex) keepScale(s uint64, j int, p float64) float64 {
	if d.uniform(s, uint64(j), 0) < 1-p {
		return 1 / (1 - p)
	}
	return 0
}

// dropoutInto and randomInto draw in float64 and round to T; the sample
// indices read in float32 are exact below 2^24 (Compile checks them).
func dropoutInto[T float](n *node, out []T, in [][]T) {
	x := in[0]
	d := drawFrom(n.ints)
	drawRows(d, n.shape, in[1], func(s uint64, lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = T(float64(x[i]) * d.keepScale(s, i-lo, n.eps))
		}
	})
}

func randomInto[T float](n *node, out []T, in [][]T) {
	a, b, kind := n.data[0], n.data[1], n.ints[4]
	d := drawFrom(n.ints)
	drawRows(d, n.shape, in[0], func(s uint64, lo, hi int) {
		for i := lo; i < hi; i++ {
			j := uint64(i - lo)
			switch kind {
			case randUniform:
				out[i] = T(a + (b-a)*d.uniform(s, j, 0))
			case randGaussian:
				out[i] = T(a + b*math.Sqrt(-2*math.Log(1-d.uniform(s, j, 0)))*math.Cos(2*math.Pi*d.uniform(s, j, 1)))
			default:
				c := 0.0
				for k := 0; k < int(a); k++ {
					if d.uniform(s, j, uint64(k)) < b {
						c++
					}
				}
				out[i] = T(c)
			}
		}
	})
}

// perSampleRows reports whether rows of gorgonia's node n, translated with
// leading size rows, follow the samples of the batch: n's axis 0 has as
// many entries as the level has samples.
func (im *importer) perSampleRows(n *G.Node) bool {
	s := n.Shape()
	return len(s) > 0 && s[0] == im.samples && im.index != nil
}

func translateDropout(im *importer, n *G.Node, a []*node) *node {
	p := dropoutProbability(n.Op())
	if !im.training || p == 0 {
		return a[0]
	}
	if !(p > 0 && p < 1) {
		importPanic("dropout probability %v; want 0 ≤ p < 1", p)
	}
	idx := im.sampleIndex()
	d := drawIndex{seed: im.seed, node: uint64(n.ID()), perSample: im.perSampleRows(n)}
	if d.perSample && (len(a[0].shape) == 0 || a[0].shape[0] != idx.size) {
		shapePanic("dropout of shape %v in a batch of %d samples", a[0].shape, idx.size)
	}
	return im.b.add(&node{op: opDropout, args: []*node{a[0], idx}, eps: p, ints: d.ints()})
}

func translateRandom(im *importer, n *G.Node, a []*node) *node {
	kind, pa, pb := randomParams(n.Op())
	idx := im.sampleIndex()
	d := drawIndex{seed: im.seed, node: uint64(n.ID()), perSample: im.perSampleRows(n)}
	shape := cloneInts(n.Shape())
	if d.perSample {
		shape[0] = idx.size
	}
	if !im.training {
		mean := [...]float64{randUniform: (pa + pb) / 2, randGaussian: pa, randBinomial: math.Trunc(pa) * pb}[kind]
		return im.b.broadcast(im.b.reshape(im.b.scalar(mean), ones(len(shape))), shape)
	}
	return im.b.add(&node{op: opRandom, args: []*node{idx}, shape: shape,
		ints: append(d.ints(), kind), data: []float64{pa, pb}})
}

// remakeRandom makes, for the translation check's copy of the graph, a
// gorgonia node with graph/'s numbers in place of gorgonia's own draws: a
// constant of graph/'s draws for a random node, the product of the input
// with graph/'s dropout mask for a Dropout in training (its input in
// evaluation). The user's operation is not put in the copy, whose machine
// would set its mode.
func remakeRandom(c *checkGraph, n *G.Node, args, cargs []*G.Node) (*G.Node, error) {
	isDropout := typeName(n.Op()) == "dropoutOp"
	if isDropout && (!c.p.training || dropoutProbability(n.Op()) == 0) {
		return cargs[0], nil
	}
	b := newBuilder()
	im := c.p.checkImporter(b, c.lv, c.rows)
	var vals []float64
	shape := []int(n.Shape())
	if isDropout {
		shape = []int(cargs[0].Shape())
		ones := b.filled(shape, 1)
		im.ir[args[0]] = ones
		vals = evaluate(translateDropout(im, n, []*node{ones}))
	} else {
		r := translateRandom(im, n, nil)
		shape, vals = r.shape, evaluate(r)
	}
	name := G.WithName(fmt.Sprintf("draws%d", len(c.copies)))
	if len(shape) == 0 {
		return G.NewScalar(c.g, G.Float64, name, G.WithValue(vals[0])), nil
	}
	mask := G.NewTensor(c.g, G.Float64, len(shape), G.WithShape(shape...), name,
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))))
	if isDropout {
		return G.HadamardProd(cargs[0], mask)
	}
	return mask, nil
}

// evaluate computes the values of n, a node of constants.
func evaluate(n *node) []float64 {
	pr := compile([]*node{n}, nil, false)
	pr.run()
	return append([]float64{}, pr.out(0)...)
}

// ones returns k ones, the shape of a single element of rank k.
func ones(k int) []int {
	s := make([]int, k)
	for i := range s {
		s[i] = 1
	}
	return s
}

// SetTraining switches the problem between training (the default:
// Dropout masks, random draws, BatchNorm's batch statistics) and
// evaluation (Dropout is the identity, random nodes hold their means,
// BatchNorm uses its running statistics as they are now), as gorgonia's
// EvalMode does, for the oracle calls that follow; a Linearization or
// FixedX keeps the mode it was made in. The oracles are compiled again,
// and their translation verified against gorgonia's forward pass in the
// new mode, as Compile does.
func (p *Problem) SetTraining(on bool) error {
	if on == p.training {
		return nil
	}
	p.training = on
	p.worlds = map[worldKey]*world{}
	for lv := range p.levels {
		if _, err := p.world(lv, -1); err != nil {
			return err
		}
	}
	_, err := p.verify(p.x0, p.y0, [2][]int{})
	return err
}
