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

// opKind names an IR operation.
type opKind uint8

const (
	opLeaf  opKind = iota // a bound input: variable, data or seed
	opConst               // a constant tensor

	// Elementwise unary operations.
	opNeg
	opExp
	opLog
	opLog1p
	opExpm1
	opSqrt
	opInvSqrt
	opSquare
	opCube
	opInverse
	opSigmoid
	opTanh
	opSoftplus
	opAbs
	opSign
	opSin
	opCos

	// Elementwise binary operations; the operands have equal shapes or one
	// of them holds a single element.
	opAdd
	opSub
	opMul
	opDiv
	opPow
	opCmp // comparison giving 1 or 0; ints[0] is the comparison (cmpLT...)

	// Structural and linear-algebra operations.
	opReshape   // ints: target shape
	opTranspose // ints: permutation
	opBroadcast // repeat size-1 axes of args[0] up to the node's shape
	opSum       // sum along axis (the axis is dropped)
	opMax       // max along axis (the axis is dropped)
	opConcat    // concatenate args along axis
	opSlice     // ints: start, end, step along axis; ints[3] == 1 drops the axis
	opSliceGrad // the adjoint of opSlice: args[0] placed into zeros of the node's shape
	opMatMul    // 2-D product; ints: transA, transB
	opLogSoftmax
	opIm2Col        // ints: kh, kw, padH, padW, strideH, strideW, dilH, dilW
	opCol2Im        // the adjoint of opIm2Col; same ints
	opPoolGather    // max-pool windows of args[0], the value picked from args[1]; ints: kh, kw, padN, padS, padW, padE, sH, sW
	opPoolScatter   // the adjoint of opPoolGather in args[1]: args[1] (pooled shape) sent to the argmax of args[0]
	opGather        // rows of args[0] at the integer indices held in args[1]
	opScatterAdd    // the adjoint of opGather: rows of args[0] added at the indices args[1]; the node's shape is the table's
	opWiden         // args[0], a float32 leaf or constant, in float64
	opBatchNorm     // batch normalization of args[0] (n×c) with scale args[1] and shift args[2] (c); eps: ε
	opBatchNormGrad // the adjoint of opBatchNorm(args[1], args[2], ·) w.r.t. its input, for the output adjoint args[0]; eps: ε
	numOps
)

var opNames = [numOps]string{
	"leaf", "const",
	"neg", "exp", "log", "log1p", "expm1", "sqrt", "invsqrt", "square", "cube", "inverse",
	"sigmoid", "tanh", "softplus", "abs", "sign", "sin", "cos",
	"add", "sub", "mul", "div", "pow", "cmp",
	"reshape", "transpose", "broadcast", "sum", "max", "concat", "slice", "slicegrad",
	"matmul", "logsoftmax", "im2col", "col2im", "poolgather", "poolscatter", "gather", "scatteradd", "widen", "batchnorm", "batchnormgrad",
}

