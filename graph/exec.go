package graph

import (
	"math"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
)

// program is a compiled, pruned list of steps that computes a set of output
// nodes. Every step owns a buffer allocated once at compile time, except
// leaves (bound to caller memory before each run), constants (their data)
// and reshapes (which share their argument's buffer). Running a program
// allocates nothing.
type program struct {
	steps  []step
	bufs   [][]float64
	bufs32 [][]float32   // the buffers of float32 leaves and constants
	index  map[*node]int // step of each node
	outs   []int
	argBuf [][]float64 // scratch for one step's argument buffers
	owner  any         // the Linearization whose fixed part the buffers hold
}

type step struct {
	n     *node
	args  []int
	alias bool // the output is the buffer of args[0] (reshape)
	dyn   bool // depends on a dynamic leaf (see compile)
	mixed bool // reads a float32 node (see evalMixed)
}

// compile builds the program computing outs. Steps that depend on a leaf in
// dynamic are marked, so exec can recompute only them (a linearization:
// everything else is a function of the fixed point).
func compile(outs []*node, dynamic map[*node]bool) *program {
	p := &program{index: map[*node]int{}}
	var visit func(n *node)
	visit = func(n *node) {
		if _, ok := p.index[n]; ok {
			return
		}
		for _, a := range n.args {
			visit(a)
		}
		st := step{n: n, dyn: dynamic[n]}
		for _, a := range n.args {
			ai := p.index[a]
			st.args = append(st.args, ai)
			st.dyn = st.dyn || p.steps[ai].dyn
			st.mixed = st.mixed || a.f32
		}
		st.alias = n.op == opReshape
		p.index[n] = len(p.steps)
		p.steps = append(p.steps, st)
	}
	for _, o := range outs {
		visit(o)
	}
	p.bufs = make([][]float64, len(p.steps))
	p.bufs32 = make([][]float32, len(p.steps))
	maxArgs := 0
	for i, st := range p.steps {
		switch {
		case st.n.op == opConst && st.n.f32:
			p.bufs32[i] = st.n.data32
		case st.n.op == opConst:
			p.bufs[i] = st.n.data
		case st.n.op == opLeaf || st.alias:
		default:
			p.bufs[i] = make([]float64, st.n.size)
		}
		if len(st.args) > maxArgs {
			maxArgs = len(st.args)
		}
	}
	p.argBuf = make([][]float64, maxArgs)
	for _, o := range outs {
		p.outs = append(p.outs, p.index[o])
	}
	return p
}

// bind points leaf n at buf for the next runs. Leaves the program does not
// use are ignored.
func (p *program) bind(n *node, buf []float64) {
	if i, ok := p.index[n]; ok {
		if len(buf) != n.size || n.f32 {
			panic("graph: binding " + n.String() + " to a float64 buffer of length " + strconv.Itoa(len(buf)))
		}
		p.bufs[i] = buf
	}
}

// bindArray binds leaf n to a, in the leaf's precision.
func (p *program) bindArray(n *node, a array) {
	i, ok := p.index[n]
	switch {
	case !ok:
	case !n.f32:
		p.bind(n, a.f64)
	case len(a.f32) != n.size:
		panic("graph: binding " + n.String() + " to a float32 buffer of length " + strconv.Itoa(len(a.f32)))
	default:
		p.bufs32[i] = a.f32
	}
}

// release drops the program's references to bound caller memory (leaves and
// the reshapes that alias them), so a Problem does not keep the caller's
// last vectors alive. Bind again before the next run.
func (p *program) release() { p.releaseIf(false) }

// releaseIf drops the references of release, only for dynamic steps when
// dynOnly is set (the fixed part stays bound).
func (p *program) releaseIf(dynOnly bool) {
	for i, st := range p.steps {
		if (st.n.op == opLeaf || st.alias) && (st.dyn || !dynOnly) {
			p.bufs[i], p.bufs32[i] = nil, nil
		}
	}
}

// uses reports whether the program reads leaf n.
func (p *program) uses(n *node) bool {
	_, ok := p.index[n]
	return ok
}

// out returns the buffer of output i; it is overwritten by the next run.
func (p *program) out(i int) []float64 { return p.bufs[p.outs[i]] }

// run executes every step.
func (p *program) run() { p.exec(nil, runAll) }

