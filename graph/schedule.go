package graph

import "strconv"

// program is a compiled, pruned list of steps that computes a set of output
// nodes. Every step owns a buffer allocated once at compile time, except
// leaves (bound to caller memory before each run), constants (their data)
// and reshapes (which share their argument's buffer). Running a program
// allocates nothing.
//
// A program computes in float64 (its buffers are bufs; float32 data,
// Objective.Float32Data, are read by the mixed kernels from bufs32), or,
// compiled with f32 (Objective.Float32), in float32: every step's buffer
// is then in bufs32 and computed by the operations' float32 kernels.
// Callers bind and read float64 vectors either way: a float32 program
// narrows a float64 vector bound to a leaf into a buffer of its own (own32),
// reads float32 data where they are, and widens an output when it is read
// (out). The float64 path is unchanged by this: its kernels, buffers and
// bits are those of a program without float32.
type program struct {
	steps    []step
	f32      bool // computes in float32
	bufs     [][]float64
	bufs32   [][]float32   // float32 leaves and constants; every step's buffer when f32
	own32    [][]float32   // f32: the buffers float64 vectors bound to leaves are narrowed into
	own64    [][]float64   // float64: the buffers float32 data bound to leaves are widened into
	out64    [][]float64   // f32: the outputs, widened by out
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
	mixed bool // reads a float32 node (see evalMixed); float64 programs only
}

// compile builds the program computing outs, in float32 when f32 is set.
// Steps that depend on a leaf in dynamic are marked, so exec can recompute
// only them (a linearization: everything else is a function of the fixed
// point).
func compile(outs []*node, dynamic map[*node]bool, f32 bool) *program {
	p := &program{index: map[*node]int{}, f32: f32}
	var visit func(n *node)
	visit = func(n *node) {
		if _, ok := p.index[n]; ok {
			return
		}
		c := fused(n)
		for _, a := range c.args {
			visit(a)
		}
		st := step{n: c, dyn: dynamic[n]}
		for _, a := range c.args {
			ai := p.index[a]
			st.args = append(st.args, ai)
			st.dyn = st.dyn || p.steps[ai].dyn
			st.mixed = st.mixed || a.f32
		}
		st.alias = c.op.def().alias
		p.index[n] = len(p.steps)
		p.steps = append(p.steps, st)
	}
	for _, o := range outs {
		visit(o)
	}
	p.bufs = make([][]float64, len(p.steps))
	p.bufs32 = make([][]float32, len(p.steps))
	if f32 {
		p.own32 = make([][]float32, len(p.steps))
	}
	maxArgs := 0
	for i, st := range p.steps {
		switch {
		case st.n.op == opConst && st.n.f32:
			p.bufs32[i] = st.n.data32
		case st.n.op == opConst && f32:
			p.bufs32[i] = narrowed(st.n.data)
		case st.n.op == opConst:
			p.bufs[i] = st.n.data
		case st.n.op == opLeaf || st.alias:
		case f32:
			p.bufs32[i] = make([]float32, st.n.size)
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
		if f32 {
			p.out64 = append(p.out64, make([]float64, o.size))
		}
	}
	p.rows = planRows(p)
	return p
}

// elemBytes returns the size of an element of the program's buffers.
func (p *program) elemBytes() int {
	if p.f32 {
		return 4
	}
	return 8
}

// fused returns the node of a fused operation (registry.go, fuse) that
// computes n, or n.
func fused(n *node) *node {
	for _, f := range fusions {
		if c := f(n); c != nil {
			return c
		}
	}
	return n
}

// bind points leaf n at buf for the next runs; a float32 program narrows
// buf into a buffer of its own. Leaves the program does not use are
// ignored.
func (p *program) bind(n *node, buf []float64) {
	if i, ok := p.index[n]; ok {
		if len(buf) != n.size || n.f32 {
			panic("graph: binding " + n.String() + " to a float64 buffer of length " + strconv.Itoa(len(buf)))
		}
		if !p.f32 {
			p.bufs[i] = buf
			return
		}
		if p.own32[i] == nil {
			p.own32[i] = make([]float32, n.size)
		}
		narrowInto(p.own32[i], buf)
		p.bufs32[i] = p.own32[i]
	}
}

// bindArray binds leaf n to a: float32 data where they are, in a float32
// leaf or in a float32 program, and float64 values as bind does. A
// float64 program reading float32 data through a leaf that is not float32
// (the translation check's float64 run of a float32 problem) widens them
// into a buffer of its own.
func (p *program) bindArray(n *node, a array) {
	i, ok := p.index[n]
	switch {
	case !ok:
	case !n.f32 && a.f32 != nil && !p.f32:
		if p.own64 == nil {
			p.own64 = make([][]float64, len(p.steps))
		}
		if len(p.own64[i]) != len(a.f32) {
			p.own64[i] = make([]float64, len(a.f32))
		}
		widenInto(p.own64[i], a.f32)
		p.bind(n, p.own64[i])
	case !n.f32 && (!p.f32 || a.f32 == nil):
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

// out returns the values of output i in float64, in a buffer the next run
// overwrites: the step's own buffer, or in a float32 program its values
// widened.
func (p *program) out(i int) []float64 {
	if !p.f32 {
		return p.bufs[p.outs[i]]
	}
	widenInto(p.out64[i], p.bufs32[p.outs[i]])
	return p.out64[i]
}

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
			p.bufs[i], p.bufs32[i] = p.bufs[st.args[0]], p.bufs32[st.args[0]]
			continue
		case mask != nil && !mask[i],
			mode == runStatic && st.dyn,
			mode == runDynamic && !st.dyn:
			continue
		case p.rows.runs(p, i, mask, mode):
			continue // computed by its row segment
		}
		if p.f32 {
			in := p.argBuf32[:len(st.args)]
			for k, a := range st.args {
				in[k] = p.bufs32[a]
			}
			ops[st.n.op].f32(st.n, p.bufs32[i], in)
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
