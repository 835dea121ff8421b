package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file translates a gorgonia expression into IR. The table below is the
// whole set of gorgonia operations graph/ accepts; anything else is rejected
// by checkSupported before a single node is built or run, because some
// gorgonia kernels panic inside a goroutine where recover cannot reach.

// Supported lists, for documentation and error messages, the gorgonia
// operations that graph/ imports, each with the derivative rules of
// diff.go and verified against finite differences in the op-table test.
var Supported = []string{
	"+ - ⊙ ÷ ^ (Add, Sub, HadamardProd, HadamardDiv, Pow; tensor⊙tensor and scalar⊙tensor)",
	"< > <= >= == != with retSame (Rectify, LeakyRelu; derivative 0)",
	"abs sign sin cos exp ln log2 neg square sqrt inv invSqrt cube tanh sigmoid log1p expm1 softplus",
	"Mul: matrix×matrix (with transposes), matrix×vector, vector·vector, OuterProd",
	"Sum, Max, Mean (Sum ÷ SizeOf) along any axes",
	"Reshape, Transpose, Concat, Slice (with steps), broadcasting (BroadcastAdd & co.)",
	"SoftMax, LogSoftMax (any axis)",
	"Im2Col and so Conv2d, MaxPool2D",
	"graph.LogSoftmax, graph.Gather, graph.BatchNorm (this package's operations)",
}

// supportedOp reports whether graph/ can import op, and a name for it.
func supportedOp(op G.Op) (string, bool) {
	switch op.(type) {
	case logSoftmaxOp, gatherOp, batchNormOp:
		return op.String(), true
	}
	name := typeName(op)
	switch name {
	case "elemBinOp":
		sym, retSame := binOpSymbol(op)
		if _, ok := cmpKinds[sym]; ok {
			if !retSame {
				return op.String() + " returning booleans", false
			}
			return op.String(), true
		}
		_, ok := arithOps[sym]
		return op.String(), ok
	case "elemUnaryOp":
		_, ok := unaryOps[op.String()]
		return op.String(), ok
	case "linAlgBinOp":
		return op.String(), linAlgKind(op) != "batched"
	case "sumOp", "maxOp", "reshapeOp", "transposeOp", "repeatOp", "sizeOp", "concatOp",
		"sliceOp", "softmaxOp", "im2colOp", "maxPoolOp", "constantScalar", "constantTensor":
		return op.String(), true
	}
	return fmt.Sprintf("%s (%s)", op.String(), name), false
}

var unaryOps = map[string]opKind{
	"abs": opAbs, "sign": opSign, "sin": opSin, "cos": opCos, "exp": opExp,
	"ln": opLog, "log2": opLog, "neg": opNeg, "square": opSquare, "sqrt": opSqrt,
	"inv": opInverse, "invSqrt": opInvSqrt, "cube": opCube, "tanh": opTanh,
	"sigmoid": opSigmoid, "log1p": opLog1p, "expm1": opExpm1, "softplus": opSoftplus,
}

// arithOps and cmpKinds map the operator symbols of gorgonia's elemBinOp
// (as its String method writes them) to IR operations.
var (
	arithOps = map[string]opKind{"+": opAdd, "-": opSub, "⊙": opMul, "÷": opDiv, "^": opPow}
	cmpKinds = map[string]int{"<": cmpLT, ">": cmpGT, "<=": cmpLE, ">=": cmpGE, "==": cmpEQ, "!=": cmpNE}
)

// binOpSymbol returns the operator symbol of a gorgonia elemBinOp and
// whether it returns values of its operands' type (retSame), from its
// String method ("+ false", say).
func binOpSymbol(op G.Op) (string, bool) {
	s := op.String()
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		importPanic("gorgonia's elementwise operation %q is not written as \"operator retSame\"", s)
	}
	return s[:i], s[i+1:] == "true"
}

// isGorgoniaConstant reports whether n was made by gorgonia.NewConstant.
func isGorgoniaConstant(n *G.Node) bool {
	switch typeName(n.Op()) {
	case "constantScalar", "constantTensor":
		return true
	}
	return false
}

