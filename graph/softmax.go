package graph

import (
	"math"

	G "gorgonia.org/gorgonia"
)

// Log-softmax along an axis, x − log Σ_axis exp(x), computed stably; its
// adjoint g − exp(n)·Σ_axis g is written with primitives, so it
// differentiates any number of times. gorgonia's SoftMax is exp of it.
//
// A program computes that adjoint in one operation, logsoftmax-adjoint
// (fuseLogSoftmaxAdjoint): compile replaces the primitives' subtraction by
// it, after differentiation, so that the IR and its derivatives are those
// of the primitives. It reads g and n once, a block of rows at a time,
// where the primitives take four passes over arrays of n's size (exp, the
// sums, the product, the difference), and computes the same operations in
// the same order: the same bits in either precision.

var opLogSoftmax, opLogSoftmaxAdjoint opKind

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
	opLogSoftmaxAdjoint = define(opDef{name: "logsoftmax-adjoint", arity: 2,
		shape: func(n *node) []int {
			g, ls := n.args[0].shape, n.args[1].shape
			checkAxis("log-softmax adjoint", n.axis, g)
			if !sameShape(g, ls) {
				shapePanic("log-softmax adjoint of shape %v for a log-softmax of shape %v", g, ls)
			}
			return cloneInts(g)
		},
		f64:  logSoftmaxAdjointKernel(expInto),
		f32:  logSoftmaxAdjointKernel(expInto32),
		fuse: fuseLogSoftmaxAdjoint,
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
		// Rows, a block of about 4096 elements of whole rows at a time,
		// which stays in cache from the first pass to the last: shift each
		// row by its maximum, vector exponentials, then subtract the
		// logarithms of the row sums. The exponentials go to a buffer from
		// the pool (exp is a function value, so a buffer on the stack would
		// escape), the sums to one on the stack.
		x, out := x[:outer*mid], out[:outer*mid]
		var sums [4096]float64
		rows := max(1, len(sums)/mid)
		p := getBuf[T](min(outer, rows) * mid)
		defer putBuf(p)
		for o0 := 0; o0 < outer; o0 += rows {
			o1 := min(outer, o0+rows)
			seg := out[o0*mid : o1*mid]
			for r := o0 * mid; r < o1*mid; r += mid {
				shiftByMax(out[r:r+mid], x[r:r+mid])
			}
			e := (*p)[:len(seg)]
			exp(e, seg)
			ls := sums[:o1-o0]
			rowSums(ls, e, mid)
			logInto(ls, ls)
			seg32, f32 := any(seg).([]float32)
			for i, l := range ls {
				if f32 {
					subLog32(seg32[i*mid:(i+1)*mid], l)
					continue
				}
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

// fuseLogSoftmaxAdjoint returns the logsoftmax-adjoint node computing n
// when n is the adjoint that opLogSoftmax's vjp builds from primitives,
// g − exp(ls)·Σ_axis g (the sum reshaped to keep its axis, broadcast or
// read as a repeated row or column by the product), or nil.
func fuseLogSoftmaxAdjoint(n *node) *node {
	if n.op != opSub || len(n.args) != 2 || n.args[1].op != opMul {
		return nil
	}
	g, m := n.args[0], n.args[1]
	e, r := m.args[0], m.args[1]
	if e.op != opExp {
		e, r = r, e
	}
	if e.op != opExp || e.args[0].op != opLogSoftmax {
		return nil
	}
	ls := e.args[0]
	if r.op == opBroadcast && sameShape(r.shape, ls.shape) {
		r = r.args[0]
	}
	if r.op != opReshape || !sameShape(r.shape, keepDims(ls.shape, ls.axis)) {
		return nil
	}
	sum := r.args[0]
	if sum.op != opSum || sum.axis != ls.axis || sum.args[0] != g || g.f32 ||
		!sameShape(g.shape, ls.shape) || !sameShape(n.shape, ls.shape) {
		return nil
	}
	return &node{op: opLogSoftmaxAdjoint, args: []*node{g, ls}, axis: ls.axis, shape: cloneInts(n.shape), size: n.size}
}

// logSoftmaxAdjointKernel is the kernel of opLogSoftmaxAdjoint with the
// vector exponential exp of its precision: out = g − exp(ls)·Σ_axis g, by
// blocks of whole rows split across cores.
func logSoftmaxAdjointKernel[T float](exp func(dst, x []T)) kernelOf[T] {
	return func(n *node, out []T, in [][]T) {
		_, mid, inner := split3(n.shape, n.axis)
		g, ls := in[0], in[1]
		row := mid * inner
		splitElems(len(out), row, func(lo, hi int) {
			logSoftmaxAdjoint(out[lo:hi], g[lo:hi], ls[lo:hi], (hi-lo)/row, mid, inner, exp)
		})
	}
}

// logSoftmaxAdjoint computes out = g − exp(ls)·Σ_mid g for g and ls
// (outer×mid×inner) along their middle axis, a block of about 4096
// elements at a time, with the operations of the primitives it replaces
// in their order: the sums as sumAxis computes them, rounded to T, the
// exponentials of exp, their product with the sums rounded to T, then the
// difference.
func logSoftmaxAdjoint[T float](out, g, ls []T, outer, mid, inner int, exp func(dst, x []T)) {
	row := mid * inner
	rows := max(1, 4096/row)
	e, s := getBuf[T](min(outer, rows)*row), getBuf[T](min(outer, rows)*inner)
	defer putBuf(e)
	defer putBuf(s)
	for o0 := 0; o0 < outer; o0 += rows {
		o1 := min(outer, o0+rows)
		gb, ob := g[o0*row:o1*row], out[o0*row:o1*row]
		sb, eb := (*s)[:(o1-o0)*inner], (*e)[:len(gb)]
		sumAxis(sb, gb, o1-o0, mid, inner)
		exp(eb, ls[o0*row:o1*row])
		if o32, f32 := any(ob).([]float32); f32 && inner == 1 {
			g32, e32, s32 := any(gb).([]float32), any(eb).([]float32), any(sb).([]float32)
			for o, sv := range s32 {
				mulSub32(o32[o*mid:(o+1)*mid], g32[o*mid:(o+1)*mid], e32[o*mid:(o+1)*mid], sv)
			}
			continue
		}
		for o := range o1 - o0 {
			so := sb[o*inner : (o+1)*inner]
			for j := range mid {
				k := o*row + j*inner
				for i, sv := range so {
					ob[k+i] = gb[k+i] - T(eb[k+i]*sv)
				}
			}
		}
	}
}

// shiftByMax sets dst to row minus the row's maximum (in float32,
// rowMax32 and shift32: the same values, a zero's sign or a NaN aside,
// where a NaN makes the whole row's log-softmax NaN).
func shiftByMax[T float](dst, row []T) {
	if r32, ok := any(row).([]float32); ok {
		shift32(any(dst).([]float32), r32, rowMax32(r32))
		return
	}
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
