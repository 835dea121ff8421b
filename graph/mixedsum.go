package graph

import "fmt"

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

// progSweep keys FixedX's batch data for the sweep program, which
// world.program does not build.
const progSweep = -1

// sweepProgram is a world's sweep program, with its outputs in the order
// ∇y g (one per inner variable), ∇yy g·v (one per inner variable),
// ∂s̃/∂h_b (one per boundary node) and ∇x Σ_b ⟨h_b, ā_b⟩ (one per outer
// variable). y, v and the ā_b are its dynamic leaves.
type sweepProgram struct {
	prog                 *program
	bar                  []*node // the leaves ā_b
	hvpAt, adjAt, pullAt int     // the first output of each group
	grad, hvp, adj, pull []bool  // the steps each group needs
	// spare is the buffers of a sum (FixedX.sum) that MixedXYSum gave
	// back, for the next FixedX to sum into.
	spare [][]float64
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
	hs, adj := w.boundaryAdjoints(s)
	outs = append(outs, adj...)
	ms := &sweepProgram{hvpAt: len(w.y), adjAt: 2 * len(w.y), pullAt: 2*len(w.y) + len(adj)}
	dynamic := map[*node]bool{}
	for _, n := range append(append([]*node{}, w.y...), w.v...) {
		dynamic[n] = true
	}
	for i, h := range hs {
		ms.bar = append(ms.bar, b.leaf(fmt.Sprintf("adjoint of boundary %d", i), h.shape))
		dynamic[ms.bar[i]] = true
	}
	d = make([]*node, len(w.x))
	if r := w.inner(hs, ms.bar); r != nil {
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
	w.sweep = ms
	return ms
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
// the dynamic steps it needs and releases it.
func (f *FixedX) sweep(y, v []float64) (*program, *sweepProgram) {
	p, w := f.p, f.w[lowerLevel]
	ms := w.sweepProgram()
	pr := f.static(lowerLevel, progSweep, ms.prog)
	if y != nil {
		bindFlat(pr, w.y, p.inner, p.checkLen(y, p.dimY, "y"))
	}
	if v != nil {
		bindFlat(pr, w.v, p.inner, p.checkLen(v, p.dimY, "v"))
	}
	return pr, ms
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
	if len(ms.bar) == 0 {
		return
	}
	pr.exec(ms.adj, runDynamic)
	if f.sum == nil {
		f.sum, ms.spare = ms.spare, nil
	}
	if f.sum == nil {
		for i := range ms.bar {
			f.sum = append(f.sum, make([]float64, ms.bar[i].size))
		}
	}
	for i, acc := range f.sum {
		out := pr.out(ms.adjAt + i)
		if !f.summed {
			copy(acc, out)
			continue
		}
		for k, a := range out {
			acc[k] += a
		}
	}
	f.summed = true
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
	for i, l := range ms.bar {
		pr.bind(l, f.sum[i])
	}
	pr.exec(ms.pull, runDynamic)
	p.collect(dst, p.outer, pr, ms.pullAt)
	f.summed = false
	ms.spare, f.sum = f.sum, nil
}