// nodeName describes a gorgonia node for error messages.
func nodeName(n *G.Node) string {
	if n.Op() == nil {
		return fmt.Sprintf("%q", n.Name())
	}
	return fmt.Sprintf("%q (%s)", n.Name(), n.Op().String())
}

// source is what graph/ reads of the user's gorgonia graph: the nodes the
// objectives depend on, each with its arguments, read once and checked.
// args are read from each node's own argument list (nodeArgs); from are
// the same lists as gorgonia's ExprGraph.From gives them on a fresh
// subgraph of the objectives (whose id cache is new, so not stale). scan
// requires them equal; the translation check copies the graph along from,
// so that it does not rest on graph/'s own reading of the arguments.
type source struct {
	args  map[*G.Node][]*G.Node
	from  map[*G.Node][]*G.Node
	order []*G.Node // every node after its arguments
}

// scan reads the nodes the roots depend on and their arguments, and
// reports every problem at once: operations graph/ does not import,
// non-float64 nodes, and arguments that disagree with the graph (see
// checkArgs).
func scan(roots ...*G.Node) (*source, error) {
	src := &source{args: map[*G.Node][]*G.Node{}, from: map[*G.Node][]*G.Node{}}
	subs := map[*G.ExprGraph]*G.ExprGraph{}
	for _, r := range roots {
		g := r.Graph()
		if g == nil {
			return nil, fmt.Errorf("graph: objective %s is in no graph", nodeName(r))
		}
		if _, ok := subs[g]; !ok {
			var mine []*G.Node
			for _, q := range roots {
				if q.Graph() == g {
					mine = append(mine, q)
				}
			}
			subs[g] = g.ExactSubgraphRoots(mine...)
		}
	}
	var bad []string
	var visit func(n *G.Node)
	visit = func(n *G.Node) {
		if _, ok := src.args[n]; ok {
			return
		}
		args, from, problems := inspect(n, subs)
		src.args[n], src.from[n] = args, from
		bad = append(bad, problems...)
		for _, c := range args {
			visit(c)
		}
		src.order = append(src.order, n)
	}
	for _, r := range roots {
		visit(r)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		msg := strings.Join(bad, "; ")
		if strings.Contains(msg, "unsupported operation") {
			msg += " (supported operations: " + strings.Join(Supported, "; ") + ")"
		}
		return nil, errors.New("graph: " + msg)
	}
	return src, nil
}

// inspect reads n's arguments, checks them (checkArgs), n's dtype and
// operation, and returns the arguments, as read and as gorgonia's
// subgraph gives them, and every problem found. Anything unexpected in n
// is a problem, never a panic.
func inspect(n *G.Node, subs map[*G.ExprGraph]*G.ExprGraph) (args, from []*G.Node, problems []string) {
	defer func() {
		if r := recover(); r != nil {
			args, from, problems = nil, nil, append(problems, fmt.Sprintf("node %q: unexpected in a gorgonia graph: %v", n.Name(), r))
		}
	}()
	if n.Type() == nil {
		return nil, nil, []string{fmt.Sprintf("node %q has no type", n.Name())}
	}
	if dt := n.Dtype(); dt != tensor.Float64 {
		problems = append(problems, fmt.Sprintf("node %s has dtype %v; graph/ computes in float64 (build the graph in float64 and set Objective.Float32Data to hold the data in float32)", nodeName(n), dt))
	}
	args = nodeArgs(n)
	if sub := subs[n.Graph()]; sub != nil {
		it := sub.From(n.ID())
		for it != nil && it.Next() {
			c, _ := it.Node().(*G.Node)
			from = append(from, c)
		}
	}
	if err := checkArgs(n, args, from); err != nil {
		return nil, nil, append(problems, fmt.Sprintf("node %s: %v", nodeName(n), err))
	}
	if op := n.Op(); op != nil {
		if name, ok := supportedOp(op); !ok {
			problems = append(problems, fmt.Sprintf("node %s: unsupported operation %s", nodeName(n), name))
		}
	}
	return args, from, problems
}