func (k opKind) String() string {
	if k < numOps {
		return opNames[k]
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

func (k opKind) unary() bool  { return k >= opNeg && k <= opCos }
func (k opKind) binary() bool { return k >= opAdd && k <= opCmp }

// Comparisons of opCmp.
const (
	cmpLT = iota
	cmpGT
	cmpLE
	cmpGE
	cmpEQ
	cmpNE
)

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

// builder creates and hash-conses nodes. See the file comment.
type builder struct {
	nodes []*node
	memo  map[string]*node
}

func newBuilder() *builder { return &builder{memo: make(map[string]*node)} }

// foldLimit is the largest constant that add computes at build time.
const foldLimit = 1 << 12

// add registers n, or returns an existing node with the same operation,
// arguments and attributes. An operation on constants small enough is
// computed at once and becomes a constant itself, except broadcasts, which
// elementwise operations absorb (see unbroadcast).
func (b *builder) add(n *node) *node {
	n.size = sizeOf(n.shape)
	if n.op != opLeaf && n.op != opConst && n.op != opBroadcast && len(n.args) > 0 && n.size <= foldLimit {
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

// widen returns a float32 node's values in float64. A product reads the
// float32 node directly (see matmul), so the widened copy is computed only
// for the other operations.
func (b *builder) widen(a *node) *node {
	if !a.f32 {
		panic("graph: widen of " + a.String() + ", which is not float32")
	}
	return b.add(&node{op: opWiden, args: []*node{a}, shape: cloneInts(a.shape)})
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

// sizeNode is the length of a along axis, a constant: shapes are concrete
// in a builder, which holds one batch size.
func (b *builder) sizeNode(a *node, axis int) *node {
	if axis < 0 || axis >= len(a.shape) {
		shapePanic("size along axis %d of shape %v", axis, a.shape)
	}
	return b.scalar(float64(a.shape[axis]))
}

func (b *builder) unary(op opKind, a *node) *node {
	return b.add(&node{op: op, args: []*node{a}, shape: cloneInts(a.shape)})
}

// binaryShape is the shape of an elementwise operation on x and y: equal
// shapes, or one operand holding a single element.
func binaryShape(op opKind, x, y *node) []int {
	switch {
	case sameShape(x.shape, y.shape):
		return cloneInts(x.shape)
	case y.size == 1 && (len(y.shape) == 0 || len(y.shape) == len(x.shape)):
		return cloneInts(x.shape)
	case x.size == 1 && (len(x.shape) == 0 || len(x.shape) == len(y.shape)):
		return cloneInts(y.shape)
	case isRow(y.shape, x.shape) || isCol(y.shape, x.shape):
		return cloneInts(x.shape)
	case isRow(x.shape, y.shape) || isCol(x.shape, y.shape):
		return cloneInts(y.shape)
	}
	shapePanic("%v: operand shapes %v and %v differ", op, x.shape, y.shape)
	return nil
}

// isRow reports whether an operand of shape row, repeated, fills shape:
// the same rank, leading axes of length 1, the trailing ones equal, and more
// than one element (a "row" of the whole, in row-major order).
func isRow(row, shape []int) bool {
	if len(row) != len(shape) || sizeOf(row) < 2 || sameShape(row, shape) {
		return false
	}
	lead := true
	for i, d := range row {
		switch {
		case lead && d == 1:
		case d == shape[i]:
			lead = false
		default:
			return false
		}
	}
	return true
}

// isCol reports whether an operand of shape col, each element repeated,
// fills shape: the same rank, the leading axes equal, trailing axes of
// length 1, and more than one element (a "column" of the whole).
func isCol(col, shape []int) bool {
	if len(col) != len(shape) || sizeOf(col) < 2 || sameShape(col, shape) {
		return false
	}
	lead := true
	for i, d := range col {
		switch {
		case lead && d == shape[i]:
		case d == 1:
			lead = false
		default:
			return false
		}
	}
	return true
}

// binary builds an elementwise operation. A single element, a row (see
// isRow) or a column (isCol) broadcast to the other operand's shape is used
// as it is: the kernels repeat it.
func (b *builder) binary(op opKind, x, y *node) *node {
	shape := binaryShape(op, x, y)
	// An operation of a broadcast with a single element is the broadcast of
	// the operation on the broadcast's source, computed once per element of
	// the source; the result, a broadcast row or column, is absorbed in turn
	// by the operations that read it (the adjoint of a mean scaled by 2 in
	// the square's rule, say).
	switch {
	case x.op == opBroadcast && y.size == 1 && sameShape(x.shape, shape) && (len(y.shape) == 0 || len(y.shape) == len(x.shape)):
		return b.broadcast(b.binary(op, x.args[0], y), shape)
	case y.op == opBroadcast && x.size == 1 && sameShape(y.shape, shape) && (len(x.shape) == 0 || len(x.shape) == len(y.shape)):
		return b.broadcast(b.binary(op, x, y.args[0]), shape)
	}
	x, y = b.unbroadcastOne(x, y, shape)
	return b.add(&node{op: op, args: []*node{x, y}, shape: shape})
}

// unbroadcastOne unbroadcasts one of the operands x and y of an operation
// of shape shape: the other must keep the shape.
func (b *builder) unbroadcastOne(x, y *node, shape []int) (*node, *node) {
	if u := b.unbroadcast(x, shape); u != x && y.size == sizeOf(shape) {
		return u, y
	}
	if u := b.unbroadcast(y, shape); u != y && x.size == sizeOf(shape) {
		return x, u
	}
	return x, y
}

// unbroadcast returns the single element that a broadcasts (through
// reshapes), or the row or column that a broadcasts directly, when a has
// the operation's full shape, and a otherwise.
func (b *builder) unbroadcast(a *node, shape []int) *node {
	if a.size == 1 || !sameShape(a.shape, shape) {
		return a
	}
	if src := a.args; a.op == opBroadcast && (isRow(src[0].shape, shape) || isCol(src[0].shape, shape)) {
		return src[0]
	}
	r := a
	for r.op == opBroadcast || r.op == opReshape {
		r = r.args[0]
	}
	if r.size == 1 {
		return b.reshape(r, []int{})
	}
	return a
}

func (b *builder) cmp(kind int, x, y *node) *node {
	shape := binaryShape(opCmp, x, y)
	x, y = b.unbroadcastOne(x, y, shape)
	return b.add(&node{op: opCmp, args: []*node{x, y}, shape: shape, ints: []int{kind}})
}

func (b *builder) add2(x, y *node) *node {
	switch {
	case x == nil:
		return y
	case y == nil:
		return x
	}
	return b.binary(opAdd, x, y)
}

func (b *builder) mul(x, y *node) *node {
	switch {
	case isConst(x, 1) && x.size == 1 && len(x.shape) <= len(y.shape):
		return y
	case isConst(y, 1) && y.size == 1 && len(y.shape) <= len(x.shape):
		return x
	}
	return b.binary(opMul, x, y)
}

func (b *builder) scale(x *node, c float64) *node {
	if c == 1 {
		return x
	}
	return b.mul(x, b.scalar(c))
}

func (b *builder) reshape(a *node, shape []int) *node {
	if sizeOf(shape) != a.size {
		shapePanic("reshape from %v to %v changes the number of elements", a.shape, shape)
	}
	if sameShape(a.shape, shape) {
		return a
	}
	if a.op == opReshape {
		a = a.args[0]
		if sameShape(a.shape, shape) {
			return a
		}
	}
	return b.add(&node{op: opReshape, args: []*node{a}, shape: cloneInts(shape), ints: cloneInts(shape)})
}

func (b *builder) transpose(a *node, perm []int) *node {
	if len(perm) != len(a.shape) {
		shapePanic("transpose of shape %v with permutation %v", a.shape, perm)
	}
	seen := make([]bool, len(perm))
	shape := make([]int, len(perm))
	identity := true
	for i, p := range perm {
		if p < 0 || p >= len(perm) || seen[p] {
			shapePanic("transpose: %v is not a permutation", perm)
		}
		seen[p] = true
		shape[i] = a.shape[p]
		identity = identity && p == i
	}
	if identity {
		return a
	}
	return b.add(&node{op: opTranspose, args: []*node{a}, shape: shape, ints: cloneInts(perm)})
}

// broadcast repeats the size-1 axes of a up to shape; a must have the same
// rank as shape.
func (b *builder) broadcast(a *node, shape []int) *node {
	if sameShape(a.shape, shape) {
		return a
	}
	if len(a.shape) != len(shape) {
		shapePanic("broadcast of shape %v to %v: ranks differ", a.shape, shape)
	}
	for i := range shape {
		if a.shape[i] != shape[i] && a.shape[i] != 1 {
			shapePanic("broadcast of shape %v to %v: axis %d is neither equal nor 1", a.shape, shape, i)
		}
	}
	return b.add(&node{op: opBroadcast, args: []*node{a}, shape: cloneInts(shape)})
}

func (b *builder) reduce(op opKind, a *node, axis int) *node {
	if axis < 0 || axis >= len(a.shape) {
		shapePanic("%v along axis %d of shape %v", op, axis, a.shape)
	}
	shape := append(cloneInts(a.shape[:axis]), a.shape[axis+1:]...)
	if shape == nil {
		shape = []int{}
	}
	return b.add(&node{op: op, args: []*node{a}, axis: axis, shape: shape})
}

// sumAll sums every element of a into a 0-d scalar.
func (b *builder) sumAll(a *node) *node {
	if len(a.shape) == 0 {
		return a
	}
	return b.reduce(opSum, b.reshape(a, []int{a.size}), 0)
}

// keepDims returns shape with axis set to 1.
func keepDims(shape []int, axis int) []int {
	s := cloneInts(shape)
	s[axis] = 1
	return s
}

// reduceTo sums g down to shape: the adjoint of broadcasting a value of
// shape to g's shape (equal ranks with 1s, or a single element).
func (b *builder) reduceTo(g *node, shape []int) *node {
	if sameShape(g.shape, shape) {
		return g
	}
	if sizeOf(shape) == 1 {
		return b.reshape(b.sumAll(g), shape)
	}
	if len(g.shape) != len(shape) {
		shapePanic("reduce %v to %v: ranks differ", g.shape, shape)
	}
	r := g
	for ax := len(shape) - 1; ax >= 0; ax-- {
		if shape[ax] == 1 && g.shape[ax] != 1 {
			r = b.reduce(opSum, r, ax)
		}
	}
	return b.reshape(r, shape)
}

func (b *builder) concat(axis int, args []*node) *node {
	if len(args) == 1 {
		return args[0]
	}
	shape := cloneInts(args[0].shape)
	if axis < 0 || axis >= len(shape) {
		shapePanic("concat along axis %d of shape %v", axis, shape)
	}
	shape[axis] = 0
	for _, a := range args {
		if len(a.shape) != len(shape) {
			shapePanic("concat of shapes with ranks %d and %d", len(a.shape), len(shape))
		}
		for i := range shape {
			if i != axis && a.shape[i] != shape[i] {
				shapePanic("concat along %d: shapes %v and %v differ off the axis", axis, args[0].shape, a.shape)
			}
		}
		shape[axis] += a.shape[axis]
	}
	return b.add(&node{op: opConcat, args: append([]*node{}, args...), axis: axis, shape: shape})
}

func sliceLen(start, end, step int) int {
	if end <= start {
		return 0
	}
	return (end - start + step - 1) / step
}

// slice takes elements start, start+step, ... < end along axis; drop
// removes the axis (then end must be start+1).
func (b *builder) slice(a *node, axis, start, end, step int, drop bool) *node {
	if axis < 0 || axis >= len(a.shape) || step < 1 || start < 0 || end > a.shape[axis] || start >= end {
		shapePanic("slice [%d:%d:%d] along axis %d of shape %v", start, end, step, axis, a.shape)
	}
	if start == 0 && end == a.shape[axis] && step == 1 && !drop {
		return a
	}
	shape := cloneInts(a.shape)
	shape[axis] = sliceLen(start, end, step)
	d := 0
	if drop {
		if shape[axis] != 1 {
			shapePanic("slice dropping axis %d must take one element", axis)
		}
		shape = append(shape[:axis], shape[axis+1:]...)
		d = 1
	}
	return b.add(&node{op: opSlice, args: []*node{a}, axis: axis, shape: shape, ints: []int{start, end, step, d}})
}

// sliceGrad places g into zeros of shape at the positions a slice with the
// same attributes reads.
func (b *builder) sliceGrad(g *node, shape []int, axis int, ints []int) *node {
	return b.add(&node{op: opSliceGrad, args: []*node{g}, axis: axis, shape: cloneInts(shape), ints: cloneInts(ints)})
}

// matmul returns op(x)·op(y) for 2-D operands, op being an optional
// transpose.
func (b *builder) matmul(x, y *node, tx, ty bool) *node {
	if len(x.shape) != 2 || len(y.shape) != 2 {
		shapePanic("matrix product of shapes %v and %v: both must be 2-D", x.shape, y.shape)
	}
	m, k := x.shape[0], x.shape[1]
	if tx {
		m, k = k, m
	}
	k2, n := y.shape[0], y.shape[1]
	if ty {
		k2, n = n, k2
	}
	if k != k2 {
		shapePanic("matrix product of shapes %v (transposed %v) and %v (transposed %v): inner sizes %d and %d differ", x.shape, tx, y.shape, ty, k, k2)
	}
	// Products read float32 operands as they are (matmulMixed), so the
	// data stream from memory at half the width.
	if x.op == opWiden {
		x = x.args[0]
	}
	if y.op == opWiden {
		y = y.args[0]
	}
	return b.add(&node{op: opMatMul, args: []*node{x, y}, shape: []int{m, n}, ints: []int{b2i(tx), b2i(ty)}})
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func (b *builder) logSoftmax(a *node, axis int) *node {
	if axis < 0 || axis >= len(a.shape) {
		shapePanic("log-softmax along axis %d of shape %v", axis, a.shape)
	}
	return b.add(&node{op: opLogSoftmax, args: []*node{a}, axis: axis, shape: cloneInts(a.shape)})
}

// convParams are the ints of opIm2Col and opCol2Im.
type convParams struct{ kh, kw, padH, padW, sH, sW, dH, dW int }

func (p convParams) ints() []int {
	return []int{p.kh, p.kw, p.padH, p.padW, p.sH, p.sW, p.dH, p.dW}
}

func convFrom(ints []int) convParams {
	return convParams{ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]}
}

// outHW is the output height and width of a convolution on an h×w image.
func (p convParams) outHW(h, w int) (int, int) {
	oh := (h+2*p.padH-(p.dH*(p.kh-1)+1))/p.sH + 1
	ow := (w+2*p.padW-(p.dW*(p.kw-1)+1))/p.sW + 1
	return oh, ow
}

// im2col lays out the patches of a (batch, channels, h, w) image as
// (batch, outH, outW, channels·kh·kw), the layout of gorgonia's Im2Col.
func (b *builder) im2col(a *node, p convParams) *node {
	if len(a.shape) != 4 {
		shapePanic("im2col of shape %v: want (batch, channels, height, width)", a.shape)
	}
	oh, ow := p.outHW(a.shape[2], a.shape[3])
	if oh < 1 || ow < 1 {
		shapePanic("im2col: kernel %dx%d does not fit image %v", p.kh, p.kw, a.shape)
	}
	shape := []int{a.shape[0], oh, ow, a.shape[1] * p.kh * p.kw}
	return b.add(&node{op: opIm2Col, args: []*node{a}, shape: shape, ints: p.ints()})
}

func (b *builder) col2im(g *node, image []int, p convParams) *node {
	return b.add(&node{op: opCol2Im, args: []*node{g}, shape: cloneInts(image), ints: p.ints()})
}

// poolParams are the ints of opPoolGather and opPoolScatter.
type poolParams struct{ kh, kw, padN, padS, padW, padE, sH, sW int }

func (p poolParams) ints() []int {
	return []int{p.kh, p.kw, p.padN, p.padS, p.padW, p.padE, p.sH, p.sW}
}

func poolFrom(ints []int) poolParams {
	return poolParams{ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]}
}

func (p poolParams) outHW(h, w int) (int, int) {
	return (h+p.padN+p.padS-p.kh)/p.sH + 1, (w+p.padW+p.padE-p.kw)/p.sW + 1
}

// poolGather picks, in each pooling window of src, the element of val at
// src's argmax. poolGather(a, a) is max pooling.
func (b *builder) poolGather(src, val *node, p poolParams) *node {
	if len(src.shape) != 4 || !sameShape(src.shape, val.shape) {
		shapePanic("max pooling of shapes %v and %v: want equal (batch, channels, height, width)", src.shape, val.shape)
	}
	oh, ow := p.outHW(src.shape[2], src.shape[3])
	if oh < 1 || ow < 1 {
		shapePanic("max pooling: window %dx%d does not fit %v", p.kh, p.kw, src.shape)
	}
	shape := []int{src.shape[0], src.shape[1], oh, ow}
	return b.add(&node{op: opPoolGather, args: []*node{src, val}, shape: shape, ints: p.ints()})
}

// poolScatter sends each element of g to the argmax of its window in src.
func (b *builder) poolScatter(src, g *node, p poolParams) *node {
	return b.add(&node{op: opPoolScatter, args: []*node{src, g}, shape: cloneInts(src.shape), ints: p.ints()})
}

// gather takes the rows (axis 0) of table at the indices held in idx.
func (b *builder) gather(table, idx *node) *node {
	if len(table.shape) == 0 || len(idx.shape) != 1 {
		shapePanic("gather from shape %v with indices of shape %v: want a table with rows and a vector of indices", table.shape, idx.shape)
	}
	shape := append([]int{idx.shape[0]}, table.shape[1:]...)
	return b.add(&node{op: opGather, args: []*node{table, idx}, shape: shape})
}

func (b *builder) scatterAdd(g, idx *node, rows int) *node {
	shape := append([]int{rows}, g.shape[1:]...)
	return b.add(&node{op: opScatterAdd, args: []*node{g, idx}, shape: shape})
}
