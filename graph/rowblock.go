package graph

import (
	"maps"
	"runtime"
	"slices"

	"gonum.org/v1/gonum/floats"
)

// Row blocks. A gradient of an objective that sums over samples reads its
// data matrix X (n×d) twice: forward in Z = X·W, back in Xᵀ·G, with G a
// function of Z computed row by row (a softmax, say). Each product alone
// streams X from memory; when X is larger than the caches, the two passes
// cost two reads of X, however narrow W. Because everything between the
// two products is row-local, they can run by blocks of rows instead: for
// rows [lo, hi), Z's rows, then G's, then the block's part of Xᵀ·G, while
// the block of X is still in cache — one read of X from memory.
//
// A row segment is a set of steps of a program that can run that way, for
// a number of rows n:
//
//   - row steps, whose output has n rows, each computed from the same row
//     of their row arguments and from global arguments: elementwise
//     operations (a row or a single element of a global argument
//     repeated), log-softmax and its adjoint, sums and maxima along an axis after the
//     first, reshapes and broadcasts that keep the rows, and products
//     A·B with A by rows, B global and at most narrow columns;
//   - sums over the rows: products Aᵀ·B of two row arguments, B with at
//     most narrow columns, and sums along the first axis, which each
//     block adds to.
//
// Only narrow products take part: they stream their data, where a wide
// product is compute-bound and would pack its other factor again for
// every block.
//
// A row argument is a row step of the segment or any node with n rows
// computed before it (data, say), read a block of rows at a time; a global
// argument is read whole. The segment runs before its first reader outside
// it (or at its last step); a step of the segment whose argument is ready
// only later leaves it, and so, in turn, do the segment's steps that
// step reads. A program may hold several segments; no step belongs to two,
// and a step one segment reads does not join a later one. An execution
// that runs only some of a segment's steps (a mask, the dynamic steps)
// runs those by blocks when they hold a sum over rows and read a large
// node twice; the others hold their earlier values and are read as row
// arguments.
//
// Blocks are split between the cores by a partition that depends only on
// the sizes and GOMAXPROCS, each core adding its blocks' sums in order and
// the cores' sums added in order, so the result's bits do not depend on
// timing; they differ from the unblocked program's by the order of the
// sums over rows (rounding).
//
// Each step runs on a block through a shadow of its node: a copy whose
// first dimension (and a reshape's target) is the block's row count, read
// by the operation's own kernel in the program's precision (float32
// programs run the float32 kernels on their float32 buffers). The sums
// over rows accumulate in float64 in either precision and are rounded
// once (runSegment). A segment is planned only where it saves memory
// traffic: a node of at least blockMinBytes read by rows by two of its
// steps or more.

// blockBytes is the size of the rows of the largest row argument that one
// block holds (in the program's precision); blockMinBytes the size of a row argument below which a
// program runs unblocked (it stays in cache between the passes). Tests
// lower them.
var (
	blockBytes    = 1 << 20
	blockMinBytes = 16 << 20
)

// rowSegment is a planned row segment of a program.
type rowSegment struct {
	n       int
	steps   []int        // the segment's steps, in program order
	in      map[int]bool // the steps of the segment
	reduce  map[int]bool // its sums over rows
	at      int          // the step before which it runs
	block   int          // rows per block
	rowArgs map[int]bool // steps outside the segment read by rows
	shadows map[int]map[int]*node
	// parts is the number of parts the rows are split into, fixed at
	// planning by GOMAXPROCS.
	parts int
	// Scratch of run, per part: the sums over rows (step after step, from
	// sumAt), in float64 in either precision, and a block's sum and the
	// arguments' buffers in the program's precision (work: a
	// *segWork[float64] or *segWork[float32]).
	sums    [][]float64
	work    any
	sumAt   map[int]int
	sumSize int
	// sel marks the steps of the segment that run (active); reads counts
	// the reads of row inputs.
	sel   []bool
	reads map[int]int
}

// rowPlan is the row segments of a program, by step.
type rowPlan struct {
	// of holds the segment each step belongs to (nil: none); before the
	// segments that run before each step.
	of     []*rowSegment
	before [][]*rowSegment
	// fixed marks the steps of planned segments and the steps they read:
	// no later segment takes them.
	fixed []bool
}

