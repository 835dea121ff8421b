package graph

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The translation check. Compile proves that the function graph/ compiled
// is the user's gorgonia graph: it evaluates each objective twice, with
// gorgonia's own forward machine (a TapeMachine) and with graph/'s
// program, at the declared values of the variables and constants and on a
// few rows of the level's data, and compares the value of every node of the
// user's graph. gorgonia cannot evaluate its graph on other rows than the
// ones it was built with, so the check builds a copy of the objective's
// graph on those rows, along the arguments gorgonia's own ExprGraph.From
// gives on a fresh subgraph (source.from), not graph/'s reading of them:
// every operation is applied again, by ApplyOp, to the copies of its
// arguments, or made again as its import rule's remake says (an operation
// that records its input's shape, BatchNorm's statistics, graph/'s draws
// for random nodes and Dropout, Slice for At).
//
// A problem computed in float32 (Objective.Float32) is checked twice on
// the same gorgonia values: its translation run in float64, as above, and
// the float32 program of the same translation, whose every node must
// agree to verifyTol32 — or, beyond that, give the node's float64 value to
// verifyTol32 when the node alone is run in float32 on the float32
// program's values of its arguments (explain32), so that a wrong float32
// kernel is an error naming the node on the user's shapes.
//
// Inputs must agree exactly, and operations to verifyTol of the node's
// largest magnitude. Rounding differences (our kernels sum in another
// order) grow through ill-conditioned operations, so a node that differs
// more is evaluated again alone (explain), on gorgonia's values of its own
// arguments and on graph/'s: if it gives gorgonia's value from gorgonia's
// arguments and graph/'s from graph/'s, its arguments' rounding explains
// the difference; if not, the translation of that node (or the program)
// is wrong, and Compile returns an error naming the node, its operation,
// the element and both values.

const (
	// verifyTol bounds the difference of a node's value from gorgonia's,
	// relative to the node's largest magnitude.
	verifyTol = 1e-9
	// verifyTol32 is verifyTol for the float32 program: float32's
	// rounding (6e-8) grown by the sums of the products (about √k times
	// for k terms) and by the operations between the inputs and the node,
	// with a margin; a wrong kernel is off by far more.
	verifyTol32 = 1e-4
	// verifyElems bounds the number of elements of all the objective's
	// nodes together in the check: it reads as many samples as fit, at
	// least two.
	verifyElems = 1 << 16
)

// verifyRows returns the rows of level lv the check reads by default: all
// of them when the objective's values on all samples are small, else the
// first ones.
func (p *Problem) verifyRows(lv int) []int {
	l := &p.levels[lv]
	w, err := p.world(lv, -1)
	if err != nil {
		return nil
	}
	total := 0
	for _, ir := range w.ir {
		total += ir.size
	}
	perSample := max(1, total/l.n)
	m := max(min(l.n, 2), min(l.n, verifyElems/perSample))
	if m == l.n {
		return nil
	}
	return seq(0, m)
}

// verified is the outcome of the translation check: the largest
// difference of a node's value from gorgonia's relative to the node's
// largest magnitude, of the float64 translation and (Objective.Float32)
// of the float32 program.
type verified struct{ worst, worst32 float64 }

// verify checks the translation of both objectives at (x, y) on the given
// rows of each level's data (nil: verifyRows).
func (p *Problem) verify(x, y []float64, rows [2][]int) (verified, error) {
	var v verified
	for lv := range p.levels {
		r := rows[lv]
		if r == nil {
			r = p.verifyRows(lv)
		}
		d, err := p.verifyLevel(lv, x, y, r)
		if err != nil && r != nil {
			// A graph that cannot take a batch of these rows is checked on
			// all of its data.
			if _, werr := p.world(lv, len(r)); werr != nil {
				d, err = p.verifyLevel(lv, x, y, nil)
			}
		}
		if err != nil {
			return d, err
		}
		v.worst, v.worst32 = max(v.worst, d.worst), max(v.worst32, d.worst32)
	}
	return v, nil
}