// checkArgs cross-checks the arguments read from n against gorgonia's
// other records of them: the arguments gorgonia's graph gives (from), the
// operation's arity, their graph, and n's shape against the one its
// operation infers from the arguments' shapes.
func checkArgs(n *G.Node, args, from []*G.Node) error {
	if !slices.Equal(args, from) {
		return fmt.Errorf("its own argument list %v and gorgonia's graph %v disagree", nodeNames(args), nodeNames(from))
	}
	op := n.Op()
	if op == nil {
		if len(args) > 0 {
			return fmt.Errorf("an input node with %d arguments", len(args))
		}
		return nil
	}
	if isGorgoniaConstant(n) {
		if len(args) > 0 {
			return fmt.Errorf("a constant with %d arguments", len(args))
		}
		return nil
	}
	if a := op.Arity(); a >= 0 && a != len(args) {
		return fmt.Errorf("operation %v takes %d arguments, the node has %d", op, a, len(args))
	}
	ds := make([]G.DimSizer, len(args))
	for i, c := range args {
		switch {
		case c == nil:
			return fmt.Errorf("argument %d is nil", i)
		case c.Graph() != n.Graph():
			return fmt.Errorf("argument %d, %s, belongs to another graph", i, nodeName(c))
		}
		if s, ok := c.Op().(G.DimSizer); ok {
			ds[i] = s
		} else {
			ds[i] = c.Shape()
		}
	}
	shape, err := op.InferShape(ds...)
	if err != nil {
		return fmt.Errorf("its operation cannot infer a shape from its arguments: %v", err)
	}
	if !shape.Eq(n.Shape()) && !(shape.IsScalarEquiv() && n.Shape().IsScalarEquiv()) {
		return fmt.Errorf("its arguments give it shape %v, the graph records %v", shape, n.Shape())
	}
	return nil
}

// nodeNames lists the names of ns.
func nodeNames(ns []*G.Node) []string {
	r := make([]string, len(ns))
	for i, n := range ns {
		if n == nil {
			r[i] = "nil"
		} else {
			r[i] = strconv.Quote(n.Name())
		}
	}
	return r
}

// importer builds the IR of gorgonia nodes on a builder. Leaves maps the
// input nodes that are bound per call (variables, data, seeds); every other
// input node is a constant holding its current value.
type importer struct {
	b      *builder
	src    *source
	leaves map[*G.Node]*node
	fixed  map[*G.Node][]float64 // values of the other input nodes
	ir     map[*G.Node]*node
}

func newImporter(b *builder, src *source, leaves map[*G.Node]*node, fixed map[*G.Node][]float64) *importer {
	return &importer{b: b, src: src, leaves: leaves, fixed: fixed, ir: map[*G.Node]*node{}}
}

// node returns the IR of n, building it and its arguments as needed.
func (im *importer) node(n *G.Node) (*node, error) {
	if r, ok := im.ir[n]; ok {
		return r, nil
	}
	gargs, ok := im.src.args[n]
	if !ok {
		return nil, fmt.Errorf("graph: node %s was not read when the problem was compiled", nodeName(n))
	}
	args := make([]*node, len(gargs))
	for i, c := range gargs {
		a, err := im.node(c)
		if err != nil {
			return nil, err
		}
		args[i] = a
	}
	res, err := im.translateChecked(n, args)
	if err != nil {
		return nil, err
	}
	im.ir[n] = res
	return res, nil
}