// Which steps exec runs.
const (
	runAll     = iota
	runStatic  // only steps that do not depend on a dynamic leaf
	runDynamic // only steps that do; the others hold an earlier run's values
)

// need returns the mask of steps that output i depends on.
func (p *program) need(outs ...int) []bool {
	m := make([]bool, len(p.steps))
	var mark func(i int)
	mark = func(i int) {
		if m[i] {
			return
		}
		m[i] = true
		for _, a := range p.steps[i].args {
			mark(a)
		}
	}
	for _, o := range outs {
		mark(p.outs[o])
	}
	return m
}

// exec runs the steps selected by mode, restricted to mask when it is not
// nil.
func (p *program) exec(mask []bool, mode int) {
	running.Add(1)
	defer running.Add(-1)
	for i := range p.steps {
		st := &p.steps[i]
		switch {
		case st.n.op == opLeaf || st.n.op == opConst:
			continue
		case st.alias:
			p.bufs[i] = p.bufs[st.args[0]]
			continue
		case mask != nil && !mask[i],
			mode == runStatic && st.dyn,
			mode == runDynamic && !st.dyn:
			continue
		}
		in := p.argBuf[:len(st.args)]
		for k, a := range st.args {
			in[k] = p.bufs[a]
		}
		if st.mixed {
			p.evalMixed(st, p.bufs[i], in)
			continue
		}
		eval(st.n, p.bufs[i], in)
	}
	clear(p.argBuf) // hold no caller memory between runs
}

