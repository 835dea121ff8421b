package graph

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// This file holds sums of mixed products at one outer point: the reverse
// sweep of ITD takes a mixed product ∇x⟨∇y g(x, y_t), v_t⟩ at each of T
// iterates, all at the same x and batch.
//
// Vocabulary (as in diff.go and fixed.go): in the expression
// s(x, y, v) = ⟨∇y g(x, y), v⟩ a node is static when it depends on neither
// y nor v; the boundary is the static nodes that depend on x
// differentiably and that a node that is not static reads — in a network
// whose last layer is y, the features and what is formed from them alone.
// Replacing each boundary node h_b by a leaf writes s as s̃(h(x), y, v),
// where s̃ reads x only through the leaves (x itself is a boundary node
// when a dynamic node reads it), so by the chain rule
//
//	Σ_t ∇x s(x, y_t, v_t) = J_h(x)ᵀ · Σ_t ∂s̃/∂h (h(x), y_t, v_t).
//
// AddMixedXY computes the partial adjoints ∂s̃/∂h_b at one (y_t, v_t) —
// back through the dynamic part only — and adds them up; MixedXYSum pulls
// the sum back through the static part once, as ∇x Σ_b ⟨h_b(x), ā_b⟩.
// The cut is a substitution of leaves for the boundary nodes,
// differentiated by grad and substituted back, so nothing but the graph
// changes.
//
// The lower level's ∇y g and HVP at fixed x, the adjoints at the boundary
// and the pull-back are the outputs of one program, the sweep program,
// whose static part — the features, computed once per FixedX — they
// share; each oracle runs the dynamic steps its outputs need.

// The adjoint at a boundary node is often a sum of products with a narrow
// inner dimension: features H read by a head, H·W, receive Ḡ·Wᵀ, with Ḡ
// as narrow as the classes. Such a term is kept as its two factors (a
// low-rank term): the sum keeps the factors of every step side by side,
// L = [L_1 … L_T] and R = [R_1; …; R_T], and forms Σ_t L_t·R_t = L·R by one
// product when it is pulled back (or when the factors fill their
// buffers), instead of writing and adding a full matrix at every step.

// progSweep keys FixedX's batch data for the sweep program, which
// world.program does not build.
const progSweep = -1

// sweepProgram is a world's sweep program, with its outputs in the order
// ∇y g (one per inner variable), ∇yy g·v (one per inner variable), the
// parts of each ∂s̃/∂h_b (boundary.dense and the factors of its low-rank
// terms, boundary by boundary) and ∇x Σ_b ⟨h_b, ā_b⟩ (one per outer
// variable). y, v and the ā_b are its dynamic leaves.
type sweepProgram struct {
	prog                 *program
	bounds               []boundary
	hvpAt, adjAt, pullAt int    // the first output of each group
	grad, hvp, adj, pull []bool // the steps each group needs
	// spare is the sums (FixedX.sum) that MixedXYSum gave back, for the
	// next FixedX to sum into.
	spare []boundarySum
	memo  stepMemo
}

// boundary is how the sweep program gives the adjoint at one boundary
// node: the sum of its terms that are not low-rank products as output
// dense (−1: none) and its low-rank terms as their factors.
type boundary struct {
	bar        *node // the leaf ā_b
	dense      int
	terms      []lowRank
	rows, cols int // the boundary node as a matrix, when it has low-rank terms
	kmax       int // the inner size the factors' buffers hold
}

// lowRank is a term op(A)·op(B) of an adjoint, op(A) rows×k and op(B)
// k×cols, with A and B the outputs a and b of the sweep program.
type lowRank struct {
	a, b   int
	ta, tb bool
	k      int
}

// boundarySum is the running sum of the adjoints at one boundary node:
// dense, when summed, plus lᵀ·r, the product of the transpose of rows
// [0, k) of l (kmax × rows: the factors op(A) side by side, transposed,
// so that each is written row after row) and rows [0, k) of r
// (kmax × cols).
type boundarySum struct {
	dense  []float64
	summed bool
	l, r   []float64
	k      int
}

// stepMemo records which dynamic steps of the sweep program hold values
// for the y and v they were last run at, for the FixedX owner, so that the
// oracles of one sweep step — AddMixedXY and HVP at the same y and v —
// share their common steps (the forward pass through the head, say).
type stepMemo struct {
	owner      *FixedX
	y, v       []float64
	hasY, hasV bool
	done       []bool // steps holding values at y and v
	onV, onBar []bool // steps that depend on v, on an ā_b
	mask       []bool // scratch
}