// verifyLevel compares graph/'s value of every node of the objective of
// level lv with gorgonia's, at (x, y) on the given rows (nil: all).
func (p *Problem) verifyLevel(lv int, x, y []float64, rows []int) (verified, error) {
	var v verified
	size := -1
	if rows != nil {
		size = len(rows)
	}
	w, err := p.world(lv, size)
	if err != nil {
		return v, err
	}
	theirs, err := p.gorgoniaValues(lv, x, y, rows)
	if err != nil {
		return v, err
	}
	where := "on all samples"
	if rows != nil {
		where = fmt.Sprintf("on %d samples", len(rows))
	}
	where += " of the " + levelNames[lv]
	if v.worst, err = p.compareValues(w, x, y, rows, theirs, false, where); err != nil || !p.f32 {
		return v, err
	}
	v.worst32, err = p.compareValues(w, x, y, rows, theirs, true, where)
	return v, err
}

// compareValues runs the translation of the world's nodes at (x, y) on the
// given rows, in float32 when f32 is set, and compares every node's value
// with gorgonia's (theirs), as the file comment says; it returns the
// largest difference. where says what was evaluated, for the errors.
func (p *Problem) compareValues(w *world, x, y []float64, rows []int, theirs map[*G.Node][]float64, f32 bool, where string) (float64, error) {
	ours := p.ourValues(w, x, y, rows, f32)
	tol, in := verifyTol, ""
	if f32 {
		tol, in = verifyTol32, " in float32"
	}
	worst := 0.0
	for _, n := range p.src.order {
		if _, ok := w.ir[n]; !ok {
			continue
		}
		a, b := ours[n], theirs[n]
		if len(a) != len(b) {
			return 0, fmt.Errorf("graph: the translation of node %s has %d elements, gorgonia's value %d (%s)",
				nodeName(n), len(a), len(b), where)
		}
		if f32 && n.Op() == nil { // inputs are read in float32
			b = widened(narrowed(b))
		}
		d, at := difference(a, b)
		if n.Op() == nil && d > 0 {
			return 0, fmt.Errorf("graph: input node %s holds %v at %s in graph/'s program%s and %v in gorgonia's (%s)",
				nodeName(n), a[at], elementName(n.Name(), w.ir[n].shape, at), in, b[at], where)
		}
		if d > tol && n.Op() != nil {
			var err error
			if f32 {
				d, err = p.explain32(w, n, ours, rows)
			} else {
				d, err = p.explain(w, n, ours, theirs, rows)
			}
			if err != nil {
				return 0, fmt.Errorf("graph: the translation of node %s%s differs from gorgonia's value: %v (%s)", nodeName(n), in, err, where)
			}
		}
		worst = max(worst, d)
	}
	return worst, nil
}

// explain accepts a difference of node n's value from gorgonia's when its
// arguments' differences explain it: n's translation alone, evaluated on
// gorgonia's values of its arguments, gives gorgonia's value (the
// operation is translated right), and evaluated on graph/'s values of its
// arguments gives graph/'s value (the program computes what the
// translation says). The differences are then relative to the magnitude
// of the operation's terms as well (a sum that cancels rounds relative to
// its terms, not to its result). It returns the larger of the two.
func (p *Problem) explain(w *world, n *G.Node, ours, theirs map[*G.Node][]float64, rows []int) (float64, error) {
	worst := 0.0
	for _, side := range []struct {
		vals        map[*G.Node][]float64
		what, other string
	}{{theirs, "on gorgonia's values of its arguments", "gorgonia"}, {ours, "on its arguments' values in the compiled program", "the compiled program"}} {
		iso, err := p.isolated(w, n, side.vals, rows, false)
		if err != nil {
			return 0, err
		}
		want := side.vals[n]
		d, at := differenceAt(iso, want, p.termScale(n, want, side.vals))
		if d > verifyTol {
			return 0, fmt.Errorf("%s, element %s is %v in graph/'s translation and %v in %s",
				side.what, elementName(n.Name(), w.ir[n].shape, at), iso[at], want[at], side.other)
		}
		worst = max(worst, d)
	}
	return worst, nil
}

// termScale is the magnitude of node n's terms: of its value want, of its
// arguments' values in vals and, for two arguments, of their product.
func (p *Problem) termScale(n *G.Node, want []float64, vals map[*G.Node][]float64) float64 {
	scale, prod := magnitude(want), 1.0
	for _, a := range p.src.args[n] {
		m := magnitude(vals[a])
		scale, prod = max(scale, m), prod*m
	}
	if len(p.src.args[n]) == 2 {
		scale = max(scale, prod)
	}
	return scale
}