// evalMixed computes the step st, which reads a float32 node (whose entry
// in in is nil), into out.
func (p *program) evalMixed(st *step, out []float64, in [][]float64) {
	n := st.n
	switch n.op {
	case opWiden:
		widenInto(out, p.bufs32[st.args[0]])
	case opMatMul:
		matmulMixed(out, in[0], p.bufs32[st.args[0]], in[1], p.bufs32[st.args[1]],
			n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
	default:
		panic("graph: " + n.String() + " reads a float32 node")
	}
}

// eval computes node n into out from its argument values in.
func eval(n *node, out []float64, in [][]float64) {
	switch {
	case n.op.unary():
		x := in[0]
		splitElems(len(out), 1, func(lo, hi int) { evalUnary(n.op, out[lo:hi], x[lo:hi]) })
		return
	case n.op.binary():
		evalBinaryParallel(n, out, in[0], in[1])
		return
	}
	a := n.args
	switch n.op {
	case opReshape: // programs alias reshapes; this serves constant folding
		copy(out, in[0])
	case opTranspose:
		transposeInto(out, in[0], a[0].shape, n.ints)
	case opBroadcast:
		broadcastInto(out, in[0], a[0].shape, n.shape)
	case opSum:
		outer, mid, inner := split3(a[0].shape, n.axis)
		sumAxis(out, in[0], outer, mid, inner)
	case opMax:
		outer, mid, inner := split3(a[0].shape, n.axis)
		maxAxis(out, in[0], outer, mid, inner)
	case opConcat:
		outer, _, inner := split3(n.shape, n.axis)
		off := 0
		for o := 0; o < outer; o++ {
			for k, arg := range a {
				chunk := arg.shape[n.axis] * inner
				copy(out[off:off+chunk], in[k][o*chunk:(o+1)*chunk])
				off += chunk
			}
		}
	case opSlice:
		outer, mid, inner := split3(a[0].shape, n.axis)
		sliceCopy(out, in[0], outer, mid, inner, n.ints, false)
	case opSliceGrad:
		outer, mid, inner := split3(n.shape, n.axis)
		for i := range out {
			out[i] = 0
		}
		sliceCopy(in[0], out, outer, mid, inner, n.ints, true)
	case opMatMul:
		matmulInto(out, in[0], in[1], a[0].shape, a[1].shape, n.ints[0] == 1, n.ints[1] == 1)
	case opLogSoftmax:
		outer, mid, inner := split3(n.shape, n.axis)
		if inner != 1 {
			logSoftmax(out, in[0], outer, mid, inner)
			break
		}
		x := in[0]
		splitElems(len(out), mid, func(lo, hi int) { logSoftmax(out[lo:hi], x[lo:hi], (hi-lo)/mid, mid, 1) })
	case opBatchNorm:
		bnForward(out, in[0], in[1], in[2], n.shape[0], n.shape[1], n.eps)
	case opBatchNormGrad:
		bnBackward(out, in[0], in[1], in[2], n.shape[0], n.shape[1], n.eps)
	case opIm2Col:
		im2colInto(out, in[0], a[0].shape, convFrom(n.ints))
	case opCol2Im:
		col2imInto(out, in[0], n.shape, convFrom(n.ints))
	case opPoolGather:
		poolGatherInto(out, in[0], in[1], a[0].shape, poolFrom(n.ints))
	case opPoolScatter:
		poolScatterInto(out, in[0], in[1], a[0].shape, poolFrom(n.ints))
	case opGather:
		row := n.size / max(n.shape[0], 1)
		for r, v := range in[1] {
			i := int(v)
			copy(out[r*row:(r+1)*row], in[0][i*row:(i+1)*row])
		}
	case opScatterAdd:
		row := n.size / max(n.shape[0], 1)
		for i := range out {
			out[i] = 0
		}
		for r, v := range in[1] {
			i := int(v)
			dst := out[i*row : (i+1)*row]
			for j, g := range in[0][r*row : (r+1)*row] {
				dst[j] += g
			}
		}
	default:
		panic("graph: no kernel for " + n.op.String())
	}
}

func evalUnary(op opKind, out, x []float64) {
	switch op {
	case opNeg:
		for i, v := range x {
			out[i] = -v
		}
	case opExp:
		expInto(out, x)
	case opLog:
		logInto(out, x)
	case opLog1p:
		for i, v := range x {
			out[i] = math.Log1p(v)
		}
	case opExpm1:
		for i, v := range x {
			out[i] = math.Expm1(v)
		}
	case opSqrt:
		for i, v := range x {
			out[i] = math.Sqrt(v)
		}
	case opInvSqrt:
		for i, v := range x {
			out[i] = 1 / math.Sqrt(v)
		}
	case opSquare:
		for i, v := range x {
			out[i] = v * v
		}
	case opCube:
		for i, v := range x {
			out[i] = v * v * v
		}
	case opInverse:
		for i, v := range x {
			out[i] = 1 / v
		}
	case opSigmoid:
		for i, v := range x {
			out[i] = sigmoid(v)
		}
	case opTanh:
		for i, v := range x {
			out[i] = math.Tanh(v)
		}
	case opSoftplus:
		for i, v := range x {
			out[i] = softplus(v)
		}
	case opAbs:
		for i, v := range x {
			out[i] = math.Abs(v)
		}
	case opSign:
		for i, v := range x {
			switch {
			case v > 0:
				out[i] = 1
			case v < 0:
				out[i] = -1
			default:
				out[i] = 0
			}
		}
	case opSin:
		for i, v := range x {
			out[i] = math.Sin(v)
		}
	case opCos:
		for i, v := range x {
			out[i] = math.Cos(v)
		}
	}
}

func sigmoid(v float64) float64 {
	if v >= 0 {
		return 1 / (1 + math.Exp(-v))
	}
	e := math.Exp(v)
	return e / (1 + e)
}

// softplus is log(1 + exp(v)) without overflow.
func softplus(v float64) float64 {
	if v > 0 {
		return v + math.Log1p(math.Exp(-v))
	}
	return math.Log1p(math.Exp(v))
}

func binOp(op opKind, kind int, a, b float64) float64 {
	switch op {
	case opAdd:
		return a + b
	case opSub:
		return a - b
	case opMul:
		return a * b
	case opDiv:
		return a / b
	case opPow:
		return math.Pow(a, b)
	}
	var t bool
	switch kind {
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

func evalBinary(n *node, out, x, y []float64) {
	kind := 0
	if n.op == opCmp {
		kind = n.ints[0]
	}
	switch {
	case len(x) == len(y):
		evalSame(n.op, kind, out, x, y)
	case len(y) == 1:
		evalScalarY(n.op, kind, out, x, y[0])
	case len(x) == 1:
		evalScalarX(n.op, kind, out, x[0], y)
	case len(y) < len(x) && isRow(n.args[1].shape, n.shape): // y repeated
		for r := 0; r < len(x); r += len(y) {
			evalSame(n.op, kind, out[r:r+len(y)], x[r:r+len(y)], y)
		}
	case len(y) < len(x): // each element of y over a block of x
		l := len(x) / len(y)
		for r, c := range y {
			evalScalarY(n.op, kind, out[r*l:(r+1)*l], x[r*l:(r+1)*l], c)
		}
	case isRow(n.args[0].shape, n.shape): // x repeated
		for r := 0; r < len(y); r += len(x) {
			evalSame(n.op, kind, out[r:r+len(x)], x, y[r:r+len(x)])
		}
	default: // each element of x over a block of y
		l := len(y) / len(x)
		for r, c := range x {
			evalScalarX(n.op, kind, out[r*l:(r+1)*l], c, y[r*l:(r+1)*l])
		}
	}
}

// parallelElems is the number of elements above which an elementwise
// operation is split across cores.
const parallelElems = 1 << 16

// running counts the programs executing now and the parts of splits in
// progress. When there are as many as cores (tasks run in parallel, as
// package meta does, or a split already uses every core), the operations
// of each run on its own goroutine: splitting them too would only make the
// halves wait for each other.
var running atomic.Int32

// spareCores reports whether an operation may be split across cores.
func spareCores(parts int) bool {
	return parts >= 2 && int(running.Load()) < parts
}

// splitElems runs f on ranges [lo, hi) covering [0, n) whose bounds are
// multiples of grain, in parallel when n is at least parallelElems and
// cores are spare.
func splitElems(n, grain int, f func(lo, hi int)) {
	parts := runtime.GOMAXPROCS(0)
	units := n / grain
	if n < parallelElems || !spareCores(parts) || units < parts {
		f(0, n)
		return
	}
	runParts(parts, func(q int) {
		lo, hi := units*q/parts*grain, units*(q+1)/parts*grain
		if q == parts-1 {
			hi = n
		}
		f(lo, hi)
	})
}

// evalBinaryParallel is evalBinary split across cores for large outputs:
// by elements, or by whole rows and columns when one operand repeats.
func evalBinaryParallel(n *node, out, x, y []float64) {
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

// evalScalarY evaluates an elementwise operation of x and the number c.
func evalScalarY(op opKind, kind int, out, x []float64, c float64) {
	x = x[:len(out)]
	switch op {
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
		cmpInto(kind, out, x, []float64{c})
	default:
		for i, v := range x {
			out[i] = binOp(op, kind, v, c)
		}
	}
}

// evalScalarX evaluates an elementwise operation of the number c and y.
func evalScalarX(op opKind, kind int, out []float64, c float64, y []float64) {
	y = y[:len(out)]
	switch op {
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
			out[i] = binOp(op, kind, c, v)
		}
	}
}

// evalSame evaluates an elementwise operation on operands of out's length.
func evalSame(op opKind, kind int, out, x, y []float64) {
	x, y = x[:len(out)], y[:len(out)]
	switch op {
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
		cmpInto(kind, out, x, y)
	default:
		for i := range out {
			out[i] = binOp(op, kind, x[i], y[i])
		}
	}
}

// cmpInto sets out[i] to 1 where x[i] compares true with y[i] (or y[0]
// when y has one element), 0 elsewhere, with a loop per comparison rather
// than a call per element.
func cmpInto(kind int, out, x, y []float64) {
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
			out[i] = math.Float64frombits(t)
		}
	case cmpGT:
		for i, v := range x {
			var t uint64
			if v > y[i*step] {
				t = one
			}
			out[i] = math.Float64frombits(t)
		}
	case cmpLE:
		for i, v := range x {
			var t uint64
			if v <= y[i*step] {
				t = one
			}
			out[i] = math.Float64frombits(t)
		}
	case cmpGE:
		for i, v := range x {
			var t uint64
			if v >= y[i*step] {
				t = one
			}
			out[i] = math.Float64frombits(t)
		}
	case cmpEQ:
		for i, v := range x {
			var t uint64
			if v == y[i*step] {
				t = one
			}
			out[i] = math.Float64frombits(t)
		}
	case cmpNE:
		for i, v := range x {
			var t uint64
			if v != y[i*step] {
				t = one
			}
			out[i] = math.Float64frombits(t)
		}
	}
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

func sumAxis(out, x []float64, outer, mid, inner int) {
	for o := 0; o < outer; o++ {
		dst := out[o*inner : (o+1)*inner]
		if inner == 1 {
			s := 0.0
			for _, v := range x[o*mid : (o+1)*mid] {
				s += v
			}
			dst[0] = s
			continue
		}
		for i := range dst {
			dst[i] = 0
		}
		for m := 0; m < mid; m++ {
			src := x[(o*mid+m)*inner : (o*mid+m+1)*inner]
			for i, v := range src {
				dst[i] += v
			}
		}
	}
}

func maxAxis(out, x []float64, outer, mid, inner int) {
	for o := 0; o < outer; o++ {
		dst := out[o*inner : (o+1)*inner]
		copy(dst, x[o*mid*inner:(o*mid+1)*inner])
		for m := 1; m < mid; m++ {
			src := x[(o*mid+m)*inner : (o*mid+m+1)*inner]
			for i, v := range src {
				if v > dst[i] || math.IsNaN(v) {
					dst[i] = v
				}
			}
		}
	}
}

// sliceCopy copies the slice described by ints (start, end, step) along the
// middle axis of big into small, or back from small into big when reverse.
func sliceCopy(small, big []float64, outer, mid, inner int, ints []int, reverse bool) {
	start, end, stp := ints[0], ints[1], ints[2]
	n := sliceLen(start, end, stp)
	for o := 0; o < outer; o++ {
		for j := 0; j < n; j++ {
			s := small[(o*n+j)*inner : (o*n+j+1)*inner]
			b := big[(o*mid+start+j*stp)*inner : (o*mid+start+j*stp+1)*inner]
			if reverse {
				copy(b, s)
			} else {
				copy(s, b)
			}
		}
	}
}

func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// walk calls f(outIndex, inOffset) over every element of an output of shape
// oshape whose input offset advances by istr per output axis.
func walk(oshape, istr []int, f func(o, i int)) {
	total := sizeOf(oshape)
	if total == 0 {
		return
	}
	nd := len(oshape)
	idx := make([]int, nd)
	off := 0
	for o := 0; o < total; o++ {
		f(o, off)
		for ax := nd - 1; ax >= 0; ax-- {
			idx[ax]++
			off += istr[ax]
			if idx[ax] < oshape[ax] {
				break
			}
			off -= istr[ax] * oshape[ax]
			idx[ax] = 0
		}
	}
}

func transposeInto(out, x []float64, shape, perm []int) {
	// Merge runs of output axes that are adjacent input axes in order: a
	// batched 2-D transpose ((n, h, w, c) to (n, c, h, w) is (n, hw, c) to
	// (n, c, hw)) takes the tiled loop. cs holds the merged sizes in output
	// order, start the first input axis of each.
	var cs, start []int
	for i := 0; i < len(perm); i++ {
		size, j := shape[perm[i]], i
		for j+1 < len(perm) && perm[j+1] == perm[j]+1 {
			j++
			size *= shape[perm[j]]
		}
		cs, start = append(cs, size), append(start, perm[i])
		i = j
	}
	// order lists the merged output axes in input order.
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return start[order[a]] < start[order[b]] })
	switch {
	case len(cs) == 1:
		copy(out, x)
		return
	case len(cs) == 2:
		transpose2(out, x, cs[1], cs[0])
		return
	case len(cs) == 3 && order[0] == 0 && order[1] == 2 && order[2] == 1:
		r, c := cs[2], cs[1] // input rows and columns of each batch element
		for b := 0; b < cs[0]; b++ {
			transpose2(out[b*r*c:(b+1)*r*c], x[b*r*c:(b+1)*r*c], r, c)
		}
		return
	}
	is := strides(shape)
	oshape := make([]int, len(perm))
	ostr := make([]int, len(perm))
	for i, p := range perm {
		oshape[i] = shape[p]
		ostr[i] = is[p]
	}
	walk(oshape, ostr, func(o, i int) { out[o] = x[i] })
}