// sweepProgram returns, building it on first use, the world's sweep program.
func (w *world) sweepProgram() *sweepProgram {
	if w.sweep != nil {
		return w.sweep
	}
	b := w.b
	vars := append(append([]*node{}, w.x...), w.y...)
	var outs []*node
	d := b.grad(w.out, vars) // as world.program builds ∇y g, so the bits are GradG's
	for i, leaf := range w.y {
		outs = append(outs, w.zerosFor(d[len(w.x)+i], leaf))
	}
	s := w.inner(b.grad(w.out, w.y), w.v)
	d = make([]*node, len(vars))
	if s != nil {
		d = b.grad(s, vars) // as world.program builds the HVP
	}
	for i, leaf := range w.y {
		outs = append(outs, w.zerosFor(d[len(w.x)+i], leaf))
	}
	ms := &sweepProgram{hvpAt: len(w.y), adjAt: 2 * len(w.y)}
	hs, adj := w.boundaryAdjoints(s)
	dynamic := map[*node]bool{}
	for _, n := range append(append([]*node{}, w.y...), w.v...) {
		dynamic[n] = true
	}
	var bars []*node
	for i, h := range hs {
		bd := boundary{bar: b.leaf(fmt.Sprintf("adjoint of boundary %d", i), h.shape), dense: -1}
		dense, terms := w.splitTerms(adj[i], nil, nil)
		for _, t := range terms {
			ta, tb := t.ints[0] == 1, t.ints[1] == 1
			m, k, n, _, _ := productShape(t.args[0].shape, t.args[1].shape, ta, tb)
			bd.rows, bd.cols, bd.kmax = m, n, min(m, n)
			bd.terms = append(bd.terms, lowRank{a: len(outs), b: len(outs) + 1, ta: ta, tb: tb, k: k})
			outs = append(outs, t.args[0], t.args[1])
		}
		if dense != nil {
			bd.dense = len(outs)
			outs = append(outs, dense)
		}
		ms.bounds = append(ms.bounds, bd)
		bars = append(bars, bd.bar)
		dynamic[bd.bar] = true
	}
	ms.pullAt = len(outs)
	d = make([]*node, len(w.x))
	if r := w.inner(hs, bars); r != nil {
		d = b.grad(r, w.x)
	}
	for i, leaf := range w.x {
		outs = append(outs, w.zerosFor(d[i], leaf))
	}
	ms.prog = w.compile(outs, dynamic)
	group := func(from, to int) []bool {
		idx := make([]int, 0, to-from)
		for i := from; i < to; i++ {
			idx = append(idx, i)
		}
		return ms.prog.need(idx...)
	}
	ms.grad, ms.hvp = group(0, ms.hvpAt), group(ms.hvpAt, ms.adjAt)
	ms.adj, ms.pull = group(ms.adjAt, ms.pullAt), group(ms.pullAt, len(outs))
	ms.memo.onV, ms.memo.onBar = ms.prog.dependents(w.v), ms.prog.dependents(bars)
	ms.memo.done, ms.memo.mask = make([]bool, len(ms.prog.steps)), make([]bool, len(ms.prog.steps))
	w.sweep = ms
	return ms
}

// splitTerms adds to terms the low-rank products among the terms of the
// sum a (its operands, through additions of equal shapes) and returns the
// sum of the others (nil: none) added to dense. A product is low-rank when
// its inner size is at most a quarter of its smaller side, so that its
// factors hold at most half the elements of the product.
func (w *world) splitTerms(a, dense *node, terms []*node) (*node, []*node) {
	if a.op == opAdd && sameShape(a.args[0].shape, a.shape) && sameShape(a.args[1].shape, a.shape) {
		dense, terms = w.splitTerms(a.args[0], dense, terms)
		return w.splitTerms(a.args[1], dense, terms)
	}
	if a.op == opMatMul && !a.args[0].f32 && !a.args[1].f32 {
		m, k, n, _, _ := productShape(a.args[0].shape, a.args[1].shape, a.ints[0] == 1, a.ints[1] == 1)
		if 4*k <= min(m, n) {
			return dense, append(terms, a)
		}
	}
	return w.b.add2(dense, a), terms
}

