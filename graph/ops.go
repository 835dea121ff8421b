package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds the gorgonia operations graph/ adds for what gorgonia
// cannot differentiate twice or does not have. Each is an ordinary gorgonia
// Op (so gorgonia's own machines can evaluate it) that the importer maps to
// IR; its derivatives are the IR rules of diff.go.

// LogSoftmax returns the log-softmax of x along axis (negative counts from
// the end): x − log Σ_axis exp(x), computed stably. Unlike gorgonia's
// LogSoftMax it can be differentiated any number of times by graph/.
func LogSoftmax(x *G.Node, axis int) (*G.Node, error) {
	d := x.Dims()
	if a := normAxis(axis, d); a < 0 || a >= d {
		return nil, fmt.Errorf("graph: LogSoftmax along axis %d of %s with shape %v", axis, nodeName(x), x.Shape())
	}
	return G.ApplyOp(logSoftmaxOp{axis: normAxis(axis, d), dims: d}, x)
}

// SoftmaxCrossEntropy returns the mean over rows of the cross-entropy
// −Σ_j targets_ij log softmax(logits)_ij, for logits and targets of shape
// (samples, classes); targets are one-hot rows or probabilities. The mean
// divides by the number of rows of the batch the graph is evaluated on.
func SoftmaxCrossEntropy(logits, targets *G.Node) (*G.Node, error) {
	if logits.Dims() != 2 || !logits.Shape().Eq(targets.Shape()) {
		return nil, fmt.Errorf("graph: SoftmaxCrossEntropy of logits %s with shape %v and targets %s with shape %v: want equal (samples, classes) shapes",
			nodeName(logits), logits.Shape(), nodeName(targets), targets.Shape())
	}
	ls, err := LogSoftmax(logits, 1)
	if err != nil {
		return nil, err
	}
	p, err := G.HadamardProd(targets, ls)
	if err != nil {
		return nil, err
	}
	rows, err := G.Sum(p, 1)
	if err != nil {
		return nil, err
	}
	m, err := G.Mean(rows)
	if err != nil {
		return nil, err
	}
	return G.Neg(m)
}

// Gather returns the rows (axis 0) of table at the indices held, as
// float64 values, in the vector idx. With idx a data input made by
// SampleIndex, a per-sample variable (a weight per training sample, say)
// follows the minibatch the oracles are evaluated on.
func Gather(table, idx *G.Node) (*G.Node, error) {
	if table.Dims() < 1 || idx.Dims() != 1 {
		return nil, fmt.Errorf("graph: Gather from %s with shape %v at %s with shape %v: want a table with rows and a vector of indices",
			nodeName(table), table.Shape(), nodeName(idx), idx.Shape())
	}
	return G.ApplyOp(gatherOp{dims: table.Dims()}, table, idx)
}

// SampleIndex returns a data input of n values 0, 1, ..., n−1 named name:
// declared as data of an objective, it holds the indices of the samples in
// each batch, for use with Gather.
func SampleIndex(g *G.ExprGraph, name string, n int) *G.Node {
	d := make([]float64, n)
	for i := range d {
		d[i] = float64(i)
	}
	return G.NewVector(g, G.Float64, G.WithShape(n), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking(d))))
}

// BatchNorm returns batch normalization in training mode of z (samples ×
// features):
//
//	BN(z)_ij = γ_j (z_ij − μ_j)/√(σ²_j + ε) + β_j,
//
// μ_j and σ²_j the mean and biased variance of column j over the rows of
// the batch the graph is evaluated on, γ and β vectors of one value per
// column, ε > 0. It is the function the same expression written with Mean,
// Sub, Square and broadcasts computes, and graph/ differentiates it as
// many times, but its forward pass and adjoint each go over z a few times
// instead of a dozen.
func BatchNorm(z, gamma, beta *G.Node, eps float64) (*G.Node, error) {
	if z.Dims() != 2 || gamma.Dims() != 1 || beta.Dims() != 1 || gamma.Shape()[0] != z.Shape()[1] || beta.Shape()[0] != z.Shape()[1] {
		return nil, fmt.Errorf("graph: BatchNorm of %s with shape %v, scale %s with shape %v and shift %s with shape %v: want (samples, features) and two vectors of the features",
			nodeName(z), z.Shape(), nodeName(gamma), gamma.Shape(), nodeName(beta), beta.Shape())
	}
	if !(eps > 0) || math.IsInf(eps, 1) {
		return nil, fmt.Errorf("graph: BatchNorm of %s with ε = %v; want a finite ε > 0", nodeName(z), eps)
	}
	return G.ApplyOp(batchNormOp{eps: eps}, z, gamma, beta)
}

type batchNormOp struct{ eps float64 }

