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
// Both are ordinary programs of the differentiation pass: the cut is a
// substitution of leaves for the boundary nodes, differentiated by grad
// and substituted back, so nothing but the graph changes.

// Kinds of the programs of a mixedSum, which world.program does not build;
// they key FixedX's batch data.
const (
	progSumAdjoint  = -1 - iota // ∂s̃/∂h_b at (y, v), static part at x
	progSumPullback             // ∇x Σ_b ⟨h_b, ā_b⟩, ā dynamic
)

// mixedSum holds the two programs of a world's sums of mixed products.
// With no boundary (g does not depend on both x and y) both are nil and
// the sum is zero.
type mixedSum struct {
	adjoint  *program // outputs: ∂s̃/∂h_b, one per boundary node
	pullback *program // outputs: ∇x Σ_b ⟨h_b, ā_b⟩, one per outer variable
	bar      []*node  // the leaves ā_b of pullback
}

// mixedSum returns, building it on first use, the world's mixedSum.
func (w *world) mixedSum() *mixedSum {
	if w.sum != nil {
		return w.sum
	}
	b := w.b
	w.sum = &mixedSum{}
	s := w.inner(b.grad(w.out, w.y), w.v)
	if s == nil {
		return w.sum
	}
	bound := w.boundary(s)
	cut, back := map[*node]*node{}, map[*node]*node{}
	leaves := make([]*node, len(bound))
	for i, h := range bound {
		leaves[i] = b.leaf(fmt.Sprintf("boundary %d", i), h.shape)
		cut[h], back[leaves[i]] = leaves[i], h
	}
	var hs, adj []*node
	for i, a := range b.grad(b.substitute(s, cut, map[*node]*node{}), leaves) {
		if a != nil {
			hs = append(hs, bound[i])
			adj = append(adj, b.substitute(a, back, map[*node]*node{}))
		}
	}
	if len(hs) == 0 {
		return w.sum
	}
	dynamic := map[*node]bool{}
	for _, n := range append(append([]*node{}, w.y...), w.v...) {
		dynamic[n] = true
	}
	w.sum.adjoint = compile(adj, dynamic)

	dynamic = map[*node]bool{}
	for i, h := range hs {
		w.sum.bar = append(w.sum.bar, b.leaf(fmt.Sprintf("adjoint of boundary %d", i), h.shape))
		dynamic[w.sum.bar[i]] = true
	}
	d := b.grad(w.inner(hs, w.sum.bar), w.x)
	outs := make([]*node, len(w.x))
	for i, leaf := range w.x {
		outs[i] = w.zerosFor(d[i], leaf)
	}
	w.sum.pullback = compile(outs, dynamic)
	return w.sum
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

// AddMixedXY adds the mixed product ∇xy g(x, y)·v = ∇x⟨∇y g(x, y), v⟩ at
// the fixed x and lower-level batch to the sum that MixedXYSum returns. It
// goes back only through the part of g that depends on y, and keeps the
// adjoint where that part reads the part that does not (the boundary:
// features, say); MixedXYSum goes back through the rest once for all the
// products added. The sum equals the sum of the MixedXY products up to
// rounding.
func (f *FixedX) AddMixedXY(y, v []float64) {
	f.p.stats.MixedXYProducts++
	w := f.w[lowerLevel]
	ms := w.mixedSum()
	if ms.adjoint == nil {
		return
	}
	pr := f.static(lowerLevel, progSumAdjoint, ms.adjoint)
	defer pr.releaseIf(true)
	bindFlat(pr, w.y, f.p.inner, f.p.checkLen(y, f.p.dimY, "y"))
	bindFlat(pr, w.v, f.p.inner, f.p.checkLen(v, f.p.dimY, "v"))
	pr.exec(nil, runDynamic)
	if f.sum == nil {
		for i := range ms.bar {
			f.sum = append(f.sum, make([]float64, len(pr.out(i))))
		}
	}
	for i, acc := range f.sum {
		if !f.summed {
			copy(acc, pr.out(i))
			continue
		}
		for k, a := range pr.out(i) {
			acc[k] += a
		}
	}
	f.summed = true
}

// MixedXYSum writes to dst (length DimX) the sum of the mixed products
// added by AddMixedXY since the last MixedXYSum, zero if none, and starts
// a new sum.
func (f *FixedX) MixedXYSum(dst []float64) {
	p, w := f.p, f.w[lowerLevel]
	p.checkLen(dst, p.dimX, "dst")
	if !f.summed {
		clear(dst)
		return
	}
	ms := w.mixedSum()
	pr := f.static(lowerLevel, progSumPullback, ms.pullback)
	defer pr.releaseIf(true)
	for i, l := range ms.bar {
		pr.bind(l, f.sum[i])
	}
	pr.exec(nil, runDynamic)
	p.collect(dst, p.outer, pr, 0)
	f.summed = false
}