// dependents returns the mask of the steps that depend on one of the
// leaves.
func (p *program) dependents(leaves []*node) []bool {
	m := make([]bool, len(p.steps))
	for _, l := range leaves {
		if i, ok := p.index[l]; ok {
			m[i] = true
		}
	}
	for i, st := range p.steps {
		for _, a := range st.args {
			m[i] = m[i] || m[a]
		}
	}
	return m
}

// boundaryAdjoints returns the boundary nodes of s through which s
// depends on x and the adjoints ∂s̃/∂h_b at them (none when s is nil).
func (w *world) boundaryAdjoints(s *node) (hs, adj []*node) {
	if s == nil {
		return nil, nil
	}
	b := w.b
	bound := w.boundary(s)
	cut, back := map[*node]*node{}, map[*node]*node{}
	leaves := make([]*node, len(bound))
	for i, h := range bound {
		leaves[i] = b.leaf(fmt.Sprintf("boundary %d", i), h.shape)
		cut[h], back[leaves[i]] = leaves[i], h
	}
	for i, a := range b.grad(b.substitute(s, cut, map[*node]*node{}), leaves) {
		if a != nil {
			hs = append(hs, bound[i])
			adj = append(adj, b.substitute(a, back, map[*node]*node{}))
		}
	}
	return hs, adj
}

// boundary returns the boundary of s (see the file comment), in the order
// of a depth-first post-order walk from s.
func (w *world) boundary(s *node) []*node {
	dyn, onX := map[*node]bool{}, map[*node]bool{}
	for _, n := range append(append([]*node{}, w.y...), w.v...) {
		dyn[n] = true
	}
	for _, n := range w.x {
		onX[n] = true
	}
	seen, in := map[*node]bool{}, map[*node]bool{}
	var bound []*node
	var visit func(n *node)
	visit = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, a := range n.args {
			visit(a)
			dyn[n] = dyn[n] || dyn[a]
			onX[n] = onX[n] || onX[a] && !noGrad(n)
		}
		if !dyn[n] || noGrad(n) {
			return
		}
		for _, a := range n.args {
			if !dyn[a] && onX[a] && !in[a] {
				in[a] = true
				bound = append(bound, a)
			}
		}
	}
	visit(s)
	return bound
}

// substitute returns n with each node of repl replaced by its image,
// building again (hash-consed) every node on a path to a replaced one;
// memo holds the nodes already rebuilt.
func (b *builder) substitute(n *node, repl, memo map[*node]*node) *node {
	if r, ok := repl[n]; ok {
		return r
	}
	if r, ok := memo[n]; ok {
		return r
	}
	r := n
	for i, a := range n.args {
		if s := b.substitute(a, repl, memo); s != a {
			if r == n {
				c := *n
				c.args = append([]*node{}, n.args...)
				r = &c
			}
			r.args[i] = s
		}
	}
	if r != n {
		r = b.add(r)
	}
	memo[n] = r
	return r
}

// sweep returns the sweep program of f's lower level, with its static
// part at f's x and batch and y and v bound (either may be nil where the
// steps to run do not read it), and its outputs' layout; the caller runs
// the dynamic steps it needs with run and releases it.
func (f *FixedX) sweep(y, v []float64) (*program, *sweepProgram) {
	p, w := f.p, f.w[lowerLevel]
	ms := w.sweepProgram()
	pr := f.static(lowerLevel, progSweep, ms.prog)
	m := &ms.memo
	if m.owner != f {
		m.owner, m.hasY, m.hasV = f, false, false
		clear(m.done)
	}
	if y != nil {
		bindFlat(pr, w.y, p.inner, p.checkLen(y, p.dimY, "y"))
		if !m.hasY || !sameBits(m.y, y) {
			m.y, m.hasY = append(m.y[:0], y...), true
			clear(m.done)
		}
	}
	if v != nil {
		bindFlat(pr, w.v, p.inner, p.checkLen(v, p.dimY, "v"))
		if !m.hasV || !sameBits(m.v, v) {
			m.v, m.hasV = append(m.v[:0], v...), true
			for i, on := range m.onV {
				m.done[i] = m.done[i] && !on
			}
		}
	}
	return pr, ms
}