// transpose2 writes the transpose of the r×c matrix x to out, in tiles
// that stay in cache.
func transpose2(out, x []float64, r, c int) {
	const tile = 16
	for i0 := 0; i0 < r; i0 += tile {
		i1 := min(i0+tile, r)
		for j0 := 0; j0 < c; j0 += tile {
			j1 := min(j0+tile, c)
			for i := i0; i < i1; i++ {
				row := x[i*c : i*c+j1]
				for j := j0; j < j1; j++ {
					out[j*r+i] = row[j]
				}
			}
		}
	}
}

func broadcastInto(out, x []float64, ishape, oshape []int) {
	if len(oshape) == 2 {
		r, c := oshape[0], oshape[1]
		switch {
		case ishape[0] == 1 && ishape[1] == c:
			for i := 0; i < r; i++ {
				copy(out[i*c:(i+1)*c], x)
			}
			return
		case ishape[1] == 1 && ishape[0] == r:
			for i := 0; i < r; i++ {
				v := x[i]
				row := out[i*c : (i+1)*c]
				for j := range row {
					row[j] = v
				}
			}
			return
		}
	}
	is := strides(ishape)
	for i, d := range ishape {
		if d == 1 {
			is[i] = 0
		}
	}
	walk(oshape, is, func(o, i int) { out[o] = x[i] })
}

