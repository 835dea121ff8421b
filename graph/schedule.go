package graph

import "strconv"

// program is a compiled, pruned list of steps that computes a set of output
// nodes. Every step owns a buffer allocated once at compile time, except
// leaves (bound to caller memory before each run), constants (their data)
// and reshapes (which share their argument's buffer). Running a program
// allocates nothing.
type program struct {
	steps    []step
	bufs     [][]float64
	bufs32   [][]float32   // the buffers of float32 leaves and constants
	index    map[*node]int // step of each node
	outs     []int
	argBuf   [][]float64 // scratch for one step's argument buffers
	argBuf32 [][]float32
	owner    any      // the Linearization whose fixed part the buffers hold
	rows     *rowPlan // the row segments (rowblock.go), nil if none
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
		st.alias = n.op.def().alias
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
	p.argBuf32 = make([][]float32, maxArgs)
	for _, o := range outs {
		p.outs = append(p.outs, p.index[o])
	}
	p.rows = planRows(p)
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
		p.rows.runBefore(p, i, mask, mode)
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
		case p.rows.runs(p, i, mask, mode):
			continue // computed by its row segment
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
	clear(p.argBuf32)
}

// evalMixed computes the step st, which reads a float32 node (whose entry
// in in is nil), into out.
func (p *program) evalMixed(st *step, out []float64, in [][]float64) {
	in32 := p.argBuf32[:len(st.args)]
	for k, a := range st.args {
		in32[k] = p.bufs32[a]
	}
	mixed := st.n.op.def().mixed
	if mixed == nil {
		panic("graph: " + st.n.String() + " reads a float32 node")
	}
	mixed(st.n, out, in, in32)
}
