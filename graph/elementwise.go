package graph

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
)

// Elementwise operations: unary functions, arithmetic, comparisons, and
// gorgonia's elementwise unary and binary operations that map onto them.
// A binary operation's operands have equal shapes, or one of them holds a
// single element, or one is a row or a column repeated over the other (see
// isRow, isCol); the kernels repeat it without a broadcast.

// Elementwise operations.
var (
	opNeg, opExp, opLog, opLog1p, opExpm1, opSqrt, opInvSqrt, opSquare, opCube,
	opInverse, opSigmoid, opTanh, opSoftplus, opAbs, opSign, opSin, opCos,
	opCeil, opFloor opKind

	opAdd, opSub, opMul, opDiv, opPow, opMaxOf, opMinOf opKind
	opCmp                                               opKind // 1 or 0; ints[0] is the comparison (cmpLT...)
)

// Comparisons of opCmp.
const (
	cmpLT = iota
	cmpGT
	cmpLE
	cmpGE
	cmpEQ
	cmpNE
)

// unaryImports translates gorgonia's elementwise unary operations, by the
// name their String method gives.
var unaryImports map[string]func(b *builder, a *node) *node

func init() {
	defineUnary()
	defineBinary()
	recognizeElementwise()
}

// one is the scalar 1.
func one(b *builder) *node { return b.scalar(1) }

// defineUnary defines the elementwise functions, each with its
// derivative: the VJP is g times the function's derivative, written with
// the IR's own operations. Each function's loop is given in both
// precisions: one generic loop instantiated twice, or the vector kernels
// of float64 and float32.
func defineUnary() {
	unaryImports = map[string]func(b *builder, a *node) *node{}
	unary := func(name, gorgonia string, loop func(out, x []float64), loop32 func(out, x []float32), vjp func(b *builder, n, x, g *node) *node) opKind {
		d := opDef{name: name, arity: 1, shape: sameAsArg, f64: unaryKernel(loop), f32: unaryKernel(loop32)}
		if vjp == nil {
			d.constant = true
		} else {
			d.vjp = func(b *builder, n *node, _ int, g *node) *node { return vjp(b, n, n.args[0], g) }
		}
		k := define(d)
		unaryImports[gorgonia] = func(b *builder, a *node) *node { return b.unary(k, a) }
		return k
	}
	opNeg = unary("neg", "neg", negInto[float64], negInto[float32],
		func(b *builder, n, x, g *node) *node { return b.unary(opNeg, g) })
	opExp = unary("exp", "exp", expInto, expInto32, func(b *builder, n, x, g *node) *node { return b.mul(g, n) })
	opLog = unary("log", "ln", logInto, logInto32, func(b *builder, n, x, g *node) *node { return b.binary(opDiv, g, x) })
	opLog1p = unary("log1p", "log1p", each[float64](math.Log1p), each[float32](math.Log1p),
		func(b *builder, n, x, g *node) *node { return b.binary(opDiv, g, b.binary(opAdd, x, one(b))) })
	opExpm1 = unary("expm1", "expm1", each[float64](math.Expm1), each[float32](math.Expm1),
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.binary(opAdd, n, one(b))) })
	opSqrt = unary("sqrt", "sqrt", sqrtInto[float64], sqrtInto[float32],
		func(b *builder, n, x, g *node) *node { return b.binary(opDiv, b.scale(g, 0.5), n) })
	opInvSqrt = unary("invsqrt", "invSqrt", invSqrtInto[float64], invSqrtInto[float32],
		func(b *builder, n, x, g *node) *node { return b.mul(b.scale(g, -0.5), b.unary(opCube, n)) })
	opSquare = unary("square", "square", squareInto[float64], squareInto[float32],
		func(b *builder, n, x, g *node) *node { return b.mul(b.scale(g, 2), x) })
	opCube = unary("cube", "cube", cubeInto[float64], cubeInto[float32],
		func(b *builder, n, x, g *node) *node { return b.mul(b.scale(g, 3), b.unary(opSquare, x)) })
	opInverse = unary("inverse", "inv", inverseInto[float64], inverseInto[float32],
		func(b *builder, n, x, g *node) *node { return b.unary(opNeg, b.mul(g, b.unary(opSquare, n))) })
	opSigmoid = unary("sigmoid", "sigmoid", sigmoidInto, sigmoidInto32,
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.mul(n, b.binary(opSub, one(b), n))) })
	opTanh = unary("tanh", "tanh", tanhInto, tanhInto32,
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.binary(opSub, one(b), b.unary(opSquare, n))) })
	opSoftplus = unary("softplus", "softplus", each[float64](softplus), each[float32](softplus),
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.unary(opSigmoid, x)) })
	opAbs = unary("abs", "abs", absInto[float64], absInto[float32],
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.unary(opSign, x)) })
	opSin = unary("sin", "sin", each[float64](math.Sin), each[float32](math.Sin),
		func(b *builder, n, x, g *node) *node { return b.mul(g, b.unary(opCos, x)) })
	opCos = unary("cos", "cos", each[float64](math.Cos), each[float32](math.Cos),
		func(b *builder, n, x, g *node) *node { return b.unary(opNeg, b.mul(g, b.unary(opSin, x))) })
	opSign = unary("sign", "sign", each[float64](sign), each[float32](sign), nil)
	opCeil = unary("ceil", "ceil", each[float64](math.Ceil), each[float32](math.Ceil), nil)
	opFloor = unary("floor", "floor", each[float64](math.Floor), each[float32](math.Floor), nil)
	unaryImports["log2"] = func(b *builder, a *node) *node { return b.scale(b.unary(opLog, a), 1/math.Ln2) }
}