// explain32 accepts a difference of node n's float32 value (in ours, the
// float32 program's values) from gorgonia's when n's translation alone,
// run in float32 on the float32 program's values of its arguments, gives
// the value the same translation gives in float64 on the same arguments,
// to verifyTol32 relative to the magnitude of its terms: the float32
// kernels compute what the float64 ones do, and the difference is the
// rounding of the arguments. It returns that difference.
func (p *Problem) explain32(w *world, n *G.Node, ours map[*G.Node][]float64, rows []int) (float64, error) {
	iso32, err := p.isolated(w, n, ours, rows, true)
	if err != nil {
		return 0, err
	}
	iso64, err := p.isolated(w, n, ours, rows, false)
	if err != nil {
		return 0, err
	}
	d, at := differenceAt(iso32, iso64, p.termScale(n, iso64, ours))
	if d > verifyTol32 {
		return 0, fmt.Errorf("on the float32 values of its arguments, element %s is %v in float32 and %v in float64",
			elementName(n.Name(), w.ir[n].shape, at), iso32[at], iso64[at])
	}
	return d, nil
}

// magnitude is the largest finite |v_i|.
func magnitude(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			m = max(m, math.Abs(x))
		}
	}
	return m
}

// difference returns the largest |a_i − b_i| relative to the largest |b_i|
// (NaN and infinities must agree exactly), and where it is.
func difference(a, b []float64) (float64, int) { return differenceAt(a, b, magnitude(b)) }

// differenceAt returns the largest |a_i − b_i| / scale (NaN and infinities
// must agree exactly), and where it is.
func differenceAt(a, b []float64, scale float64) (float64, int) {
	if scale == 0 {
		scale = 1
	}
	worst, at := 0.0, 0
	for i := range a {
		var d float64
		switch {
		case math.IsNaN(a[i]) || math.IsNaN(b[i]) || math.IsInf(a[i], 0) || math.IsInf(b[i], 0):
			if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
				d = math.Inf(1)
			}
		default:
			d = math.Abs(a[i]-b[i]) / scale
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// ourValues runs the world's translation of every node it reads at (x, y)
// on the given rows, in float32 when f32 is set, and returns each node's
// values.
func (p *Problem) ourValues(w *world, x, y []float64, rows []int, f32 bool) map[*G.Node][]float64 {
	var outs []*node
	for _, ir := range w.ir {
		outs = append(outs, ir)
	}
	pr := compile(outs, nil, f32)
	w.bind(p, pr, x, y, w.batchData(p, pr, rows, true))
	pr.run()
	defer pr.release()
	vals := make(map[*G.Node][]float64, len(w.ir))
	for n, ir := range w.ir {
		if i := pr.index[ir]; ir.f32 || f32 {
			vals[n] = widened(pr.bufs32[i])
		} else {
			vals[n] = pr.bufs[i] // read only, before the caller's x and y change
		}
	}
	return vals
}

// gorgoniaValues evaluates the objective of level lv with gorgonia's own
// TapeMachine on a copy of its graph whose variables hold x and y, whose
// level data hold the given rows (nil: all), and returns every node's
// value by the user's node.
func (p *Problem) gorgoniaValues(lv int, x, y []float64, rows []int) (vals map[*G.Node][]float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			vals, err = nil, fmt.Errorf("graph: gorgonia's forward pass of the %s fails: %v", levelNames[lv], r)
		}
	}()
	c := &checkGraph{p: p, lv: lv, rows: rows, x: x, y: y, g: G.NewGraph(), copies: map[*G.Node]*G.Node{}}
	root, err := c.copy(p.levels[lv].root)
	if err != nil {
		return nil, err
	}
	opts := []G.VMOpt{G.TraceExec()}
	if !p.training {
		opts = append(opts, G.EvalMode())
	}
	vm := G.NewTapeMachine(c.g.ExactSubgraphRoots(root), opts...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("graph: gorgonia's forward pass of the %s fails: %v", levelNames[lv], err)
	}
	vals = make(map[*G.Node][]float64, len(c.copies))
	for n, cp := range c.copies {
		v := cp.Value()
		if v == nil {
			continue
		}
		switch d := v.Data().(type) {
		case []float64:
			vals[n] = d // TraceExec bound a copy
		case float64:
			vals[n] = []float64{d}
		}
	}
	return vals, nil
}

