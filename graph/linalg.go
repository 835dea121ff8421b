package graph

import G "gorgonia.org/gorgonia"

// Products: the 2-D matrix product with optional transposes, which
// gorgonia's Mul (matrix×matrix, matrix×vector, vector·vector) and
// OuterProd lower to. The kernels are in matmul.go.

var opMatMul, opBatchMatMul opKind // ints: transA, transB

func init() {
	opMatMul = define(opDef{name: "matmul", arity: 2, shape: matmulShape,
		f64: func(n *node, out []float64, in [][]float64) {
			matmulInto(out, in[0], in[1], n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
		},
		f32: func(n *node, out []float32, in [][]float32) {
			matmul32(out, in[0], in[1], n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
		},
		mixed: func(n *node, out []float64, in [][]float64, in32 [][]float32) {
			matmulMixed(out, in[0], in32[0], in[1], in32[1], n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
		},
		vjp: func(b *builder, n *node, k int, g *node) *node { return productVJP(b.matmul, n, k, g) },
	})
	opBatchMatMul = define(opDef{name: "batchmatmul", arity: 2, // a product per entry of axis 0 of 3-D operands
		shape: func(n *node) []int {
			x, y := n.args[0], n.args[1]
			if len(x.shape) != 3 || len(y.shape) != 3 || x.shape[0] != y.shape[0] {
				shapePanic("batched product of shapes %v and %v: want 3-D operands with the same batch", x.shape, y.shape)
			}
			mn := matmulShape(&node{args: []*node{{shape: x.shape[1:]}, {shape: y.shape[1:]}}, ints: n.ints})
			return append([]int{x.shape[0]}, mn...)
		},
		f64: batchKernel(matmulInto),
		f32: batchKernel(matmul32),
		vjp: func(b *builder, n *node, k int, g *node) *node { return productVJP(b.batchMatMul, n, k, g) },
	})
	recognize("linAlgBinOp", importRule{
		doc:       "Mul: matrix×matrix (with transposes), matrix×vector, vector·vector; OuterProd; BatchedMatMul",
		translate: translateProduct,
	})
	recognize("tensordotOp", importRule{doc: "Tensordot", translate: translateTensordot})
}

// batchKernel is the kernel of opBatchMatMul: the product mul for each
// entry of axis 0.
func batchKernel[T float](mul func(out, x, y []T, xs, ys []int, tx, ty bool)) kernelOf[T] {
	return func(n *node, out []T, in [][]T) {
		xs, ys := n.args[0].shape, n.args[1].shape
		sx, sy, so := xs[1]*xs[2], ys[1]*ys[2], n.shape[1]*n.shape[2]
		for i := 0; i < xs[0]; i++ {
			mul(out[i*so:(i+1)*so], in[0][i*sx:(i+1)*sx], in[1][i*sy:(i+1)*sy], xs[1:], ys[1:], n.ints[0] == 1, n.ints[1] == 1)
		}
	}
}

func matmulShape(n *node) []int {
	x, y := n.args[0], n.args[1]
	tx, ty := n.ints[0] == 1, n.ints[1] == 1
	if len(x.shape) != 2 || len(y.shape) != 2 {
		shapePanic("matrix product of shapes %v and %v: both must be 2-D", x.shape, y.shape)
	}
	m, k := x.shape[0], x.shape[1]
	if tx {
		m, k = k, m
	}
	k2, cols := y.shape[0], y.shape[1]
	if ty {
		k2, cols = cols, k2
	}
	if k != k2 {
		shapePanic("matrix product of shapes %v (transposed %v) and %v (transposed %v): inner sizes %d and %d differ", x.shape, tx, y.shape, ty, k, k2)
	}
	return []int{m, cols}
}

// matmul returns op(x)·op(y) for 2-D operands, op being an optional
// transpose.
func (b *builder) matmul(x, y *node, tx, ty bool) *node {
	// Products read float32 operands as they are (matmulMixed), so the
	// data stream from memory at half the width.
	if x.op == opWiden {
		x = x.args[0]
	}
	if y.op == opWiden {
		y = y.args[0]
	}
	return b.add(&node{op: opMatMul, args: []*node{x, y}, ints: []int{b2i(tx), b2i(ty)}})
}

// batchMatMul returns the product op(x_i)·op(y_i) for each i along axis 0
// of 3-D operands.
func (b *builder) batchMatMul(x, y *node, tx, ty bool) *node {
	return b.add(&node{op: opBatchMatMul, args: []*node{x, y}, ints: []int{b2i(tx), b2i(ty)}})
}

// productVJP is the adjoint of argument k of the product n = op(x)·op(y)
// made by mul (matmul or batchMatMul) for the adjoint g of n.
func productVJP(mul func(x, y *node, tx, ty bool) *node, n *node, k int, g *node) *node {
	x, y := n.args[0], n.args[1]
	tx, ty := n.ints[0] == 1, n.ints[1] == 1
	if k == 0 {
		if !tx {
			return mul(g, y, false, !ty)
		}
		return mul(y, g, ty, true)
	}
	if !ty {
		return mul(x, g, !tx, false)
	}
	return mul(g, x, true, tx)
}

// translateTensordot contracts a over aAxes with b over bAxes, the free
// axes of a then of b making the result, as gorgonia's Tensordot (and
// numpy's): a product of a's and b's transposes, flattened.
func translateTensordot(im *importer, n *G.Node, a []*node) *node {
	b, op := im.b, n.Op()
	aAxes, bAxes := tensordotAxes(op)
	if len(aAxes) != len(bAxes) {
		shapePanic("tensordot over %d axes of a and %d of b", len(aAxes), len(bAxes))
	}
	flat := func(x *node, axes []int, contractedFirst bool) (*node, []int) {
		contracted := map[int]bool{}
		for _, ax := range axes {
			checkAxis("tensordot", ax, x.shape)
			contracted[ax] = true
		}
		var free, perm []int
		for ax := range x.shape {
			if !contracted[ax] {
				free = append(free, x.shape[ax])
				perm = append(perm, ax)
			}
		}
		k := 1
		for _, ax := range axes {
			k *= x.shape[ax]
		}
		rows := []int{sizeOf(free), k}
		if contractedFirst {
			perm = append(append([]int{}, axes...), perm...)
			rows = []int{k, sizeOf(free)}
		} else {
			perm = append(perm, axes...)
		}
		return b.reshape(b.transpose(x, perm), rows), free
	}
	x, freeA := flat(a[0], aAxes, false)
	y, freeB := flat(a[1], bAxes, true)
	shape := append(freeA, freeB...)
	if shape == nil {
		shape = []int{}
	}
	return b.reshape(b.matmul(x, y, false, false), shape)
}

// translateProduct translates gorgonia's products.
func translateProduct(im *importer, n *G.Node, a []*node) *node {
	b, op := im.b, n.Op()
	kind, tx, ty := productParams(op)
	switch kind {
	case "matmul":
		return b.matmul(a[0], a[1], tx, ty)
	case "matvec":
		if len(a[1].shape) != 1 {
			shapePanic("matrix×vector with a right operand of shape %v", a[1].shape)
		}
		p := b.matmul(a[0], b.reshape(a[1], []int{a[1].size, 1}), tx, false)
		return b.reshape(p, []int{p.size})
	case "vecdot":
		return b.sumAll(b.binary(opMul, a[0], a[1]))
	case "outer":
		return b.matmul(b.reshape(a[0], []int{a[0].size, 1}), b.reshape(a[1], []int{1, a[1].size}), false, false)
	case "batched":
		x, y := a[0], a[1]
		r := len(x.shape)
		if r < 3 || len(y.shape) != r {
			shapePanic("batched product of shapes %v and %v: want operands of the same rank, at least 3", x.shape, y.shape)
		}
		outer := x.shape[:r-2]
		batch := sizeOf(outer)
		p := b.batchMatMul(b.reshape(x, []int{batch, x.shape[r-2], x.shape[r-1]}), b.reshape(y, []int{batch, y.shape[r-2], y.shape[r-1]}), tx, ty)
		return b.reshape(p, append(cloneInts(outer), p.shape[1:]...))
	}
	importPanic("unsupported product %v", op)
	return nil
}