// each returns the loop applying f to every element, in float64 and
// rounded to T.
func each[T float](f func(float64) float64) func(out, x []T) {
	return func(out, x []T) {
		for i, v := range x {
			out[i] = T(f(float64(v)))
		}
	}
}

// defineBinary defines the elementwise binary operations; the adjoint of a
// broadcast operand is summed back to its shape (reduceTo).
func defineBinary() {
	binary := func(name string, elem func(x, y float64) float64, vjp func(b *builder, n *node, k int, g *node) *node) opKind {
		return define(opDef{name: name, arity: 2, shape: binaryShape, f64: binaryKernel[float64], f32: binaryKernel[float32],
			elem: elem, vjp: vjp, constant: vjp == nil})
	}
	opAdd = binary("add", func(x, y float64) float64 { return x + y },
		func(b *builder, n *node, k int, g *node) *node { return b.reduceTo(g, n.args[k].shape) })
	opSub = binary("sub", func(x, y float64) float64 { return x - y },
		func(b *builder, n *node, k int, g *node) *node {
			if k == 0 {
				return b.reduceTo(g, n.args[0].shape)
			}
			return b.unary(opNeg, b.reduceTo(g, n.args[1].shape)) // negate the reduced adjoint
		})
	opMul = binary("mul", func(x, y float64) float64 { return x * y },
		func(b *builder, n *node, k int, g *node) *node {
			return b.reduceTo(b.mul(g, n.args[1-k]), n.args[k].shape)
		})
	opDiv = binary("div", func(x, y float64) float64 { return x / y },
		func(b *builder, n *node, k int, g *node) *node {
			x, y := n.args[0], n.args[1]
			if k == 0 {
				return b.reduceTo(b.binary(opDiv, g, y), x.shape)
			}
			return b.reduceTo(b.unary(opNeg, b.binary(opDiv, b.mul(g, n), y)), y.shape)
		})
	opPow = binary("pow", math.Pow, func(b *builder, n *node, k int, g *node) *node {
		x, y := n.args[0], n.args[1]
		if k == 0 {
			d := b.mul(y, b.binary(opPow, x, b.binary(opSub, y, one(b))))
			return b.reduceTo(b.mul(g, d), x.shape)
		}
		return b.reduceTo(b.mul(g, b.mul(n, b.unary(opLog, x))), y.shape)
	})
	opCmp = binary("cmp", nil, nil)
	// The larger (smaller) operand takes the adjoint, x on ties.
	opMaxOf = binary("maxof", math.Max, func(b *builder, n *node, k int, g *node) *node { return extremumVJP(b, n, k, g, cmpGE) })
	opMinOf = binary("minof", math.Min, func(b *builder, n *node, k int, g *node) *node { return extremumVJP(b, n, k, g, cmpLE) })

}