// translateChecked is translate with every panic of an IR constructor or
// of the reading of gorgonia's operation turned into an error naming n and
// its arguments' shapes.
func (im *importer) translateChecked(n *G.Node, args []*node) (res *node, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		shapes := make([]string, len(args))
		for i, a := range args {
			shapes[i] = fmt.Sprint(a.shape)
		}
		var msg string
		switch e := r.(type) {
		case shapeError:
			msg = e.msg
		case importError:
			msg = e.msg
		default:
			msg = fmt.Sprintf("internal error: %v", r)
		}
		res, err = nil, fmt.Errorf("graph: node %s with argument shapes [%s]: %s", nodeName(n), strings.Join(shapes, " "), msg)
	}()
	return im.translate(n, args)
}

// valueData returns the float64 values an input or constant node holds.
func valueData(n *G.Node) (vals []float64, err error) {
	v := n.Value()
	if v == nil {
		return nil, fmt.Errorf("graph: input node %s has no value: bind one with gorgonia.WithValue or gorgonia.Let, or declare it as a variable or data", nodeName(n))
	}
	if s := v.Shape(); len(s) > 0 && sizeOf(s) == 0 {
		return []float64{}, nil // gorgonia's Data panics on an empty tensor
	}
	defer func() {
		if r := recover(); r != nil {
			vals, err = nil, fmt.Errorf("graph: reading the value of node %s: %v", nodeName(n), r)
		}
	}()
	switch d := v.Data().(type) {
	case []float64:
		return d, nil
	case float64:
		return []float64{d}, nil
	}
	return nil, fmt.Errorf("graph: input node %s holds %T, want float64 values", nodeName(n), v.Data())
}

func (im *importer) translate(n *G.Node, a []*node) (*node, error) {
	b := im.b
	op := n.Op()
	if op == nil {
		if l, ok := im.leaves[n]; ok {
			return l, nil
		}
		d, ok := im.fixed[n]
		if !ok {
			return nil, fmt.Errorf("graph: input node %s has no value", nodeName(n))
		}
		return b.constant([]int(n.Shape()), d), nil
	}
	switch op := op.(type) {
	case logSoftmaxOp:
		return b.logSoftmax(a[0], normAxis(op.axis, len(a[0].shape))), nil
	case gatherOp:
		return b.gather(a[0], a[1]), nil
	case batchNormOp:
		return b.batchNorm(a[0], a[1], a[2], op.eps), nil
	}
	switch typeName(op) {
	case "constantScalar", "constantTensor":
		d, err := valueData(n)
		if err != nil {
			return nil, err
		}
		return b.constant([]int(n.Shape()), append([]float64{}, d...)), nil
	case "elemBinOp":
		sym, _ := binOpSymbol(op)
		if kind, ok := cmpKinds[sym]; ok {
			return b.cmp(kind, a[0], a[1]), nil
		}
		return b.binary(arithOps[sym], a[0], a[1]), nil
	case "elemUnaryOp":
		name := op.String()
		r := b.unary(unaryOps[name], a[0])
		if name == "log2" {
			r = b.scale(r, 1/math.Ln2)
		}
		return r, nil
	case "linAlgBinOp":
		tx, ty := privateBool(op, "transA"), privateBool(op, "transB")
		switch linAlgKind(op) {
		case "matmul":
			return b.matmul(a[0], a[1], tx, ty), nil
		case "matvec":
			if len(a[1].shape) != 1 {
				shapePanic("matrix×vector with a right operand of shape %v", a[1].shape)
			}
			col := b.reshape(a[1], []int{a[1].size, 1})
			p := b.matmul(a[0], col, tx, false)
			return b.reshape(p, []int{p.size}), nil
		case "vecdot":
			return b.sumAll(b.binary(opMul, a[0], a[1])), nil
		case "outer":
			return b.matmul(b.reshape(a[0], []int{a[0].size, 1}), b.reshape(a[1], []int{1, a[1].size}), false, false), nil
		}
	case "sumOp", "maxOp":
		kind := opSum
		if typeName(op) == "maxOp" {
			kind = opMax
		}
		along := privateInts(op, "along")
		if len(along) == 0 {
			for i := range a[0].shape {
				along = append(along, i)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(along)))
		r := a[0]
		for _, ax := range along {
			r = b.reduce(kind, r, ax)
		}
		return r, nil
	case "reshapeOp":
		from := im.src.args[n][0].Shape()
		return b.reshape(a[0], adaptReshape(from, n.Shape(), a[0].shape)), nil
	case "transposeOp":
		return b.transpose(a[0], privateInts(op, "pattern")), nil
	case "sizeOp":
		return b.sizeNode(a[0], privateInt(op, "axis")), nil
	case "repeatOp":
		along := privateInt(op, "along")
		shape := cloneInts(a[0].shape)
		if along >= len(shape) || len(a) != 2 {
			shapePanic("repeat along axis %d of shape %v", along, shape)
		}
		shape[along] = int(scalarValue(a[1]))
		return b.broadcast(a[0], shape), nil
	case "concatOp":
		return b.concat(privateInt(op, "axis"), a), nil
	case "sliceOp":
		axis := privateInt(op, "along")
		if axis < 0 || axis >= len(a[0].shape) {
			shapePanic("slice along axis %d of shape %v", axis, a[0].shape)
		}
		start, end, step := 0, a[0].shape[axis], 1
		if s := sliceOf(op); s != nil {
			start, end, step = s.Start(), s.End(), s.Step()
			if step < 1 {
				step = 1
			}
			if end <= 0 || end > a[0].shape[axis] {
				end = a[0].shape[axis]
			}
		}
		drop := len(n.Shape()) < len(a[0].shape)
		if drop {
			end = start + 1
		}
		return b.slice(a[0], axis, start, end, step, drop), nil
	case "softmaxOp":
		ls := b.logSoftmax(a[0], normAxis(privateInt(op, "axis"), len(a[0].shape)))
		if privateBool(op, "isLog") {
			return ls, nil
		}
		return b.unary(opExp, ls), nil
	case "im2colOp":
		f := func(name string) int { return privateInt(op, name) }
		p := convParams{f("h"), f("w"), f("padH"), f("padW"), f("strideH"), f("strideW"), f("dilationH"), f("dilationW")}
		return b.im2col(a[0], p), nil
	case "maxPoolOp":
		return b.poolGather(a[0], a[0], gorgoniaPool(op)), nil
	}
	return nil, fmt.Errorf("graph: node %s: unsupported operation %s", nodeName(n), op)
}