// run runs the dynamic steps of mask that do not hold their values at the
// bound y and v yet.
func (ms *sweepProgram) run(pr *program, mask []bool) {
	m := &ms.memo
	for i, need := range mask {
		m.mask[i] = need && !m.done[i]
	}
	pr.exec(m.mask, runDynamic)
	for i, need := range mask {
		// Steps that read an ā_b are run afresh: their leaves change
		// between sums.
		m.done[i] = m.done[i] || need && !m.onBar[i]
	}
}

// sameBits reports whether a and b hold the same bits.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// AddMixedXY adds the mixed product ∇xy g(x, y)·v = ∇x⟨∇y g(x, y), v⟩ at
// the fixed x and lower-level batch to the sum that MixedXYSum returns. It
// goes back only through the part of g that depends on y, and keeps the
// adjoint where that part reads the part that does not (the boundary:
// features, say); MixedXYSum goes back through the rest once for all the
// products added. The sum equals the sum of the MixedXY products up to
// rounding.
func (f *FixedX) AddMixedXY(y, v []float64) {
	f.p.stats.MixedXYProducts++
	pr, ms := f.sweep(y, v)
	defer pr.releaseIf(true)
	if len(ms.bounds) == 0 {
		return
	}
	ms.run(pr, ms.adj)
	if f.sum == nil {
		f.sum, ms.spare = ms.spare, nil
	}
	if f.sum == nil {
		f.sum = make([]boundarySum, len(ms.bounds))
	}
	for i := range ms.bounds {
		f.sum[i].add(&ms.bounds[i], pr)
	}
	f.summed = true
}

// add adds the adjoint at boundary bd, the outputs of pr, to s.
func (s *boundarySum) add(bd *boundary, pr *program) {
	if bd.dense >= 0 {
		out := pr.out(bd.dense)
		switch {
		case s.dense == nil:
			s.dense = append([]float64{}, out...)
		case !s.summed:
			copy(s.dense, out)
		default:
			floats.Add(s.dense, out)
		}
		s.summed = true
	}
	for _, t := range bd.terms {
		if s.k+t.k > bd.kmax {
			s.flush(bd)
		}
		if s.l == nil {
			s.l, s.r = make([]float64, bd.kmax*bd.rows), make([]float64, bd.kmax*bd.cols)
		}
		a, b := pr.out(t.a), pr.out(t.b)
		lt := s.l[s.k*bd.rows : (s.k+t.k)*bd.rows] // op(A)ᵀ
		if t.ta {
			copy(lt, a)
		} else {
			for i := range bd.rows {
				for p, e := range a[i*t.k : (i+1)*t.k] {
					lt[p*bd.rows+i] = e
				}
			}
		}
		for p := range t.k {
			row := s.r[(s.k+p)*bd.cols : (s.k+p+1)*bd.cols]
			if t.tb {
				for j := range row {
					row[j] = b[j*t.k+p]
				}
			} else {
				copy(row, b[p*bd.cols:])
			}
		}
		s.k += t.k
	}
}

// flush adds the product of the factors to the dense sum and empties them.
func (s *boundarySum) flush(bd *boundary) {
	if s.k == 0 {
		return
	}
	if s.dense == nil {
		s.dense = make([]float64, bd.rows*bd.cols)
	}
	gemm(gemmKernelF64(), s.dense, bd.cols, bd.rows, bd.cols, s.k,
		sideA(s.l, bd.rows, s.k, true), sideB(s.r, s.k, bd.cols, false), s.summed)
	s.summed, s.k = true, 0
}

// MixedXYSum writes to dst (length DimX) the sum of the mixed products
// added by AddMixedXY since the last MixedXYSum, zero if none, and starts
// a new sum.
func (f *FixedX) MixedXYSum(dst []float64) {
	p := f.p
	p.checkLen(dst, p.dimX, "dst")
	if !f.summed {
		clear(dst)
		return
	}
	pr, ms := f.sweep(nil, nil)
	defer pr.releaseIf(true)
	for i := range ms.bounds {
		s := &f.sum[i]
		s.flush(&ms.bounds[i])
		pr.bind(ms.bounds[i].bar, s.dense)
		s.summed = false
	}
	ms.run(pr, ms.pull)
	p.collect(dst, p.outer, pr, ms.pullAt)
	f.summed = false
	ms.spare, f.sum = f.sum, nil
}