// recognizeElementwise registers gorgonia's elementwise operations.
func recognizeElementwise() {
	recognize("elemUnaryOp", importRule{
		doc: "abs sign ceil floor sin cos exp ln log2 neg square sqrt inv invSqrt cube tanh sigmoid log1p expm1 softplus (and so Mish)",
		check: func(op G.Op) error {
			if _, ok := unaryImports[op.String()]; !ok {
				return fmt.Errorf("unsupported operation %s", op)
			}
			return nil
		},
		translate: func(im *importer, n *G.Node, a []*node) *node { return unaryImports[n.Op().String()](im.b, a[0]) },
	})
	recognize("elemBinOp", importRule{
		doc: "+ - ⊙ ÷ ^ (Add, Sub, HadamardProd, HadamardDiv, Pow, Div, Mul with a scalar; Broadcast… variants) and < > <= >= == != with retSame (Rectify, LeakyRelu; derivative 0)",
		check: func(op G.Op) error {
			sym, retSame := binOpSymbol(op)
			if _, ok := cmpKinds[sym]; ok {
				if !retSame {
					return fmt.Errorf("unsupported operation %s: the comparison returns booleans; pass retSame = true (gorgonia.Gt(a, b, true), say) for 1 or 0 in float64", op)
				}
				return nil
			}
			if _, ok := arithOps[sym]; !ok {
				return fmt.Errorf("unsupported operation %s", op)
			}
			return nil
		},
		translate: func(im *importer, n *G.Node, a []*node) *node {
			sym, _ := binOpSymbol(n.Op())
			if kind, ok := cmpKinds[sym]; ok {
				return im.b.cmp(kind, a[0], a[1])
			}
			return im.b.binary(arithOps[sym], a[0], a[1])
		},
	})
	arithOps = map[string]opKind{"+": opAdd, "-": opSub, "⊙": opMul, "÷": opDiv, "^": opPow}
	between := func(op *opKind) func(im *importer, n *G.Node, a []*node) *node {
		return func(im *importer, n *G.Node, a []*node) *node { return im.b.binary(*op, a[0], a[1]) }
	}
	recognize("maxBetween", importRule{doc: "MaxBetween", translate: between(&opMaxOf)})
	recognize("minBetween", importRule{doc: "MinBetween", translate: between(&opMinOf)})
	recognize("Iop", importRule{doc: "Iop (the identity)",
		translate: func(im *importer, n *G.Node, a []*node) *node { return a[0] }})
	reject("clampOp", "clamping is piecewise linear with a derivative gorgonia defines its own way; write it with MaxBetween and MinBetween")
}

// extremumVJP is the adjoint of argument k of n = max(x, y) (kind cmpGE)
// or min(x, y) (cmpLE): g where x wins (on ties too) for x, elsewhere for y.
func extremumVJP(b *builder, n *node, k int, g *node, kind int) *node {
	x, y := n.args[0], n.args[1]
	wins := b.cmp(kind, x, y)
	if k == 1 {
		wins = b.binary(opSub, b.scalar(1), wins)
	}
	return b.reduceTo(b.mul(g, wins), n.args[k].shape)
}

// arithOps and cmpKinds map the operator symbols of gorgonia's elemBinOp
// (as its String method writes them) to IR operations.
var (
	arithOps map[string]opKind
	cmpKinds = map[string]int{"<": cmpLT, ">": cmpGT, "<=": cmpLE, ">=": cmpGE, "==": cmpEQ, "!=": cmpNE}
)

// binOpSymbol returns the operator symbol of a gorgonia elemBinOp and
// whether it returns values of its operands' type (retSame), from its
// String method ("+ false", say).
func binOpSymbol(op G.Op) (string, bool) {
	s := op.String()
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ' ' {
			return s[:i], s[i+1:] == "true"
		}
	}
	importPanic("gorgonia's elementwise operation %q is not written as \"operator retSame\"", s)
	return "", false
}