func logSoftmax(out, x []float64, outer, mid, inner int) {
	if inner == 1 {
		// Rows: shift each by its maximum, vector exponentials over blocks
		// of rows, then subtract the logarithms of the row sums.
		x, out := x[:outer*mid], out[:outer*mid]
		for r := 0; r < len(x); r += mid {
			row, dst := x[r:r+mid], out[r:r+mid]
			m := row[0]
			for _, v := range row[1:] {
				if v > m {
					m = v
				}
			}
			for j, v := range row {
				dst[j] = v - m
			}
		}
		// The exponentials go to a buffer on the stack, a block of rows
		// at a time (a row at a time from the pool for rows longer than
		// the buffer), so that no buffer the size of the data is kept.
		var buf, sums [4096]float64
		rows := max(1, len(buf)/mid)
		for o0 := 0; o0 < outer; o0 += rows {
			o1 := min(outer, o0+rows)
			seg := out[o0*mid : o1*mid]
			e := buf[:min(len(seg), len(buf))]
			var p *[]float64
			if len(seg) > len(buf) {
				p = getScratch(len(seg))
				e = *p
			}
			expInto(e, seg)
			ls := sums[:o1-o0]
			for i := range ls {
				s := 0.0
				for _, v := range e[i*mid : (i+1)*mid] {
					s += v
				}
				ls[i] = s
			}
			logInto(ls, ls)
			for i, l := range ls {
				dst := seg[i*mid : (i+1)*mid]
				for j := range dst {
					dst[j] -= l
				}
			}
			if p != nil {
				putScratch(p)
			}
		}
		return
	}
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*mid*inner + i
			m := math.Inf(-1)
			for j := 0; j < mid; j++ {
				if v := x[base+j*inner]; v > m {
					m = v
				}
			}
			s := 0.0
			for j := 0; j < mid; j++ {
				s += math.Exp(x[base+j*inner] - m)
			}
			lse := m + math.Log(s)
			for j := 0; j < mid; j++ {
				out[base+j*inner] = x[base+j*inner] - lse
			}
		}
	}
}