// planRows returns the row segments of p, or nil when it has none.
func planRows(p *program) *rowPlan {
	pl := &rowPlan{of: make([]*rowSegment, len(p.steps)), before: make([][]*rowSegment, len(p.steps)),
		fixed: make([]bool, len(p.steps))}
	sizes := map[int]bool{}
	for i := range p.steps {
		if n, ok := p.rowSum(i); ok {
			sizes[n] = true
		}
	}
	planned := false
	for _, n := range slices.Sorted(maps.Keys(sizes)) {
		for {
			s := p.planSegment(n, pl)
			if s == nil {
				break
			}
			planned = true
			pl.before[s.at] = append(pl.before[s.at], s)
			for _, i := range s.steps {
				pl.of[i], pl.fixed[i] = s, true
				for _, a := range p.steps[i].args {
					pl.fixed[a] = true
				}
			}
		}
	}
	if !planned {
		return nil
	}
	return pl
}

// ready returns the position in p's order from which step i holds its
// value: i, or for a step of a planned segment the step before which the
// segment runs.
func (pl *rowPlan) ready(i int) int {
	if s := pl.of[i]; s != nil {
		return s.at
	}
	return i
}

// runBefore runs the segments planned before step i that the execution
// (mask and mode as in exec) runs by blocks.
func (pl *rowPlan) runBefore(p *program, i int, mask []bool, mode int) {
	if pl == nil {
		return
	}
	for _, s := range pl.before[i] {
		if s.active(p, mask, mode) {
			s.run(p)
		}
	}
}

// runs reports whether step i is computed by its segment in this
// execution, exec then skipping it.
func (pl *rowPlan) runs(p *program, i int, mask []bool, mode int) bool {
	if pl == nil || pl.of[i] == nil {
		return false
	}
	s := pl.of[i]
	return s.active(p, mask, mode) && s.sel[i]
}

// rowSum reports whether step i sums over the n rows of its arguments
// (a product Aᵀ·B of row arguments, or a sum along the first axis), and n.
func (p *program) rowSum(i int) (int, bool) {
	st := &p.steps[i]
	n := st.n
	switch {
	case st.mixed:
		return 0, false
	case n.op == opMatMul && n.ints[0] == 1 && n.ints[1] == 0:
		a, b := n.args[0], n.args[1]
		return a.shape[0], len(a.shape) == 2 && len(b.shape) == 2 && a.shape[0] == b.shape[0] && a.shape[0] > 1 && b.shape[1] <= narrow
	case n.op == opSum && n.axis == 0 && len(n.args[0].shape) >= 1:
		return n.args[0].shape[0], n.args[0].shape[0] > 1
	}
	return 0, false
}

// rowStep reports whether step i is a row step of a segment of n rows
// (see the file comment).
func (p *program) rowStep(i, n int) bool {
	st := &p.steps[i]
	nd := st.n
	if st.mixed || len(nd.shape) == 0 || nd.shape[0] != n {
		return false
	}
	byRows := func(a *node) bool { return len(a.shape) == len(nd.shape) && a.shape[0] == n }
	switch nd.op {
	case opNeg, opExp, opLog, opLog1p, opExpm1, opSqrt, opInvSqrt, opSquare, opCube,
		opInverse, opSigmoid, opTanh, opSoftplus, opAbs, opSign, opSin, opCos, opCeil, opFloor:
		return byRows(nd.args[0]) && sameShape(nd.args[0].shape, nd.shape)
	case opAdd, opSub, opMul, opDiv, opPow, opMaxOf, opMinOf, opCmp:
		for _, a := range nd.args {
			switch {
			case sameShape(a.shape, nd.shape), a.size == 1:
			case isRow(a.shape, nd.shape) && a.shape[0] == 1:
			case isCol(a.shape, nd.shape) && byRows(a):
			default:
				return false
			}
		}
		return true
	case opLogSoftmax, opLogSoftmaxAdjoint, opSum, opMax:
		return nd.axis > 0 && nd.args[0].shape[0] == n
	case opReshape:
		return len(nd.args[0].shape) > 0 && nd.args[0].shape[0] == n
	case opBroadcast:
		a := nd.args[0]
		return len(a.shape) == len(nd.shape) && (a.shape[0] == n || a.shape[0] == 1)
	case opMatMul:
		return nd.ints[0] == 0 && byRows(nd.args[0]) && nd.shape[1] <= narrow
	}
	return false
}