// unaryKernel is the kernel of an elementwise unary operation computed by
// loop, split across cores for large operands.
func unaryKernel[T float](loop func(out, x []T)) kernelOf[T] {
	return func(n *node, out []T, in [][]T) {
		x := in[0]
		splitElems(len(out), 1, func(lo, hi int) { loop(out[lo:hi], x[lo:hi]) })
	}
}

// The loops of the cheap unary operations, written out so that the
// operation is inlined. The square roots are correctly rounded in float32
// too: float64's square root, rounded, is float32's.

func negInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = -v
	}
}

func sqrtInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = T(math.Sqrt(float64(v)))
	}
}

func invSqrtInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = T(1 / math.Sqrt(float64(v)))
	}
}

func squareInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = v * v
	}
}

func cubeInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = v * v * v
	}
}

func inverseInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = 1 / v
	}
}

func absInto[T float](out, x []T) {
	for i, v := range x {
		out[i] = T(math.Abs(float64(v)))
	}
}

// softplus is log(1 + exp(v)) without overflow.
func softplus(v float64) float64 {
	if v > 0 {
		return v + math.Log1p(math.Exp(-v))
	}
	return math.Log1p(math.Exp(v))
}

func sign(v float64) float64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func (b *builder) unary(op opKind, a *node) *node {
	return b.add(&node{op: op, args: []*node{a}})
}