// im2colInto writes the patches of im (batch, channels, h, w) into col
// (batch, outH, outW, channels·kh·kw).
func im2colInto(col, im []float64, shape []int, p convParams) {
	nb, ch, h, w := shape[0], shape[1], shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	if p.dH == 1 && p.dW == 1 {
		im2colPadded(col, im, nb, ch, h, w, oh, ow, p)
		return
	}
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				c0 := oc*p.sW - p.padW
				for k := 0; k < ch; k++ {
					for kr := 0; kr < p.kh; kr++ {
						dst := col[c : c+p.kw]
						c += p.kw
						r := or*p.sH - p.padH + kr*p.dH
						if r < 0 || r >= h {
							clear(dst)
							continue
						}
						row := img[(k*h+r)*w : (k*h+r+1)*w]
						for kc := range dst {
							if cc := c0 + kc*p.dW; uint(cc) < uint(w) {
								dst[kc] = row[cc]
							} else {
								dst[kc] = 0
							}
						}
					}
				}
			}
		}
	}
}

// im2colPadded is im2colInto without dilation: each image is copied once
// into a zero-padded plane per channel, so that every row of every patch is
// a run of a padded row, copied without a bounds test per element.
func im2colPadded(col, im []float64, nb, ch, h, w, oh, ow int, p convParams) {
	ph, pw := h+2*p.padH, w+2*p.padW
	buf := getScratch(ch * ph * pw)
	defer putScratch(buf)
	pad := *buf
	clear(pad)
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for k := 0; k < ch; k++ {
			for r := 0; r < h; r++ {
				copy(pad[(k*ph+r+p.padH)*pw+p.padW:], img[(k*h+r)*w:(k*h+r+1)*w])
			}
		}
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				base := or*p.sH*pw + oc*p.sW
				for k := 0; k < ch; k++ {
					plane := pad[k*ph*pw:]
					for kr := 0; kr < p.kh; kr++ {
						src := plane[base+kr*pw : base+kr*pw+p.kw]
						dst := col[c : c+p.kw]
						c += p.kw
						if len(dst) == 3 { // the common 3×3: three moves, not a call
							dst[0], dst[1], dst[2] = src[0], src[1], src[2]
						} else {
							copy(dst, src)
						}
					}
				}
			}
		}
	}
}