func (op batchNormOp) Arity() int { return 3 }
func (op batchNormOp) Type() hm.Type {
	m := G.TensorType{Dims: 2, Of: hm.TypeVariable('a')}
	v := G.TensorType{Dims: 1, Of: hm.TypeVariable('a')}
	return hm.NewFnType(m, v, v, m)
}
func (op batchNormOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("graph: BatchNorm: want a matrix shape, got %v", in[0])
	}
	return s.Clone(), nil
}
func (op batchNormOp) Do(v ...G.Value) (G.Value, error) {
	z, ok1 := v[0].Data().([]float64)
	gamma, ok2 := v[1].Data().([]float64)
	beta, ok3 := v[2].Data().([]float64)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("graph: BatchNorm computes float64 values")
	}
	shape := []int(v[0].Shape())
	out := make([]float64, len(z))
	bnForward(out, z, gamma, beta, shape[0], shape[1], op.eps)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), nil
}
func (op batchNormOp) ReturnsPtr() bool     { return false }
func (op batchNormOp) CallsExtern() bool    { return false }
func (op batchNormOp) OverwritesInput() int { return -1 }
func (op batchNormOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "graph.BatchNorm(%x)", math.Float64bits(op.eps))
}
func (op batchNormOp) Hashcode() uint32 { return hashOf(op) }
func (op batchNormOp) String() string   { return fmt.Sprintf("graph.BatchNorm(ε=%g)", op.eps) }

type logSoftmaxOp struct{ axis, dims int }

func (op logSoftmaxOp) Arity() int { return 1 }
func (op logSoftmaxOp) Type() hm.Type {
	t := G.TensorType{Dims: op.dims, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t)
}
func (op logSoftmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("graph: LogSoftmax: want a shape, got %T", in[0])
	}
	return s.Clone(), nil
}
func (op logSoftmaxOp) Do(v ...G.Value) (G.Value, error) {
	x, ok := v[0].Data().([]float64)
	if !ok {
		return nil, fmt.Errorf("graph: LogSoftmax computes float64 values, got %T", v[0].Data())
	}
	shape := []int(v[0].Shape())
	out := make([]float64, len(x))
	outer, mid, inner := split3(shape, op.axis)
	logSoftmax(out, x, outer, mid, inner, expInto)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), nil
}
func (op logSoftmaxOp) ReturnsPtr() bool     { return false }
func (op logSoftmaxOp) CallsExtern() bool    { return false }
func (op logSoftmaxOp) OverwritesInput() int { return -1 }
func (op logSoftmaxOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "graph.LogSoftmax(%d,%d)", op.axis, op.dims)
}
func (op logSoftmaxOp) Hashcode() uint32 { return hashOf(op) }
func (op logSoftmaxOp) String() string   { return fmt.Sprintf("graph.LogSoftmax(axis=%d)", op.axis) }

type gatherOp struct{ dims int }

func (op gatherOp) Arity() int { return 2 }
func (op gatherOp) Type() hm.Type {
	t := G.TensorType{Dims: op.dims, Of: hm.TypeVariable('a')}
	i := G.TensorType{Dims: 1, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, i, t)
}
func (op gatherOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	t, ok1 := in[0].(tensor.Shape)
	i, ok2 := in[1].(tensor.Shape)
	if !ok1 || !ok2 || len(i) != 1 || len(t) < 1 {
		return nil, fmt.Errorf("graph: Gather: want a table shape and a vector shape, got %v and %v", in[0], in[1])
	}
	return append(tensor.Shape{i[0]}, t[1:]...), nil
}
func (op gatherOp) Do(v ...G.Value) (G.Value, error) {
	t, ok1 := v[0].Data().([]float64)
	idx, ok2 := v[1].Data().([]float64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("graph: Gather computes float64 values")
	}
	shape := []int(v[0].Shape())
	rows := shape[0]
	row := len(t) / max(rows, 1)
	out := make([]float64, len(idx)*row)
	for r, f := range idx {
		i := int(f)
		if f != math.Trunc(f) || i < 0 || i >= rows {
			return nil, fmt.Errorf("graph: Gather: index %v at position %d is not a row of a table with %d rows", f, r, rows)
		}
		copy(out[r*row:(r+1)*row], t[i*row:(i+1)*row])
	}
	oshape := append([]int{len(idx)}, shape[1:]...)
	return tensor.New(tensor.WithShape(oshape...), tensor.WithBacking(out)), nil
}
func (op gatherOp) ReturnsPtr() bool      { return false }
func (op gatherOp) CallsExtern() bool     { return false }
func (op gatherOp) OverwritesInput() int  { return -1 }
func (op gatherOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "graph.Gather(%d)", op.dims) }
func (op gatherOp) Hashcode() uint32      { return hashOf(op) }
func (op gatherOp) String() string        { return "graph.Gather" }

func hashOf(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
