package graph

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file reads the user's gorgonia graph (scan) and translates its
// nodes into IR (importer) by the import rules of registry.go. Every
// operation is checked before a single node is built or run, because some
// gorgonia kernels panic inside a goroutine where recover cannot reach.

func init() {
	for _, kind := range []string{"letOp", "readOp", "devTrans"} {
		reject(kind, "statements (Let, Read, device transfers) are not part of an objective; build the objectives without them")
	}
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
		problems = append(problems, fmt.Sprintf("node %s has dtype %v; graph/ reads float64 graphs: build the graph in float64 and set Objective.Float32 to compute in float32 (or Objective.Float32Data to hold only the data in float32)", nodeName(n), dt))
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
	if op := n.Op(); op != nil && !isGorgoniaConstant(n) {
		if err := unsupported(op); err != nil {
			problems = append(problems, fmt.Sprintf("node %s: %v", nodeName(n), err))
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

// reachable returns the set of nodes root depends on, root included.
func (src *source) reachable(root *G.Node) map[*G.Node]bool {
	seen := map[*G.Node]bool{}
	var visit func(n *G.Node)
	visit = func(n *G.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, c := range src.args[n] {
			visit(c)
		}
	}
	visit(root)
	return seen
}

// random reports whether the objectives hold random nodes or Dropout.
func (src *source) random() bool {
	for _, n := range src.order {
		switch typeName(n.Op()) {
		case "randomOp", "dropoutOp":
			return true
		}
	}
	return false
}

// gatherIndices returns the nodes read as Gather indices.
func (src *source) gatherIndices() map[*G.Node]bool {
	idx := map[*G.Node]bool{}
	for _, n := range src.order {
		if _, ok := n.Op().(gatherOp); ok {
			idx[src.args[n][1]] = true
		}
	}
	return idx
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
	// training is the mode of Dropout, BatchNorm and random nodes (see
	// Problem.SetTraining); for random nodes and Dropout, seed and index
	// are the seed and the node of the batch's sample indices, samples
	// the number of samples of the level translated.
	training bool
	seed     uint64
	samples  int
	index    *node
}

// sampleIndex returns the node of the batch's sample indices, which random
// nodes and Dropout read.
func (im *importer) sampleIndex() *node {
	if im.index == nil {
		importPanic("a random node where graph/ did not expect one")
	}
	return im.index
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
	op := n.Op()
	switch {
	case op == nil:
		if l, ok := im.leaves[n]; ok {
			return l, nil
		}
		d, ok := im.fixed[n]
		if !ok {
			return nil, fmt.Errorf("graph: input node %s has no value", nodeName(n))
		}
		return im.b.constant([]int(n.Shape()), d), nil
	case isGorgoniaConstant(n):
		d, err := valueData(n)
		if err != nil {
			return nil, err
		}
		return im.b.constant([]int(n.Shape()), append([]float64{}, d...)), nil
	}
	r, ok := importRules[typeName(op)]
	if !ok {
		return nil, fmt.Errorf("graph: node %s: %v", nodeName(n), unsupported(op))
	}
	return r.translate(im, n, a), nil
}