// input returns a copy of the value of the input node n in the check: x
// or y for a variable, the rows checked of the level's data, the other
// level's data whole, a constant's value; nil for none.
func (c *checkGraph) input(n *G.Node) []float64 {
	p := c.p
	for i, v := range p.outer {
		if p.outerNodes[i] == n {
			return append([]float64{}, c.x[v.Offset:v.Offset+v.Size]...)
		}
	}
	for i, v := range p.inner {
		if p.innerNodes[i] == n {
			return append([]float64{}, c.y[v.Offset:v.Offset+v.Size]...)
		}
	}
	for k := range p.levels {
		l := &p.levels[k]
		for i, d := range l.data {
			if d != n {
				continue
			}
			row, full := l.rowLen[i], l.full[i]
			if k != c.lv || c.rows == nil {
				return append([]float64{}, full.float64s(0, l.n, row)...)
			}
			v := make([]float64, 0, len(c.rows)*row)
			for _, r := range c.rows {
				v = append(v, full.float64s(r, r+1, row)...)
			}
			return v
		}
	}
	if v, ok := p.fixed[n]; ok {
		return append([]float64{}, v...)
	}
	return nil
}

// checkGraph is the copy of an objective's gorgonia graph that the check
// evaluates.
type checkGraph struct {
	p      *Problem
	lv     int   // the level of the objective copied
	rows   []int // the rows of its data (nil: all)
	x, y   []float64
	g      *G.ExprGraph
	copies map[*G.Node]*G.Node
}

// copy returns the copy of n, making it and its arguments' copies first.
func (c *checkGraph) copy(n *G.Node) (*G.Node, error) {
	if cp, ok := c.copies[n]; ok {
		return cp, nil
	}
	args := c.p.src.from[n]
	cargs := make([]*G.Node, len(args))
	for i, a := range args {
		ca, err := c.copy(a)
		if err != nil {
			return nil, err
		}
		cargs[i] = ca
	}
	cp, err := c.remake(n, args, cargs)
	if err != nil {
		return nil, fmt.Errorf("graph: copying node %s for gorgonia's forward pass: %v", nodeName(n), err)
	}
	c.copies[n] = cp
	return cp, nil
}

// remake makes n again in the check graph on the copies cargs of its
// arguments args.
func (c *checkGraph) remake(n *G.Node, args, cargs []*G.Node) (*G.Node, error) {
	name := fmt.Sprintf("check%d", len(c.copies))
	op := n.Op()
	switch {
	case op == nil:
		v := c.input(n)
		if v == nil {
			return nil, fmt.Errorf("no value for the input")
		}
		shape := cloneInts(n.Shape())
		if len(shape) > 0 { // data may hold fewer rows
			shape[0] = len(v) / max(1, sizeOf(shape[1:]))
		}
		if len(shape) == 0 {
			return G.NewScalar(c.g, G.Float64, G.WithName(name), G.WithValue(v[0])), nil
		}
		t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
		return G.NewTensor(c.g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t)), nil
	case isGorgoniaConstant(n):
		return G.NewConstant(n.Value(), G.WithName(name)), nil
	}
	if r := importRules[typeName(op)]; r.remake != nil {
		return r.remake(c, n, args, cargs)
	}
	return G.ApplyOp(op, cargs...)
}

// isolated evaluates graph/'s translation of n alone on the values vals
// of its arguments, for the given rows of the level's data, in float32
// when f32 is set (then nothing is computed when the nodes are built: see
// builder.noFold).
func (p *Problem) isolated(w *world, n *G.Node, vals map[*G.Node][]float64, rows []int, f32 bool) ([]float64, error) {
	b := newBuilder()
	b.noFold = true
	im := p.checkImporter(b, w.level, rows)
	for _, a := range p.src.args[n] {
		v, ok := vals[a]
		if !ok {
			return nil, fmt.Errorf("no value for its argument %s", nodeName(a))
		}
		im.ir[a] = b.constant(w.ir[a].shape, v)
	}
	out, err := im.node(n)
	if err != nil {
		return nil, err
	}
	pr := compile([]*node{out}, nil, f32)
	pr.run()
	return append([]float64{}, pr.out(0)...), nil
}

// checkImporter returns an importer onto b for translating nodes of level
// lv's objective alone, its random nodes drawn for the given rows (nil:
// all) in the problem's mode.
func (p *Problem) checkImporter(b *builder, lv int, rows []int) *importer {
	im := newImporter(b, p.src, nil, p.fixed)
	l := &p.levels[lv]
	idx := indexValues(l.n)
	if rows != nil {
		idx = make([]float64, len(rows))
		for i, r := range rows {
			idx[i] = float64(r)
		}
	}
	im.training, im.seed, im.samples = p.training, p.seed, l.n
	im.index = b.constant([]int{len(idx)}, idx)
	return im
}