// planSegment plans a row segment of n rows of p, of steps that pl has
// not fixed, or returns nil when none saves memory traffic.
func (p *program) planSegment(n int, pl *rowPlan) *rowSegment {
	taken := func(i int) bool { return pl.fixed[i] }
	in, reduce := map[int]bool{}, map[int]bool{}
	// The steps from which a sum over the rows is reached through row
	// steps: a closure backwards from the sums.
	var grow func(i int)
	grow = func(i int) {
		for _, a := range p.steps[i].args {
			as := &p.steps[a]
			if in[a] || taken(a) || as.n.op == opLeaf || as.n.op == opConst || !p.rowStep(a, n) {
				continue
			}
			in[a] = true
			grow(a)
		}
	}
	for i := range p.steps {
		if m, ok := p.rowSum(i); ok && m == n && !taken(i) {
			in[i], reduce[i] = true, true
			grow(i)
		}
	}
	drop := func(i int) { delete(in, i); delete(reduce, i) }
	for size := -1; size != len(in); {
		size = len(in)
		at := p.runAt(in)
		for i := range in {
			for k, a := range p.steps[i].args {
				switch {
				case in[a] && !p.readsByRows(i, k, n):
					// Read whole by a step of the segment, which then
					// cannot run by blocks.
					drop(i)
				case !in[a] && pl.ready(a) >= at:
					// Read, but computed after the segment runs; and so,
					// in a next round, the segment's steps that step
					// reads run unblocked before it.
					drop(i)
				}
			}
		}
		// Steps that lead to no sum are of no use to the segment.
		useful := map[int]bool{}
		for i := len(p.steps) - 1; i >= 0; i-- {
			if reduce[i] || useful[i] {
				useful[i] = true
				for _, a := range p.steps[i].args {
					useful[a] = useful[a] || in[a]
				}
			}
		}
		for i := range in {
			if !useful[i] {
				drop(i)
			}
		}
	}
	if len(reduce) == 0 {
		return nil
	}
	s := &rowSegment{n: n, in: in, reduce: reduce, rowArgs: map[int]bool{}, shadows: map[int]map[int]*node{},
		parts: runtime.GOMAXPROCS(0), sel: make([]bool, len(p.steps)), reads: map[int]int{}}
	widest := 0
	s.at = p.runAt(in)
	for _, i := range slices.Sorted(maps.Keys(in)) {
		s.steps = append(s.steps, i)
		s.sel[i] = true
		for k, a := range p.steps[i].args {
			if in[a] || !p.readsByRows(i, k, n) {
				continue
			}
			s.rowArgs[a] = true
			widest = max(widest, p.steps[a].n.size/n*p.elemBytes())
		}
	}
	if !s.twice(p) {
		return nil
	}
	s.block = max(4, blockBytes/max(widest, 1)&^3)
	for _, r := range s.blockSizes() {
		if !s.buildShadows(p, r) {
			return nil
		}
	}
	maxSum := 0
	s.sumAt = map[int]int{}
	for _, i := range s.steps {
		if reduce[i] {
			s.sumAt[i] = s.sumSize
			s.sumSize += p.steps[i].n.size
			maxSum = max(maxSum, p.steps[i].n.size)
		}
	}
	parts := len(s.rows()) - 1
	for range parts {
		s.sums = append(s.sums, make([]float64, s.sumSize))
	}
	if p.f32 {
		s.work = newSegWork[float32](parts, maxSum, len(p.argBuf))
	} else {
		s.work = newSegWork[float64](parts, maxSum, len(p.argBuf))
	}
	return s
}

