package graph

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file holds the intermediate representation (IR) that graph/ imports
// gorgonia expressions into, differentiates and executes.
//
// Vocabulary (the same as in diff.go):
//   - a node is immutable once built: an operation, its arguments, its shape
//     and its attributes. Nothing is ever stored on a node after it is built;
//     derivatives are new nodes, so a derivative of a derivative is just
//     another pass.
//   - a builder owns the nodes of one instantiation of a problem (one batch
//     size of one objective). It hash-conses: building the same operation on
//     the same arguments twice returns the first node, so the forward pass
//     and the derivative passes share work without any cache on the nodes.
//   - shapes are concrete ([]int, row-major); a 0-d scalar has shape [].

// The operations themselves are defined in registry.go's table; leaves and
// constants are defined here.
var opLeaf, opConst opKind

func init() {
	given := func(n *node) []int { return n.shape }
	opLeaf = define(opDef{name: "leaf", shape: given, constant: true,
		f64: func(n *node, _ []float64, _ [][]float64) { panic("graph: evaluating " + n.String()) },
		f32: func(n *node, _ []float32, _ [][]float32) { panic("graph: evaluating " + n.String()) }})
	opConst = define(opDef{name: "const", shape: given, constant: true,
		f64: func(n *node, out []float64, _ [][]float64) { copy(out, n.data) },
		f32: func(n *node, out []float32, _ [][]float32) {
			if n.f32 {
				copy(out, n.data32)
				return
			}
			narrowInto(out, n.data)
		}})
}

// node is one IR operation. See the file comment.
type node struct {
	id    int
	op    opKind
	args  []*node
	shape []int
	size  int
	axis  int
	ints  []int
	data  []float64 // opConst values
	eps   float64   // opBatchNorm, opBatchNormGrad: ε
	name  string    // leaves: the variable or data name
	// f32 marks a leaf or constant held in float32 (data of an objective
	// with Float32Data; a constant's values are then in data32). Only
	// opWiden and, through the peephole in matmul, opMatMul read such a
	// node.
	f32    bool
	data32 []float32
}

func (n *node) String() string {
	var b strings.Builder
	b.WriteString(n.op.String())
	if n.name != "" {
		b.WriteString(" " + strconv.Quote(n.name))
	}
	fmt.Fprintf(&b, " %v", n.shape)
	return b.String()
}

// shapeError is raised (as a panic) by IR constructors on inconsistent
// shapes. The importer recovers it and turns it into an error naming the
// gorgonia node; anywhere else it is a programmer error.
type shapeError struct{ msg string }

func (e shapeError) Error() string { return e.msg }

func shapePanic(format string, args ...any) {
	panic(shapeError{fmt.Sprintf(format, args...)})
}

