package graph

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Products: the 2-D matrix product with optional transposes, which
// gorgonia's Mul (matrix×matrix, matrix×vector, vector·vector) and
// OuterProd lower to. The kernels are in matmul.go.

var opMatMul opKind // ints: transA, transB

func init() {
	opMatMul = define(opDef{name: "matmul", arity: 2, shape: matmulShape,
		f64: func(n *node, out []float64, in [][]float64) {
			matmulInto(out, in[0], in[1], n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
		},
		mixed: func(n *node, out []float64, in [][]float64, in32 [][]float32) {
			matmulMixed(out, in[0], in32[0], in[1], in32[1], n.args[0].shape, n.args[1].shape, n.ints[0] == 1, n.ints[1] == 1)
		},
		vjp: matmulVJP,
	})
	recognize("linAlgBinOp", importRule{
		doc: "Mul: matrix×matrix (with transposes), matrix×vector, vector·vector; OuterProd",
		check: func(op G.Op) error {
			if linAlgKind(op) == "batched" {
				return fmt.Errorf("unsupported operation %s (BatchedMatMul)", op)
			}
			return nil
		},
		translate: translateProduct,
	})
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

func matmulVJP(b *builder, n *node, k int, g *node) *node {
	x, y := n.args[0], n.args[1]
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
}

// translateProduct translates gorgonia's products.
func translateProduct(im *importer, n *G.Node, a []*node) *node {
	b, op := im.b, n.Op()
	tx, ty := privateBool(op, "transA"), privateBool(op, "transB")
	switch linAlgKind(op) {
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
	}
	importPanic("unsupported product %v", op)
	return nil
}