// runAt returns the step before which the segment of the steps in runs:
// its last step, or the first step outside it that reads one of them if
// that comes earlier.
func (p *program) runAt(in map[int]bool) int {
	at := -1
	for i := range in {
		at = max(at, i)
	}
	for i := 0; i < at; i++ {
		if in[i] {
			continue
		}
		for _, a := range p.steps[i].args {
			if in[a] {
				return i
			}
		}
	}
	return at
}

// readsByRows reports whether step i of a segment of n rows reads its
// argument k by rows (else whole).
func (p *program) readsByRows(i, k, n int) bool {
	nd := p.steps[i].n
	a := nd.args[k]
	switch {
	case nd.op == opMatMul && nd.ints[0] == 0:
		return k == 0
	case nd.op == opMatMul, nd.op == opSum && nd.axis == 0:
		return true
	case nd.op == opReshape, nd.op == opLogSoftmax, nd.op == opLogSoftmaxAdjoint, nd.op == opSum, nd.op == opMax:
		return true // row steps of their argument's rows
	}
	return len(a.shape) == len(nd.shape) && a.shape[0] == n
}

// rows returns the parts' ranges of rows: part q takes rows
// [lo[q], lo[q+1]).
func (s *rowSegment) rows() []int {
	parts := s.parts
	if s.n < 2*s.block*parts {
		parts = 1
	}
	lo := make([]int, parts+1)
	for q := range lo {
		lo[q] = s.n * q / parts
	}
	return lo
}

// blockSizes returns the row counts of the blocks the parts take.
func (s *rowSegment) blockSizes() []int {
	sizes := []int{}
	lo := s.rows()
	for q := 0; q+1 < len(lo); q++ {
		k := lo[q+1] - lo[q]
		for _, r := range []int{min(k, s.block), k % s.block} {
			if r > 0 && !slices.Contains(sizes, r) {
				sizes = append(sizes, r)
			}
		}
	}
	return sizes
}

// buildShadows builds the shadows for blocks of r rows of the segment of
// p: copies of the nodes of its steps and row arguments with r rows, read
// by the operations' kernels. It reports whether every operation's shape
// rule gives the shadow's shape.
func (s *rowSegment) buildShadows(p *program, r int) (ok bool) {
	defer func() {
		if e := recover(); e != nil {
			if _, shape := e.(shapeError); !shape {
				panic(e)
			}
			ok = false
		}
	}()
	sh := map[int]*node{}
	withRows := func(i int) *node {
		c := *p.steps[i].n
		c.shape = append([]int{r}, c.shape[1:]...)
		c.size = sizeOf(c.shape)
		return &c
	}
	for a := range s.rowArgs {
		sh[a] = withRows(a)
	}
	for _, i := range s.steps {
		nd := p.steps[i].n
		var c *node
		if s.reduce[i] {
			cc := *nd
			c = &cc
		} else {
			c = withRows(i)
			if nd.op == opReshape {
				c.ints = append([]int{r}, nd.ints[1:]...)
			}
		}
		c.args = slices.Clone(nd.args)
		for k, a := range p.steps[i].args {
			if p.readsByRows(i, k, s.n) {
				c.args[k] = sh[a]
			}
		}
		if !sameShape(c.op.def().shape(c), c.shape) {
			return false
		}
		sh[i] = c
	}
	s.shadows[r] = sh
	return true
}

// active marks in sel the steps of the segment that run in this execution
// of p (mask and mode as in exec), and reports whether they run by blocks:
// when they hold one of the segment's sums over rows and read a row input
// of at least blockMinBytes twice or more. (A step of the segment that does
// not run holds its values of an earlier run: the steps that do read it
// by rows as any row input.)
func (s *rowSegment) active(p *program, mask []bool, mode int) bool {
	sum := false
	for _, j := range s.steps {
		dyn := p.steps[j].dyn
		s.sel[j] = !(mask != nil && !mask[j] || mode == runStatic && dyn || mode == runDynamic && !dyn)
		sum = sum || s.sel[j] && s.reduce[j]
	}
	return sum && s.twice(p)
}