// binaryShape is the shape rule of elementwise binary operations: equal
// shapes, or one operand holding a single element, or a row or a column
// repeated over the other.
func binaryShape(n *node) []int {
	x, y := n.args[0], n.args[1]
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
	shapePanic("%v: operand shapes %v and %v differ", n.op, x.shape, y.shape)
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
	shape := binaryShape(&node{op: op, args: []*node{x, y}})
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
	return b.add(&node{op: op, args: []*node{x, y}})
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
	shape := binaryShape(&node{op: opCmp, args: []*node{x, y}})
	x, y = b.unbroadcastOne(x, y, shape)
	return b.add(&node{op: opCmp, args: []*node{x, y}, ints: []int{kind}})
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

// binaryKernel is the kernel of every elementwise binary operation.
func binaryKernel[T float](n *node, out []T, in [][]T) {
	evalBinaryParallel(n, out, in[0], in[1])
}

// binOp is the operation of n on one pair of elements (computed in
// float64 and rounded to T).
func binOp[T float](n *node, a, b T) T {
	if n.op != opCmp {
		return T(n.op.def().elem(float64(a), float64(b)))
	}
	var t bool
	switch n.ints[0] {
	case cmpLT:
		t = a < b
	case cmpGT:
		t = a > b
	case cmpLE:
		t = a <= b
	case cmpGE:
		t = a >= b
	case cmpEQ:
		t = a == b
	case cmpNE:
		t = a != b
	}
	if t {
		return 1
	}
	return 0
}

func evalBinary[T float](n *node, out, x, y []T) {
	switch {
	case len(x) == len(y):
		evalSame(n, out, x, y)
	case len(y) == 1:
		evalScalarY(n, out, x, y[0])
	case len(x) == 1:
		evalScalarX(n, out, x[0], y)
	case len(y) < len(x) && isRow(n.args[1].shape, n.shape): // y repeated
		if evalRepeated(n.op, out, x, y) {
			return
		}
		for r := 0; r < len(x); r += len(y) {
			evalSame(n, out[r:r+len(y)], x[r:r+len(y)], y)
		}
	case len(y) < len(x): // each element of y over a block of x
		l := len(x) / len(y)
		if evalBlocks(n.op, out, x, y, l) {
			return
		}
		for r, c := range y {
			evalScalarY(n, out[r*l:(r+1)*l], x[r*l:(r+1)*l], c)
		}
	case isRow(n.args[0].shape, n.shape): // x repeated
		for r := 0; r < len(y); r += len(x) {
			evalSame(n, out[r:r+len(x)], x, y[r:r+len(x)])
		}
	default: // each element of x over a block of y
		l := len(y) / len(x)
		for r, c := range x {
			evalScalarX(n, out[r*l:(r+1)*l], c, y[r*l:(r+1)*l])
		}
	}
}

// evalBinaryParallel is evalBinary split across cores for large outputs:
// by elements, or by whole rows and columns when one operand repeats.
func evalBinaryParallel[T float](n *node, out, x, y []T) {
	switch {
	case len(out) < parallelElems:
		evalBinary(n, out, x, y)
	case len(x) == len(y):
		splitElems(len(out), 1, func(lo, hi int) { evalBinary(n, out[lo:hi], x[lo:hi], y[lo:hi]) })
	case len(y) == 1:
		splitElems(len(out), 1, func(lo, hi int) { evalBinary(n, out[lo:hi], x[lo:hi], y) })
	case len(x) == 1:
		splitElems(len(out), 1, func(lo, hi int) { evalBinary(n, out[lo:hi], x, y[lo:hi]) })
	case len(y) < len(x) && isRow(n.args[1].shape, n.shape):
		splitElems(len(out), len(y), func(lo, hi int) { evalBinary(n, out[lo:hi], x[lo:hi], y) })
	case len(y) < len(x):
		l := len(x) / len(y)
		splitElems(len(out), l, func(lo, hi int) { evalBinary(n, out[lo:hi], x[lo:hi], y[lo/l:hi/l]) })
	case isRow(n.args[0].shape, n.shape):
		splitElems(len(out), len(x), func(lo, hi int) { evalBinary(n, out[lo:hi], x, y[lo:hi]) })
	default:
		l := len(y) / len(x)
		splitElems(len(out), l, func(lo, hi int) { evalBinary(n, out[lo:hi], x[lo/l:hi/l], y[lo:hi]) })
	}
}

// evalBlocks evaluates, for the four arithmetic operations, x op y[r] on
// each block r of l elements of x, the operation chosen once rather than
// in a call per block (blocks are often short: a softmax's rows), and
// reports whether op was one of them.
func evalBlocks[T float](op opKind, out, x, y []T, l int) bool {
	out, x = out[:len(y)*l], x[:len(y)*l]
	if l >= vecRun && op != opCmp && elemNum(op, 0, out[:l], x[:l], y[0]) {
		for r := 1; r < len(y); r++ {
			elemNum(op, 0, out[r*l:(r+1)*l], x[r*l:(r+1)*l], y[r])
		}
		return true
	}
	switch op {
	case opAdd:
		for r, c := range y {
			o, xr := out[r*l:(r+1)*l], x[r*l:(r+1)*l]
			for i, v := range xr {
				o[i] = v + c
			}
		}
	case opSub:
		for r, c := range y {
			o, xr := out[r*l:(r+1)*l], x[r*l:(r+1)*l]
			for i, v := range xr {
				o[i] = v - c
			}
		}
	case opMul:
		for r, c := range y {
			o, xr := out[r*l:(r+1)*l], x[r*l:(r+1)*l]
			for i, v := range xr {
				o[i] = v * c
			}
		}
	case opDiv:
		for r, c := range y {
			o, xr := out[r*l:(r+1)*l], x[r*l:(r+1)*l]
			for i, v := range xr {
				o[i] = v / c
			}
		}
	default:
		return false
	}
	return true
}

// evalRepeated evaluates, for the four arithmetic operations, x op y on
// each block of len(y) elements of x, the operation chosen once (see
// evalBlocks), and reports whether op was one of them.
func evalRepeated[T float](op opKind, out, x, y []T) bool {
	l := len(y)
	out = out[:len(x)]
	if l >= vecRun && op != opCmp && len(x) >= l && elemVec(op, 0, out[:l], x[:l], y) {
		for r := l; r+l <= len(x); r += l {
			elemVec(op, 0, out[r:r+l], x[r:r+l], y)
		}
		return true
	}
	switch op {
	case opAdd:
		for r := 0; r+l <= len(x); r += l {
			o, xr := out[r:r+l], x[r:r+l]
			for i, v := range y {
				o[i] = xr[i] + v
			}
		}
	case opSub:
		for r := 0; r+l <= len(x); r += l {
			o, xr := out[r:r+l], x[r:r+l]
			for i, v := range y {
				o[i] = xr[i] - v
			}
		}
	case opMul:
		for r := 0; r+l <= len(x); r += l {
			o, xr := out[r:r+l], x[r:r+l]
			for i, v := range y {
				o[i] = xr[i] * v
			}
		}
	case opDiv:
		for r := 0; r+l <= len(x); r += l {
			o, xr := out[r:r+l], x[r:r+l]
			for i, v := range y {
				o[i] = xr[i] / v
			}
		}
	default:
		return false
	}
	return true
}

// evalScalarY evaluates an elementwise operation of x and the number c.
func evalScalarY[T float](n *node, out, x []T, c T) {
	x = x[:len(out)]
	if elemNum(n.op, cmpKind(n), out, x, c) {
		return
	}
	switch n.op {
	case opAdd:
		for i, v := range x {
			out[i] = v + c
		}
	case opSub:
		for i, v := range x {
			out[i] = v - c
		}
	case opMul:
		for i, v := range x {
			out[i] = v * c
		}
	case opDiv:
		for i, v := range x {
			out[i] = v / c
		}
	case opCmp:
		cmpInto(n.ints[0], out, x, []T{c})
	default:
		for i, v := range x {
			out[i] = binOp(n, v, c)
		}
	}
}

// evalScalarX evaluates an elementwise operation of the number c and y.
func evalScalarX[T float](n *node, out []T, c T, y []T) {
	y = y[:len(out)]
	switch n.op {
	case opAdd:
		for i, v := range y {
			out[i] = c + v
		}
	case opSub:
		for i, v := range y {
			out[i] = c - v
		}
	case opMul:
		for i, v := range y {
			out[i] = c * v
		}
	case opDiv:
		for i, v := range y {
			out[i] = c / v
		}
	default:
		for i, v := range y {
			out[i] = binOp(n, c, v)
		}
	}
}

// evalSame evaluates an elementwise operation on operands of out's length.
func evalSame[T float](n *node, out, x, y []T) {
	x, y = x[:len(out)], y[:len(out)]
	if elemVec(n.op, cmpKind(n), out, x, y) {
		return
	}
	switch n.op {
	case opAdd:
		for i := range out {
			out[i] = x[i] + y[i]
		}
	case opSub:
		for i := range out {
			out[i] = x[i] - y[i]
		}
	case opMul:
		for i := range out {
			out[i] = x[i] * y[i]
		}
	case opDiv:
		for i := range out {
			out[i] = x[i] / y[i]
		}
	case opCmp:
		cmpInto(n.ints[0], out, x, y)
	default:
		for i := range out {
			out[i] = binOp(n, x[i], y[i])
		}
	}
}

// vecRun is the shortest run of elements for which evalBlocks and
// evalRepeated call a vector kernel (elemVec, elemNum) per block rather
// than loop in Go.
const vecRun = 32

// cmpKind returns the comparison of an opCmp node, 0 for other nodes.
func cmpKind(n *node) int {
	if n.op == opCmp {
		return n.ints[0]
	}
	return 0
}

// cmpInto sets out[i] to 1 where x[i] compares true with y[i] (or y[0]
// when y has one element), 0 elsewhere, with a loop per comparison rather
// than a call per element.
func cmpInto[T float](kind int, out, x, y []T) {
	const one = 0x3ff0000000000000 // the bits of 1.0: conditional moves, not branches
	x = x[:len(out)]
	step := 1
	if len(y) == 1 {
		step = 0
	} else {
		y = y[:len(out)]
	}
	switch kind {
	case cmpLT:
		for i, v := range x {
			var t uint64
			if v < y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	case cmpGT:
		for i, v := range x {
			var t uint64
			if v > y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	case cmpLE:
		for i, v := range x {
			var t uint64
			if v <= y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	case cmpGE:
		for i, v := range x {
			var t uint64
			if v >= y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	case cmpEQ:
		for i, v := range x {
			var t uint64
			if v == y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	case cmpNE:
		for i, v := range x {
			var t uint64
			if v != y[i*step] {
				t = one
			}
			out[i] = T(math.Float64frombits(t))
		}
	}
}
