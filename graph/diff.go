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
// a node. The VJP rules are written with IR constructors, so the result of
// grad is itself an ordinary expression that grad can differentiate again:
// a Hessian-vector product is grad of ⟨grad(g), v⟩.

// noGrad reports whether n is constant for differentiation whatever its
// arguments: comparisons and signs are piecewise constant, and widened
// float32 nodes are data.
func noGrad(n *node) bool {
	switch n.op {
	case opLeaf, opConst, opCmp, opSign, opWiden:
		return true
	}
	return false
}

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
			if c := b.vjp(n, k, g); c != nil {
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

// vjp returns the contribution of n's adjoint g to the adjoint of its
// argument k, or nil for a structural zero.
func (b *builder) vjp(n *node, k int, g *node) *node {
	x := n.args[0]
	var y *node
	if len(n.args) > 1 {
		y = n.args[1]
	}
	one := b.scalar(1)
	switch n.op {
	case opNeg:
		return b.unary(opNeg, g)
	case opExp:
		return b.mul(g, n)
	case opLog:
		return b.binary(opDiv, g, x)
	case opLog1p:
		return b.binary(opDiv, g, b.binary(opAdd, x, one))
	case opExpm1:
		return b.mul(g, b.binary(opAdd, n, one))
	case opSqrt:
		return b.binary(opDiv, b.scale(g, 0.5), n)
	case opInvSqrt:
		return b.mul(b.scale(g, -0.5), b.unary(opCube, n))
	case opSquare:
		return b.mul(b.scale(g, 2), x)
	case opCube:
		return b.mul(b.scale(g, 3), b.unary(opSquare, x))
	case opInverse:
		return b.unary(opNeg, b.mul(g, b.unary(opSquare, n)))
	case opSigmoid:
		return b.mul(g, b.mul(n, b.binary(opSub, one, n)))
	case opTanh:
		return b.mul(g, b.binary(opSub, one, b.unary(opSquare, n)))
	case opSoftplus:
		return b.mul(g, b.unary(opSigmoid, x))
	case opAbs:
		return b.mul(g, b.unary(opSign, x))
	case opSin:
		return b.mul(g, b.unary(opCos, x))
	case opCos:
		return b.unary(opNeg, b.mul(g, b.unary(opSin, x)))

	case opAdd:
		return b.reduceTo(g, n.args[k].shape)
	case opSub:
		if k == 0 {
			return b.reduceTo(g, x.shape)
		}
		return b.unary(opNeg, b.reduceTo(g, y.shape)) // negate the reduced adjoint
	case opMul:
		if k == 0 {
			return b.reduceTo(b.mul(g, y), x.shape)
		}
		return b.reduceTo(b.mul(g, x), y.shape)
	case opDiv:
		if k == 0 {
			return b.reduceTo(b.binary(opDiv, g, y), x.shape)
		}
		return b.reduceTo(b.unary(opNeg, b.binary(opDiv, b.mul(g, n), y)), y.shape)
	case opPow:
		if k == 0 {
			d := b.mul(y, b.binary(opPow, x, b.binary(opSub, y, one)))
			return b.reduceTo(b.mul(g, d), x.shape)
		}
		return b.reduceTo(b.mul(g, b.mul(n, b.unary(opLog, x))), y.shape)

	case opReshape:
		return b.reshape(g, x.shape)
	case opTranspose:
		inv := make([]int, len(n.ints))
		for i, p := range n.ints {
			inv[p] = i
		}
		return b.transpose(g, inv)
	case opBroadcast:
		return b.reduceTo(g, x.shape)
	case opSum:
		return b.broadcast(b.reshape(g, keepDims(x.shape, n.axis)), x.shape)
	case opMax:
		keep := keepDims(x.shape, n.axis)
		mask := b.cmp(cmpEQ, x, b.broadcast(b.reshape(n, keep), x.shape))
		count := b.reshape(b.reduce(opSum, mask, n.axis), keep)
		w := b.binary(opDiv, mask, b.broadcast(count, x.shape))
		return b.mul(b.broadcast(b.reshape(g, keep), x.shape), w)
	case opConcat:
		off := 0
		for i := 0; i < k; i++ {
			off += n.args[i].shape[n.axis]
		}
		return b.slice(g, n.axis, off, off+n.args[k].shape[n.axis], 1, false)
	case opSlice:
		return b.sliceGrad(g, x.shape, n.axis, n.ints)
	case opSliceGrad:
		return b.slice(g, n.axis, n.ints[0], n.ints[1], n.ints[2], n.ints[3] == 1)
	case opMatMul:
		tx, ty := n.ints[0] == 1, n.ints[1] == 1
		if k == 0 {
			if !tx {
				return b.matmul(g, y, false, !ty)
			}
			return b.matmul(y, g, ty, true)
		}
		if !ty {
			return b.matmul(x, g, !tx, false)
		}
		return b.matmul(g, x, true, tx)
	case opBatchNorm:
		return b.batchNormVJP(n, k, g)
	case opBatchNormGrad:
		return b.batchNormGradVJP(n, k, g)
	case opLogSoftmax:
		keep := keepDims(x.shape, n.axis)
		s := b.broadcast(b.reshape(b.reduce(opSum, g, n.axis), keep), x.shape)
		return b.binary(opSub, g, b.mul(b.unary(opExp, n), s))
	case opIm2Col:
		return b.col2im(g, x.shape, convFrom(n.ints))
	case opCol2Im:
		return b.im2col(g, convFrom(n.ints))
	case opPoolGather:
		if k == 1 {
			return b.poolScatter(x, g, poolFrom(n.ints))
		}
		return nil
	case opPoolScatter:
		if k == 1 {
			return b.poolGather(x, g, poolFrom(n.ints))
		}
		return nil
	case opGather:
		if k == 0 {
			return b.scatterAdd(g, y, x.shape[0])
		}
		return nil
	case opScatterAdd:
		if k == 0 {
			return b.gather(g, y)
		}
		return nil
	}
	panic("graph: no derivative rule for " + n.op.String())
}
