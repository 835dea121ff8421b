package graph

import (
	"math"

	G "gorgonia.org/gorgonia"
)

// Log-softmax along an axis, x − log Σ_axis exp(x), computed stably; its
// adjoint g − exp(n)·Σ_axis g is written with primitives, so it
// differentiates any number of times. gorgonia's SoftMax is exp of it.

var opLogSoftmax opKind

func init() {
	opLogSoftmax = define(opDef{name: "logsoftmax", arity: 1,
		shape: func(n *node) []int {
			checkAxis("log-softmax", n.axis, n.args[0].shape)
			return cloneInts(n.args[0].shape)
		},
		f64: logSoftmaxKernel(expInto),
		f32: logSoftmaxKernel(expInto32),
		vjp: func(b *builder, n *node, _ int, g *node) *node {
			x := n.args[0]
			s := b.broadcast(b.reshape(b.reduce(opSum, g, n.axis), keepDims(x.shape, n.axis)), x.shape)
			return b.binary(opSub, g, b.mul(b.unary(opExp, n), s))
		},
	})
	recognize("softmaxOp", importRule{doc: "SoftMax, LogSoftMax (any axis)",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			axis, isLog := softmaxParams(n.Op())
			ls := im.b.logSoftmax(a[0], normAxis(axis, len(a[0].shape)))
			if isLog {
				return ls
			}
			return im.b.unary(opExp, ls)
		},
	})
	reject("sparsemaxOp", "graph/ has no rule for sparsemax; use SoftMax, which graph/ differentiates any number of times")
	reject("ctcLossOp", "graph/ has no rule for the CTC loss; write the loss with LogSoftMax, Slice and Sum")
	recognize("logSoftmaxOp", importRule{doc: "graph.LogSoftmax, graph.SoftmaxCrossEntropy",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			return im.b.logSoftmax(a[0], normAxis(n.Op().(logSoftmaxOp).axis, len(a[0].shape)))
		},
	})
}

func (b *builder) logSoftmax(a *node, axis int) *node {
	return b.add(&node{op: opLogSoftmax, args: []*node{a}, axis: axis})
}

// logSoftmaxKernel is the kernel of opLogSoftmax with the vector
// exponential exp of its precision.
func logSoftmaxKernel[T float](exp func(dst, x []T)) kernelOf[T] {
	return func(n *node, out []T, in [][]T) {
		outer, mid, inner := split3(n.shape, n.axis)
		if inner != 1 {
			logSoftmax(out, in[0], outer, mid, inner, exp)
			return
		}
		x := in[0]
		splitElems(len(out), mid, func(lo, hi int) { logSoftmax(out[lo:hi], x[lo:hi], (hi-lo)/mid, mid, 1, exp) })
	}
}

// logSoftmax computes the log-softmax of x (outer×mid×inner) along its
// middle axis into out, with the vector exponential exp. The sums of
// exponentials and their logarithms are float64 in either precision.
func logSoftmax[T float](out, x []T, outer, mid, inner int, exp func(dst, x []T)) {
	if inner == 1 {
		// Rows: shift each by its maximum, vector exponentials over blocks
		// of rows, then subtract the logarithms of the row sums.
		x, out := x[:outer*mid], out[:outer*mid]
		for r := 0; r < len(x); r += mid {
			row, dst := x[r:r+mid], out[r:r+mid]
			m := row[0]
			for _, v := range row[1:] {
				if v > m {
					m = v
				}
			}
			for j, v := range row {
				dst[j] = v - m
			}
		}
		// The exponentials go to a buffer from the pool (exp is a function
		// value, so a buffer on the stack would escape), a block of about
		// 4096 elements of whole rows at a time, so that no buffer the size
		// of the data is kept; the sums to one on the stack.
		var sums [4096]float64
		rows := max(1, len(sums)/mid)
		p := getBuf[T](min(outer, rows) * mid)
		defer putBuf(p)
		for o0 := 0; o0 < outer; o0 += rows {
			o1 := min(outer, o0+rows)
			seg := out[o0*mid : o1*mid]
			e := (*p)[:len(seg)]
			exp(e, seg)
			ls := sums[:o1-o0]
			rowSums(ls, e, mid)
			logInto(ls, ls)
			for i, l := range ls {
				dst := seg[i*mid : (i+1)*mid]
				for j := range dst {
					dst[j] = T(float64(dst[j]) - l)
				}
			}
		}
		return
	}
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*mid*inner + i
			m := math.Inf(-1)
			for j := 0; j < mid; j++ {
				if v := float64(x[base+j*inner]); v > m {
					m = v
				}
			}
			s := 0.0
			for j := 0; j < mid; j++ {
				s += math.Exp(float64(x[base+j*inner]) - m)
			}
			lse := m + math.Log(s)
			for j := 0; j < mid; j++ {
				out[base+j*inner] = T(float64(x[base+j*inner]) - lse)
			}
		}
	}
}
