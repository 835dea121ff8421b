package graph

import G "gorgonia.org/gorgonia"

// Gather takes the rows (axis 0) of a table at the integer indices held in
// a vector; its adjoint adds rows back at the indices (scatterAdd), whose
// adjoint is gather again. With the indices a data input made by
// SampleIndex, a per-sample variable follows the minibatch.

var opGather, opScatterAdd opKind

func init() {
	opGather = define(opDef{name: "gather", arity: 2, // rows of args[0] at the indices held in args[1]
		shape: func(n *node) []int {
			table, idx := n.args[0], n.args[1]
			if len(table.shape) == 0 || len(idx.shape) != 1 {
				shapePanic("gather from shape %v with indices of shape %v: want a table with rows and a vector of indices", table.shape, idx.shape)
			}
			return append([]int{idx.shape[0]}, table.shape[1:]...)
		},
		f64: gatherKernel[float64], f32: gatherKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node {
			if k == 0 {
				return b.scatterAdd(g, n.args[1], n.args[0].shape[0])
			}
			return nil
		},
	})
	opScatterAdd = define(opDef{name: "scatteradd", arity: 2, // rows of args[0] added at the indices args[1]; the node's shape is the table's
		shape: func(n *node) []int {
			g, idx := n.args[0], n.args[1]
			if len(g.shape) == 0 || len(idx.shape) != 1 || g.shape[0] != idx.shape[0] || !sameShape(g.shape[1:], n.shape[1:]) {
				shapePanic("scatter of rows of shape %v at indices of shape %v into a table of shape %v", g.shape, idx.shape, n.shape)
			}
			return n.shape
		},
		f64: scatterAddKernel[float64], f32: scatterAddKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node {
			if k == 0 {
				return b.gather(g, n.args[1])
			}
			return nil
		},
	})
	reject("byIndicesOp", "ByIndices reads integer indices; use graph.Gather, whose indices are float64 (rows, axis 0)")
	recognize("gatherOp", importRule{doc: "graph.Gather",
		translate: func(im *importer, n *G.Node, a []*node) *node { return im.b.gather(a[0], a[1]) },
	})
}

// gather takes the rows (axis 0) of table at the indices held in idx.
func (b *builder) gather(table, idx *node) *node {
	return b.add(&node{op: opGather, args: []*node{table, idx}})
}

func (b *builder) scatterAdd(g, idx *node, rows int) *node {
	return b.add(&node{op: opScatterAdd, args: []*node{g, idx}, shape: append([]int{rows}, g.shape[1:]...)})
}

// gatherKernel copies the rows of in[0] at the indices in[1] to out. In
// float32 the indices are exact below 2^24 (Compile checks them).
func gatherKernel[T float](n *node, out []T, in [][]T) {
	row := n.size / max(n.shape[0], 1)
	for r, v := range in[1] {
		i := int(v)
		copy(out[r*row:(r+1)*row], in[0][i*row:(i+1)*row])
	}
}

// scatterAddKernel adds the rows of in[0] to out at the indices in[1].
func scatterAddKernel[T float](n *node, out []T, in [][]T) {
	row := n.size / max(n.shape[0], 1)
	clear(out)
	for r, v := range in[1] {
		i := int(v)
		dst := out[i*row : (i+1)*row]
		for j, g := range in[0][r*row : (r+1)*row] {
			dst[j] += g
		}
	}
}