// gorgoniaPool returns the windows of gorgonia's maxPoolOp. With four
// padding values (north, south, west, east) gorgonia's kernel starts the
// windows padSouth rows above and padEast columns left of the image, not
// padNorth and padWest, while the output size counts all four: graph/
// computes what gorgonia computes.
func gorgoniaPool(op G.Op) poolParams {
	f := func(name string) int { return privateInt(op, name) }
	p := poolParams{kh: f("h"), kw: f("w"), padN: f("padNorth"), padS: f("padSouth"),
		padW: f("padWest"), padE: f("padEast"), sH: f("strideH"), sW: f("strideW")}
	if privateBool(op, "explicitPadding") {
		p.padN, p.padS, p.padW, p.padE = p.padS, p.padN, p.padE, p.padW
	}
	return p
}

func normAxis(axis, rank int) int {
	if axis < 0 {
		return axis + rank
	}
	return axis
}

// scalarValue returns the value of a scalar known at import time: a
// constant, as sizes are.
func scalarValue(n *node) float64 {
	if n.op != opConst || n.size != 1 {
		shapePanic("repeat count %v is not known when the graph is built", n)
	}
	return n.data[0]
}

// adaptReshape returns the target of a reshape written for an input of
// shape from when the input now has shape in: a changed batch size scales
// the leading dimension of the target.
func adaptReshape(from, to, in []int) []int {
	if sizeOf(to) == sizeOf(in) || len(to) == 0 {
		return to
	}
	old, now := sizeOf(from), sizeOf(in)
	if old > 0 && (to[0]*now)%old == 0 {
		r := cloneInts(to)
		r[0] = to[0] * now / old
		if sizeOf(r) == now {
			return r
		}
	}
	return to
}
