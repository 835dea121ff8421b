package graph

// This file is graph/'s reverse-mode differentiation: a pure pass over IR
// nodes.
//
// Vocabulary:
//   - the adjoint of a node is ∂out/∂node, a node of the same shape; the
//     vector-Jacobian product (VJP) of an operation maps the adjoint of its
//     output to a contribution to the adjoint of one argument.
//   - a node is useful when it lies on a path from one of the wrt nodes to
//     out; only useful nodes receive adjoints, so differentiating a loss
//     with respect to a linear head never visits the backbone that feeds it.
//   - a nil adjoint means a structural zero: no path carries a derivative.
//
// grad keeps its adjoints in a map it owns and discards; it never writes to
// a node. The VJP rules are each operation's opDef.vjp, written with IR
// constructors, so the result of grad is itself an ordinary expression
// that grad can differentiate again: a Hessian-vector product is grad of
// ⟨grad(g), v⟩.

func init() {
	for _, kind := range []string{"maxPoolDiffOp", "avgPoolDiffOp", "batchnormDiffOp", "dropoutDiffOp", "softmaxDiffOp",
		"sparsemaxDiffOp", "byIndicesOpDiffOp", "ctcLossDiffOp", "groupNormDiffOp", "upsampleDiffOp", "sliceIncrOp", "col2imOp"} {
		reject(kind, "a node of gorgonia's own gradient (Grad, Backpropagate): graph/ differentiates the objectives itself; write the objectives without gorgonia's gradients (an unrolled inner loop is Problem.Unrolled, or package unroll)")
	}
}

// noGrad reports whether n is constant for differentiation whatever its
// arguments: comparisons and signs are piecewise constant, and widened
// float32 nodes are data (see opDef.constant).
func noGrad(n *node) bool { return n.op.def().constant }

// grad returns the adjoints of wrt for the scalar (single-element) node out,
// seeded with ∂out/∂out = 1. An entry is nil where out does not depend on
// that wrt node.
func (b *builder) grad(out *node, wrt []*node) []*node {
	if out.size != 1 {
		panic("graph: grad of a node with " + out.String() + " elements")
	}
	// Nodes reachable from out in depth-first post-order: every node comes
	// after its arguments.
	reach := map[*node]bool{}
	var order []*node
	var visit func(n *node)
	visit = func(n *node) {
		if reach[n] {
			return
		}
		reach[n] = true
		for _, a := range n.args {
			visit(a)
		}
		order = append(order, n)
	}
	visit(out)

	isWrt := map[*node]bool{}
	for _, w := range wrt {
		isWrt[w] = true
	}
	useful := map[*node]bool{}
	for _, n := range order {
		if isWrt[n] {
			useful[n] = true
			continue
		}
		if noGrad(n) {
			continue
		}
		for _, a := range n.args {
			if useful[a] {
				useful[n] = true
				break
			}
		}
	}

	adj := map[*node]*node{out: b.constant(out.shape, []float64{1})}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		g := adj[n]
		if g == nil || !useful[n] || noGrad(n) {
			continue
		}
		for k, a := range n.args {
			if !useful[a] {
				continue
			}
			if c := n.op.def().vjp(b, n, k, g); c != nil {
				adj[a] = b.add2(adj[a], c)
			}
		}
	}
	res := make([]*node, len(wrt))
	for i, w := range wrt {
		res[i] = adj[w]
	}
	return res
}
