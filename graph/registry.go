package graph

import (
	"fmt"
	"slices"
	"strconv"

	G "gorgonia.org/gorgonia"
)

// This file is graph/'s one table of operations, in two parts.
//
// ops holds the operations of the IR: each is defined once, by define, in
// the file of its family (elementwise.go, structure.go, reduce.go,
// linalg.go, conv.go, pool.go, softmax.go, batchnorm.go, gather.go,
// random.go, float32.go), with everything graph/ needs of it: its name,
// its number of arguments, its shape rule, its forward kernel and its
// derivative rule. The builder, the differentiation pass and the
// scheduler read this table and nothing else, so adding an operation is
// one definition in one file.
//
// importRules holds, for each kind of gorgonia operation graph/ reads
// (named by the Go type of gorgonia's Op), how to read it: whether a given
// operation is supported (with what to write instead when it is not), its
// translation into IR, and how the translation check makes it again on a
// copy of the graph. rejected holds what to write instead of each gorgonia
// operation graph/ does not read. A family's file registers its gorgonia
// operations beside its IR operations.
//
// TestRegistry walks both tables: every IR operation has a name, a shape
// rule, kernels in both precisions and a derivative rule (or is constant),
// and the op-table
// test (TestOpTable) computes every IR operation and reads every gorgonia
// operation kind at least once, checking values against gorgonia's forward
// pass and first and second derivatives against finite differences.

// opKind names an IR operation: its index in ops.
type opKind uint8

// kernelOf computes node n into out from its arguments' values in, in the
// precision T.
type kernelOf[T float] func(n *node, out []T, in [][]T)

// kernel is the float64 kernel of an operation.
type kernel = kernelOf[float64]

// mixedKernel is kernel for a node that reads float32 arguments: in32[k]
// holds argument k when it is float32 (in[k] is then nil).
type mixedKernel func(n *node, out []float64, in [][]float64, in32 [][]float32)

// opDef defines one IR operation.
type opDef struct {
	name string
	// arity is the number of arguments; variadic operations (concat) have
	// −1 and take at least one.
	arity int
	// shape returns the shape of n from its arguments and attributes (for
	// operations whose shape is an attribute, the shape the constructor set
	// in n.shape, checked), or panics with shapePanic naming what is
	// inconsistent.
	shape func(n *node) []int
	// f64 and f32 are the forward kernels in float64 and in float32
	// (Objective.Float32); most are one generic function instantiated
	// twice. mixed computes the operation in float64 when an argument is
	// float32 data (Objective.Float32Data), for the operations that read
	// such data.
	f64   kernel
	f32   kernelOf[float32]
	mixed mixedKernel
	// vjp returns the contribution of n's adjoint g to the adjoint of
	// argument k, or nil for a structural zero; it is written with IR
	// constructors, so that its result can be differentiated again.
	vjp func(b *builder, n *node, k int, g *node) *node
	// alias marks operations whose output is their first argument's
	// buffer in a program (reshapes).
	alias bool
	// constant marks operations through which no derivative flows
	// (leaves, constants, comparisons, piecewise-constant functions, data
	// read through widen); they have no vjp.
	constant bool
	// elem is the function of an elementwise binary operation, for the
	// loops that have no specialized form.
	elem func(x, y float64) float64
	// fuse marks an operation that only compile makes, after
	// differentiation, in place of the primitives that compute the same
	// values (the log-softmax's adjoint): fuse(n) returns the node of the
	// operation that computes n, or nil when n is not of its pattern. Such
	// an operation is never differentiated and has no vjp.
	fuse func(n *node) *node
}

// fusions holds the fuse rules of the table, which compile tries on
// every node.
var fusions []func(n *node) *node

// ops is the table of IR operations, indexed by opKind.
var ops []opDef

// define adds d to ops and returns its kind. It panics on a definition
// that lacks a part, as a programmer error found at start-up.
func define(d opDef) opKind {
	switch {
	case d.name == "" || d.shape == nil || d.f64 == nil || d.f32 == nil:
		panic("graph: the definition of operation " + strconv.Quote(d.name) + " lacks its name, shape rule or a kernel (float64 and float32)")
	case d.vjp == nil && !d.constant && d.fuse == nil:
		panic("graph: operation " + d.name + " has no derivative rule and is not constant")
	case len(ops) >= 1<<8:
		panic("graph: too many operations for opKind")
	}
	for _, o := range ops {
		if o.name == d.name {
			panic("graph: operation " + d.name + " defined twice")
		}
	}
	ops = append(ops, d)
	if d.fuse != nil {
		fusions = append(fusions, d.fuse)
	}
	return opKind(len(ops) - 1)
}

func (k opKind) String() string {
	if int(k) < len(ops) {
		return ops[k].name
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

func (k opKind) def() *opDef { return &ops[k] }

// eval computes node n into out from its argument values in.
func eval(n *node, out []float64, in [][]float64) { ops[n.op].f64(n, out, in) }

// kernelIn returns the kernel of operation op in the precision T.
func kernelIn[T float](op opKind) kernelOf[T] {
	if k, ok := any(ops[op].f64).(kernelOf[T]); ok {
		return k
	}
	return any(ops[op].f32).(kernelOf[T])
}

// importRule is how graph/ reads one kind of gorgonia operation.
type importRule struct {
	// doc names the gorgonia constructors that make the operation, for
	// Supported and error messages.
	doc string
	// check returns why op is not supported, with what to write instead,
	// or nil; nil check: always supported.
	check func(op G.Op) error
	// translate returns the IR of n, whose arguments' IR is a. It reports
	// inconsistencies by shapePanic or importPanic.
	translate func(im *importer, n *G.Node, a []*node) *node
	// remake makes n again in the translation check's copy of the graph
	// on the copies cargs of its arguments args; nil: gorgonia's ApplyOp
	// of n's operation on cargs.
	remake func(c *checkGraph, n *G.Node, args, cargs []*G.Node) (*G.Node, error)
}

// importRules maps the Go type name of a gorgonia operation to its rule.
var importRules = map[string]importRule{}

// rejected maps the Go type name of a gorgonia operation graph/ does not
// read to what to write instead.
var rejected = map[string]string{}

// recognize registers the rule of a kind of gorgonia operation.
func recognize(kind string, r importRule) {
	if _, dup := importRules[kind]; dup || r.translate == nil {
		panic("graph: gorgonia's " + kind + " registered twice or without a translation")
	}
	importRules[kind] = r
	if r.doc != "" {
		i, _ := slices.BinarySearch(Supported, r.doc)
		Supported = slices.Insert(Supported, i, r.doc)
	}
}

// reject registers a kind of gorgonia operation that graph/ does not read,
// with what to write instead.
func reject(kind, advice string) {
	if _, dup := rejected[kind]; dup {
		panic("graph: gorgonia's " + kind + " rejected twice")
	}
	rejected[kind] = advice
}

// Supported lists, for documentation and error messages, the gorgonia
// operations that graph/ imports (docs/ops.md has the whole table, with
// what graph/ computes where gorgonia's name says otherwise), in sorted
// order. The import rules fill it when the package starts.
var Supported []string

// unsupported returns why graph/ does not read op, or nil when it does.
func unsupported(op G.Op) error {
	kind := typeName(op)
	if r, ok := importRules[kind]; ok {
		if r.check == nil {
			return nil
		}
		return r.check(op)
	}
	if advice, ok := rejected[kind]; ok {
		return fmt.Errorf("unsupported operation %s: %s", op, advice)
	}
	return fmt.Errorf("unsupported operation %s (%s)", op, kind)
}