// col2imInto is the adjoint of im2colInto: it sums patch entries back into
// their image positions.
func col2imInto(im, col []float64, shape []int, p convParams) {
	nb, ch, h, w := shape[0], shape[1], shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	clear(im)
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				c0 := oc*p.sW - p.padW
				for k := 0; k < ch; k++ {
					for kr := 0; kr < p.kh; kr++ {
						src := col[c : c+p.kw]
						c += p.kw
						r := or*p.sH - p.padH + kr*p.dH
						if r < 0 || r >= h {
							continue
						}
						row := img[(k*h+r)*w : (k*h+r+1)*w]
						for kc, v := range src {
							if cc := c0 + kc*p.dW; uint(cc) < uint(w) {
								row[cc] += v
							}
						}
					}
				}
			}
		}
	}
}

// pool2x2 is the common 2×2 pooling with stride 2 and no padding.
var pool2x2 = poolParams{kh: 2, kw: 2, sH: 2, sW: 2}

// poolArgmax returns, for output window (or, oc) of one channel plane, the
// plane offset of its largest element (the first one on ties); padding
// never wins. fast says that p is pool2x2.
func poolArgmax(plane []float64, h, w, or, oc int, p poolParams, fast bool) int {
	if fast {
		// The first largest of the four, in the order of the general case
		// below, without branches (which mispredict on activations).
		i := 2*or*w + 2*oc
		q := plane[i : i+w+2]
		bi := b2i(q[1] > q[0])
		t := b2i(q[w] > q[bi])
		bi += t * (w - bi)
		t = b2i(q[w+1] > q[bi])
		bi += t * (w + 1 - bi)
		return i + bi
	}
	best, bi := math.Inf(-1), -1
	for kr := 0; kr < p.kh; kr++ {
		r := or*p.sH - p.padN + kr
		if r < 0 || r >= h {
			continue
		}
		for kc := 0; kc < p.kw; kc++ {
			c := oc*p.sW - p.padW + kc
			if c < 0 || c >= w {
				continue
			}
			if v := plane[r*w+c]; bi < 0 || v > best {
				best, bi = v, r*w+c
			}
		}
	}
	return bi
}

func poolGatherInto(out, src, val []float64, shape []int, p poolParams) {
	h, w := shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	planes := shape[0] * shape[1]
	fast := p == pool2x2
	o := 0
	for pl := 0; pl < planes; pl++ {
		s := src[pl*h*w : (pl+1)*h*w]
		v := val[pl*h*w : (pl+1)*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				out[o] = v[poolArgmax(s, h, w, or, oc, p, fast)]
				o++
			}
		}
	}
}

func poolScatterInto(out, src, g []float64, shape []int, p poolParams) {
	h, w := shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	planes := shape[0] * shape[1]
	fast := p == pool2x2
	for i := range out {
		out[i] = 0
	}
	o := 0
	for pl := 0; pl < planes; pl++ {
		s := src[pl*h*w : (pl+1)*h*w]
		dst := out[pl*h*w : (pl+1)*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				dst[poolArgmax(s, h, w, or, oc, p, fast)] += g[o]
				o++
			}
		}
	}
}
