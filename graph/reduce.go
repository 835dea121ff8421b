package graph

import (
	"sort"

	G "gorgonia.org/gorgonia"
)

// Reductions along one axis (the axis is dropped): sums and maxima, and
// gorgonia's Sum, Max and Mean (a sum divided by SizeOf) along any axes.

var opSum, opMax opKind

func init() {
	opSum = define(opDef{name: "sum", arity: 1, shape: reduceShape,
		f64: sumKernel[float64], f32: sumKernel[float32],
		vjp: func(b *builder, n *node, _ int, g *node) *node {
			x := n.args[0]
			return b.broadcast(b.reshape(g, keepDims(x.shape, n.axis)), x.shape)
		},
	})
	opMax = define(opDef{name: "max", arity: 1, shape: reduceShape,
		f64: maxKernel[float64], f32: maxKernel[float32],
		// The adjoint goes to the maxima of each slice, shared equally
		// among ties.
		vjp: func(b *builder, n *node, _ int, g *node) *node {
			x := n.args[0]
			keep := keepDims(x.shape, n.axis)
			mask := b.cmp(cmpEQ, x, b.broadcast(b.reshape(n, keep), x.shape))
			count := b.reshape(b.reduce(opSum, mask, n.axis), keep)
			w := b.binary(opDiv, mask, b.broadcast(count, x.shape))
			return b.mul(b.broadcast(b.reshape(g, keep), x.shape), w)
		},
	})
	reduceAlong := func(kind *opKind) func(im *importer, n *G.Node, a []*node) *node {
		return func(im *importer, n *G.Node, a []*node) *node {
			along := reducedAxes(n.Op())
			if len(along) == 0 {
				for i := range a[0].shape {
					along = append(along, i)
				}
			}
			sort.Sort(sort.Reverse(sort.IntSlice(along)))
			r := a[0]
			for _, ax := range along {
				r = im.b.reduce(*kind, r, ax)
			}
			return r
		}
	}
	recognize("sumOp", importRule{doc: "Sum, Mean (Sum ÷ SizeOf) along any axes", translate: reduceAlong(&opSum)})
	recognize("maxOp", importRule{doc: "Max along any axes", translate: reduceAlong(&opMax)})
}

func reduceShape(n *node) []int {
	a := n.args[0]
	checkAxis(n.op.String(), n.axis, a.shape)
	shape := append(cloneInts(a.shape[:n.axis]), a.shape[n.axis+1:]...)
	if shape == nil {
		shape = []int{}
	}
	return shape
}

func (b *builder) reduce(op opKind, a *node, axis int) *node {
	return b.add(&node{op: op, args: []*node{a}, axis: axis})
}

// sumAll sums every element of a into a 0-d scalar.
func (b *builder) sumAll(a *node) *node {
	if len(a.shape) == 0 {
		return a
	}
	return b.reduce(opSum, b.reshape(a, []int{a.size}), 0)
}

// reduceTo sums g down to shape: the adjoint of broadcasting a value of
// shape to g's shape (equal ranks with 1s, or a single element).
func (b *builder) reduceTo(g *node, shape []int) *node {
	if sameShape(g.shape, shape) {
		return g
	}
	if sizeOf(shape) == 1 {
		return b.reshape(b.sumAll(g), shape)
	}
	if len(g.shape) != len(shape) {
		shapePanic("reduce %v to %v: ranks differ", g.shape, shape)
	}
	r := g
	for ax := len(shape) - 1; ax >= 0; ax-- {
		if shape[ax] == 1 && g.shape[ax] != 1 {
			r = b.reduce(opSum, r, ax)
		}
	}
	return b.reshape(r, shape)
}

func sumKernel[T float](n *node, out []T, in [][]T) {
	outer, mid, inner := split3(n.args[0].shape, n.axis)
	sumAxis(out, in[0], outer, mid, inner)
}

func maxKernel[T float](n *node, out []T, in [][]T) {
	outer, mid, inner := split3(n.args[0].shape, n.axis)
	maxAxis(out, in[0], outer, mid, inner)
}

// sumAxis sums x (outer×mid×inner) along its middle axis into out. The
// sums accumulate in float64 in either precision (float32 sums of many
// rows — a batch — would lose digits): in float32, the sums of columns
// accumulate in a float64 buffer.
func sumAxis[T float](out, x []T, outer, mid, inner int) {
	if inner == 1 { // row sums, the rows split across cores when many
		if outer*mid < parallelElems { // (no closure to allocate)
			rowSums(out[:outer], x, mid)
			return
		}
		splitElems(outer*mid, mid, func(lo, hi int) { rowSums(out[lo/mid:hi/mid], x[lo:hi], mid) })
		return
	}
	out64, f64 := any(out).([]float64)
	var acc []float64
	if !f64 {
		buf := getScratch(inner)
		defer putScratch(buf)
		acc = *buf
	}
	for o := 0; o < outer; o++ {
		dst := out[o*inner : (o+1)*inner]
		if f64 {
			acc = out64[o*inner : (o+1)*inner]
		}
		clear(acc)
		addRows(acc, x[o*mid*inner:(o+1)*mid*inner], mid)
		if !f64 {
			for i, v := range acc {
				dst[i] = T(v)
			}
		}
	}
}

func maxAxis[T float](out, x []T, outer, mid, inner int) {
	for o := 0; o < outer; o++ {
		dst := out[o*inner : (o+1)*inner]
		copy(dst, x[o*mid*inner:(o*mid+1)*inner])
		for m := 1; m < mid; m++ {
			src := x[(o*mid+m)*inner : (o*mid+m+1)*inner]
			for i, v := range src {
				if v > dst[i] || v != v { // NaN wins
					dst[i] = v
				}
			}
		}
	}
}

// rowSums sets out[i] to the sum of row i of x (rows of mid elements) for
// i < len(out), computed in float64: term after term when x is float64
// (the bits of graph/'s float64 sums), in thirty-two interleaved partial
// sums (sum32, vector code on AVX-512) when it is float32, whose sums have
// no earlier bits to keep — many times as fast, as a sum term after term
// waits for each addition.
func rowSums[T, S float](out []S, x []T, mid int) {
	if x32, ok := any(x).([]float32); ok {
		for i := range out {
			out[i] = S(sum32(x32[i*mid : (i+1)*mid]))
		}
		return
	}
	for i := range out {
		s := 0.0
		for _, v := range x[i*mid : (i+1)*mid] {
			s += float64(v)
		}
		out[i] = S(s)
	}
}

// addRowsGo adds the rows of x (rows × len(acc), row-major) to acc, four
// rows at a time with each column's terms still added one by one in row
// order (the partial sum in a register), as bnStats does; addRows is
// this loop or its AVX-512 kernel, with the same bits.
func addRowsGo[T float](acc []float64, x []T, rows int) {
	c := len(acc)
	r := 0
	for ; r+4 <= rows; r += 4 {
		x0, x1, x2, x3 := x[r*c:][:c], x[(r+1)*c:][:c], x[(r+2)*c:][:c], x[(r+3)*c:][:c]
		for j := range acc {
			acc[j] = acc[j] + float64(x0[j]) + float64(x1[j]) + float64(x2[j]) + float64(x3[j])
		}
	}
	for ; r < rows; r++ {
		xr := x[r*c:][:c]
		for j := range acc {
			acc[j] += float64(xr[j])
		}
	}
}