func sizeOf(shape []int) int {
	s := 1
	for _, d := range shape {
		s *= d
	}
	return s
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func cloneInts(a []int) []int {
	if a == nil {
		return nil
	}
	return append([]int{}, a...)
}

// builder creates and hash-conses nodes. See the file comment. f32 says
// that its nodes will be computed in float32 (Objective.Float32): float32
// data are then read as they are, without widen.
type builder struct {
	nodes []*node
	memo  map[string]*node
	f32   bool
	// noFold keeps operations on constants as nodes, which add would
	// otherwise compute at once (in float64): for running one
	// operation's translation by a program.
	noFold bool
}

func newBuilder() *builder { return &builder{memo: make(map[string]*node)} }

// foldLimit is the largest constant that add computes at build time.
const foldLimit = 1 << 12

// add registers n, or returns an existing node with the same operation,
// arguments and attributes, after checking its number of arguments and
// computing its shape by the operation's rules. An operation on constants
// small enough is computed at once and becomes a constant itself, except
// broadcasts, which elementwise operations absorb (see unbroadcast).
func (b *builder) add(n *node) *node {
	d := n.op.def()
	if d.arity >= 0 && len(n.args) != d.arity || d.arity < 0 && len(n.args) == 0 {
		panic(fmt.Sprintf("graph: %s built with %d arguments", d.name, len(n.args)))
	}
	n.shape = d.shape(n)
	n.size = sizeOf(n.shape)
	if n.op != opBroadcast && len(n.args) > 0 && n.size <= foldLimit && !b.noFold {
		in := make([][]float64, len(n.args))
		folds := true
		for i, a := range n.args {
			folds = folds && a.op == opConst && !a.f32
			in[i] = a.data
		}
		if folds {
			out := make([]float64, n.size)
			eval(n, out, in)
			return b.constant(n.shape, out)
		}
	}
	key := ""
	if n.op != opLeaf && (n.op != opConst || len(n.data) <= 16 && !n.f32) {
		var k strings.Builder
		fmt.Fprintf(&k, "%d|%d|%v|%v|%x|", n.op, n.axis, n.ints, n.shape, math.Float64bits(n.eps))
		for _, a := range n.args {
			k.WriteString(strconv.Itoa(a.id))
			k.WriteByte(',')
		}
		for _, v := range n.data {
			k.WriteString(strconv.FormatUint(math.Float64bits(v), 16))
			k.WriteByte(',')
		}
		key = k.String()
		if m, ok := b.memo[key]; ok {
			return m
		}
	}
	n.id = len(b.nodes)
	b.nodes = append(b.nodes, n)
	if key != "" {
		b.memo[key] = n
	}
	return n
}

func (b *builder) leaf(name string, shape []int) *node {
	return b.add(&node{op: opLeaf, name: name, shape: cloneInts(shape)})
}

func (b *builder) constant(shape []int, data []float64) *node {
	if len(data) != sizeOf(shape) {
		shapePanic("constant of shape %v needs %d values, got %d", shape, sizeOf(shape), len(data))
	}
	return b.add(&node{op: opConst, shape: cloneInts(shape), data: data})
}

func (b *builder) scalar(v float64) *node { return b.constant([]int{}, []float64{v}) }

// leaf32 is a leaf bound to float32 values; constant32 a constant held in
// float32. Other operations read them through widen.
func (b *builder) leaf32(name string, shape []int) *node {
	return b.add(&node{op: opLeaf, name: name, shape: cloneInts(shape), f32: true})
}

func (b *builder) constant32(shape []int, data []float32) *node {
	if len(data) != sizeOf(shape) {
		shapePanic("constant of shape %v needs %d values, got %d", shape, sizeOf(shape), len(data))
	}
	return b.add(&node{op: opConst, shape: cloneInts(shape), f32: true, data32: data})
}

// filled returns a constant of shape shape with every element v.
func (b *builder) filled(shape []int, v float64) *node {
	d := make([]float64, sizeOf(shape))
	for i := range d {
		d[i] = v
	}
	return b.constant(shape, d)
}

// isConst reports whether n is a constant all of whose elements equal v.
func isConst(n *node, v float64) bool {
	if n.op != opConst || n.f32 {
		return false
	}
	for _, x := range n.data {
		if x != v {
			return false
		}
	}
	return true
}

// keepDims returns shape with axis set to 1.
func keepDims(shape []int, axis int) []int {
	s := cloneInts(shape)
	s[axis] = 1
	return s
}

// split3 returns the sizes before, along and after axis.
func split3(shape []int, axis int) (outer, mid, inner int) {
	outer, inner = 1, 1
	for i, d := range shape {
		switch {
		case i < axis:
			outer *= d
		case i > axis:
			inner *= d
		}
	}
	return outer, shape[axis], inner
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func normAxis(axis, rank int) int {
	if axis < 0 {
		return axis + rank
	}
	return axis
}

// checkAxis panics unless axis is an axis of shape.
func checkAxis(what string, axis int, shape []int) {
	if axis < 0 || axis >= len(shape) {
		shapePanic("%s along axis %d of shape %v", what, axis, shape)
	}
}

// sameAsArg is the shape rule of operations whose shape is their first
// argument's.
func sameAsArg(n *node) []int { return cloneInts(n.args[0].shape) }