// twice reports whether the steps of the segment marked in sel read a node
// of at least blockMinBytes by rows twice or more: the memory traffic
// that running by blocks saves, reading it once from memory and then from
// cache.
func (s *rowSegment) twice(p *program) bool {
	defer clear(s.reads)
	for _, j := range s.steps {
		if !s.sel[j] {
			continue
		}
		for k, a := range p.steps[j].args {
			if p.readsByRows(j, k, s.n) && p.steps[a].n.size*p.elemBytes() >= blockMinBytes {
				if s.reads[a]++; s.reads[a] >= 2 {
					return true
				}
			}
		}
	}
	return false
}

// segWork is the scratch of a segment's run in the precision T, per
// part: a block's sum and the arguments' buffers.
type segWork[T float] struct {
	scratch [][]T
	args    [][][]T
}

func newSegWork[T float](parts, maxSum, maxArgs int) *segWork[T] {
	w := &segWork[T]{}
	for range parts {
		w.scratch = append(w.scratch, make([]T, maxSum))
		w.args = append(w.args, make([][]T, maxArgs))
	}
	return w
}

// run computes the segment's steps marked in sel by blocks of rows, the
// parts of the rows on the cores when they are spare, in the program's
// precision.
func (s *rowSegment) run(p *program) {
	for _, i := range s.steps {
		if st := &p.steps[i]; st.alias { // exec has not reached them yet
			p.bufs[i], p.bufs32[i] = p.bufs[st.args[0]], p.bufs32[st.args[0]]
		}
	}
	if p.f32 {
		runSegment(s, p, p.bufs32, s.work.(*segWork[float32]))
		return
	}
	runSegment(s, p, p.bufs, s.work.(*segWork[float64]))
}

// runSegment is run on the program's buffers bufs in the precision T. The
// blocks' sums over rows accumulate in float64 and are rounded to T once,
// at the end: in float32, as the unblocked program's narrow products and
// sums along the first axis accumulate in float64 and round once, so that
// blocking adds one rounding per block's part, not a float32 sum of the
// parts (in float64, the sums of the float64 program before, bit for
// bit).
func runSegment[T float](s *rowSegment, p *program, bufs [][]T, w *segWork[T]) {
	lo := s.rows()
	parts := len(lo) - 1
	if parts > 1 && spareCores(parts) {
		runParts(parts, func(q int) { runSegmentPart(s, p, bufs, w, q, lo[q], lo[q+1]) })
	} else {
		for q := range parts {
			runSegmentPart(s, p, bufs, w, q, lo[q], lo[q+1])
		}
	}
	for _, i := range s.steps {
		if !s.reduce[i] || !s.sel[i] {
			continue
		}
		out, off := bufs[i], s.sumAt[i]
		sum := s.sums[0][off : off+len(out)]
		for q := 1; q < parts; q++ {
			floats.Add(sum, s.sums[q][off:off+len(out)])
		}
		for j, v := range sum {
			out[j] = T(v)
		}
	}
}

// runSegmentPart computes rows [lo, hi) of the segment's row steps marked
// in sel, block after block, into their buffers and adds the blocks' sums
// over rows to part q's sums.
func runSegmentPart[T float](s *rowSegment, p *program, bufs [][]T, w *segWork[T], q, lo, hi int) {
	for b0 := lo; b0 < hi; b0 += s.block {
		b1 := min(b0+s.block, hi)
		sh := s.shadows[b1-b0]
		for _, i := range s.steps {
			st := &p.steps[i]
			if st.alias || !s.sel[i] {
				continue
			}
			args := w.args[q][:len(st.args)]
			for k, a := range st.args {
				args[k] = bufs[a]
				if p.readsByRows(i, k, s.n) {
					per := p.steps[a].n.size / s.n
					args[k] = args[k][b0*per : b1*per]
				}
			}
			kernel := kernelIn[T](st.n.op)
			if !s.reduce[i] {
				per := st.n.size / s.n
				kernel(sh[i], bufs[i][b0*per:b1*per], args)
				continue
			}
			sum := s.sums[q][s.sumAt[i] : s.sumAt[i]+st.n.size]
			block := w.scratch[q][:st.n.size]
			kernel(sh[i], block, args)
			if b0 == lo {
				for j, v := range block {
					sum[j] = float64(v)
				}
				continue
			}
			for j, v := range block {
				sum[j] += float64(v)
			}
		}
	}
	clear(w.args[q])
}
