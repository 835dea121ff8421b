package graph

import (
	"fmt"
	"math"
	"reflect"
	"sort"
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
	name := opTypeName(op)
	switch name {
	case "elemBinOp":
		t, retSame := binOpType(op)
		if t >= 5 && !retSame {
			return op.String() + " returning booleans", false
		}
		return op.String(), t <= 10
	case "elemUnaryOp":
		_, ok := unaryOps[op.String()]
		return op.String(), ok
	case "linAlgBinOp":
		k := fieldInt(op, "āBinaryOperator")
		return op.String(), k <= 3
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

func opTypeName(op G.Op) string {
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Ptr {
		t = t.Elem()
	}
	return t.Name()
}

// field returns the struct field name of op (a struct or a pointer to one).
func field(op any, name string) reflect.Value {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Ptr || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	return v.FieldByName(name)
}

func intsOf(v reflect.Value) []int {
	r := make([]int, v.Len())
	for i := range r {
		r[i] = asInt(v.Index(i))
	}
	return r
}

func fieldInt(op any, name string) int { return asInt(field(op, name)) }

func asInt(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(v.Uint())
	}
	return int(v.Int())
}

// binOpType returns the operator number of an elemBinOp (0 + 1 - 2 ⊙ 3 ÷
// 4 ^ 5 < 6 > 7 <= 8 >= 9 == 10 !=) and its retSame flag.
func binOpType(op G.Op) (uint64, bool) {
	inner := field(op, "ʘBinaryOperator")
	for inner.Kind() == reflect.Interface || inner.Kind() == reflect.Ptr {
		inner = inner.Elem()
	}
	return inner.FieldByName("ʘBinaryOperatorType").Uint(), field(op, "retSame").Bool()
}

// children returns n's arguments in order.
func children(n *G.Node) []*G.Node {
	var r []*G.Node
	it := n.Graph().From(n.ID())
	for it.Next() {
		r = append(r, it.Node().(*G.Node))
	}
	return r
}

// nodeName describes a gorgonia node for error messages.
func nodeName(n *G.Node) string {
	if n.Op() == nil {
		return fmt.Sprintf("%q", n.Name())
	}
	return fmt.Sprintf("%q (%s)", n.Name(), n.Op().String())
}

// checkSupported walks everything the roots depend on and reports every
// unsupported operation and every non-float64 node at once.
func checkSupported(roots ...*G.Node) error {
	seen := map[*G.Node]bool{}
	var bad []string
	var visit func(n *G.Node)
	visit = func(n *G.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if dt := n.Dtype(); dt != tensor.Float64 {
			bad = append(bad, fmt.Sprintf("node %s has dtype %v; graph/ computes in float64 (build the graph in float64 and set Objective.Float32Data to hold the data in float32)", nodeName(n), dt))
		}
		if op := n.Op(); op != nil {
			if name, ok := supportedOp(op); !ok {
				bad = append(bad, fmt.Sprintf("node %s: unsupported operation %s", nodeName(n), name))
			}
		}
		for _, c := range children(n) {
			visit(c)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("graph: %s (supported operations: %s)", strings.Join(bad, "; "), strings.Join(Supported, "; "))
	}
	return nil
}

// importer builds the IR of gorgonia nodes on a builder. Leaves maps the
// input nodes that are bound per call (variables, data, seeds); every other
// input node is a constant holding its current value.
type importer struct {
	b      *builder
	leaves map[*G.Node]*node
	fixed  map[*G.Node][]float64 // values of the other input nodes
	ir     map[*G.Node]*node
}

func newImporter(b *builder, leaves map[*G.Node]*node, fixed map[*G.Node][]float64) *importer {
	return &importer{b: b, leaves: leaves, fixed: fixed, ir: map[*G.Node]*node{}}
}

// node returns the IR of n, building it and its arguments as needed.
func (im *importer) node(n *G.Node) (res *node, err error) {
	if r, ok := im.ir[n]; ok {
		return r, nil
	}
	var args []*node
	for _, c := range children(n) {
		a, err := im.node(c)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(shapeError)
			if !ok {
				panic(r)
			}
			shapes := make([]string, len(args))
			for i, a := range args {
				shapes[i] = fmt.Sprint(a.shape)
			}
			res, err = nil, fmt.Errorf("graph: node %s with argument shapes [%s]: %s", nodeName(n), strings.Join(shapes, " "), se.msg)
		}
	}()
	res, err = im.translate(n, args)
	if err != nil {
		return nil, err
	}
	im.ir[n] = res
	return res, nil
}

func valueData(n *G.Node) ([]float64, error) {
	v := n.Value()
	if v == nil {
		return nil, fmt.Errorf("graph: input node %s has no value: bind one with gorgonia.WithValue or gorgonia.Let, or declare it as a variable or data", nodeName(n))
	}
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
	switch opTypeName(op) {
	case "constantScalar", "constantTensor":
		d, err := valueData(n)
		if err != nil {
			return nil, err
		}
		return b.constant([]int(n.Shape()), append([]float64{}, d...)), nil
	case "elemBinOp":
		t, _ := binOpType(op)
		if t >= 5 {
			return b.cmp(int(t-5), a[0], a[1]), nil
		}
		return b.binary([]opKind{opAdd, opSub, opMul, opDiv, opPow}[t], a[0], a[1]), nil
	case "elemUnaryOp":
		name := op.String()
		r := b.unary(unaryOps[name], a[0])
		if name == "log2" {
			r = b.scale(r, 1/math.Ln2)
		}
		return r, nil
	case "linAlgBinOp":
		tx, ty := field(op, "transA").Bool(), field(op, "transB").Bool()
		switch fieldInt(op, "āBinaryOperator") {
		case 0:
			return b.matmul(a[0], a[1], tx, ty), nil
		case 1:
			if len(a[1].shape) != 1 {
				shapePanic("matrix×vector with a right operand of shape %v", a[1].shape)
			}
			col := b.reshape(a[1], []int{a[1].size, 1})
			p := b.matmul(a[0], col, tx, false)
			return b.reshape(p, []int{p.size}), nil
		case 2:
			return b.sumAll(b.binary(opMul, a[0], a[1])), nil
		case 3:
			return b.matmul(b.reshape(a[0], []int{a[0].size, 1}), b.reshape(a[1], []int{1, a[1].size}), false, false), nil
		}
	case "sumOp", "maxOp":
		kind := opSum
		if opTypeName(op) == "maxOp" {
			kind = opMax
		}
		along := intsOf(field(op, "along"))
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
		return b.reshape(a[0], adaptReshape(intsOf(field(op, "from")), intsOf(field(op, "to")), a[0].shape)), nil
	case "transposeOp":
		return b.transpose(a[0], intsOf(field(op, "pattern"))), nil
	case "sizeOp":
		return b.sizeNode(a[0], fieldInt(op, "axis")), nil
	case "repeatOp":
		along := fieldInt(op, "along")
		shape := cloneInts(a[0].shape)
		if along >= len(shape) || len(a) != 2 {
			shapePanic("repeat along axis %d of shape %v", along, shape)
		}
		shape[along] = int(scalarValue(a[1]))
		return b.broadcast(a[0], shape), nil
	case "concatOp":
		return b.concat(fieldInt(op, "axis"), a), nil
	case "sliceOp":
		axis := fieldInt(op, "along")
		start, end, step := 0, a[0].shape[axis], 1
		if s, ok := field(op, "Slice").Interface().(tensor.Slice); ok && s != nil {
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
		ls := b.logSoftmax(a[0], normAxis(fieldInt(op, "axis"), len(a[0].shape)))
		if field(op, "isLog").Bool() {
			return ls, nil
		}
		return b.unary(opExp, ls), nil
	case "im2colOp":
		p := convParams{fieldInt(op, "h"), fieldInt(op, "w"), fieldInt(op, "padH"), fieldInt(op, "padW"),
			fieldInt(op, "strideH"), fieldInt(op, "strideW"), fieldInt(op, "dilationH"), fieldInt(op, "dilationW")}
		return b.im2col(a[0], p), nil
	case "maxPoolOp":
		p := poolParams{fieldInt(op, "h"), fieldInt(op, "w"), fieldInt(op, "padNorth"), fieldInt(op, "padSouth"),
			fieldInt(op, "padWest"), fieldInt(op, "padEast"), fieldInt(op, "strideH"), fieldInt(op, "strideW")}
		return b.poolGather(a[0], a[0], p), nil
	}
	return nil, fmt.Errorf("graph: node %s: unsupported operation %s", nodeName(n), op)
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
