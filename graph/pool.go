package graph

import (
	"math"

	G "gorgonia.org/gorgonia"
)

// Pooling. Max pooling is two operations that are each other's adjoint in
// their second argument: poolGather(src, val) picks, in each window of
// src, the element of val at src's argmax (poolGather(a, a) is max
// pooling), and poolScatter(src, g) sends each element of g to the argmax
// of its window in src. src is constant for differentiation (the argmax is
// piecewise constant), so both differentiate any number of times. Average
// pooling is a window sum (linear, with its adjoint the window spread)
// scaled as gorgonia scales it; global average pooling is a mean.

var opPoolGather, opPoolScatter opKind // ints: kh, kw, padN, padS, padW, padE, sH, sW

func init() {
	opPoolGather = define(opDef{name: "poolgather", arity: 2, shape: poolShape,
		f64: poolGatherKernel[float64], f32: poolGatherKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node {
			if k == 1 {
				return b.poolScatter(n.args[0], g, poolFrom(n.ints))
			}
			return nil
		},
	})
	opPoolScatter = define(opDef{name: "poolscatter", arity: 2, shape: poolScatterShape,
		f64: poolScatterKernel[float64], f32: poolScatterKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node {
			if k == 1 {
				return b.poolGather(n.args[0], g, poolFrom(n.ints))
			}
			return nil
		},
	})
	recognize("maxPoolOp", importRule{doc: "MaxPool2D (and MaxPool1D, AveragePool1D, which is a max pool in gorgonia)",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			return im.b.poolGather(a[0], a[0], gorgoniaPool(n.Op()))
		},
	})
	opWindowSum = define(opDef{name: "windowsum", arity: 1,
		shape: func(n *node) []int { return poolShape(&node{args: []*node{n.args[0], n.args[0]}, ints: n.ints}) },
		f64:   windowSumKernel[float64], f32: windowSumKernel[float32],
		vjp: func(b *builder, n *node, _ int, g *node) *node {
			return b.add(&node{op: opWindowSpread, args: []*node{g}, shape: cloneInts(n.args[0].shape), ints: n.ints})
		},
	})
	opWindowSpread = define(opDef{name: "windowspread", arity: 1, // the adjoint of opWindowSum: each element of args[0] added to its window; the node's shape is the image's
		shape: func(n *node) []int {
			if pooled := poolShape(&node{args: []*node{n, n}, ints: n.ints}); !sameShape(pooled, n.args[0].shape) {
				shapePanic("window-sum adjoint of shape %v for windows of shape %v", n.args[0].shape, pooled)
			}
			return n.shape
		},
		f64: windowSpreadKernel[float64], f32: windowSpreadKernel[float32],
		vjp: func(b *builder, n *node, _ int, g *node) *node {
			return b.add(&node{op: opWindowSum, args: []*node{g}, ints: n.ints})
		},
	})
	recognize("avgPoolOp", importRule{doc: "AveragePool2D (gorgonia divides each window's sum by the image width, not the window size)",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			if len(a[0].shape) != 4 {
				shapePanic("average pooling of shape %v: want (batch, channels, height, width)", a[0].shape)
			}
			sum := im.b.add(&node{op: opWindowSum, args: []*node{a[0]}, ints: gorgoniaPool(n.Op()).ints()})
			return im.b.scale(sum, 1/float64(a[0].shape[3]))
		},
	})
	recognize("globalAveragePoolOp", importRule{doc: "GlobalAveragePool2D",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			b, x := im.b, a[0]
			if len(x.shape) != 4 {
				shapePanic("global average pooling of shape %v: want (batch, channels, height, width)", x.shape)
			}
			nb, c, hw := x.shape[0], x.shape[1], x.shape[2]*x.shape[3]
			sum := b.reduce(opSum, b.reshape(x, []int{nb, c, hw}), 2)
			return b.reshape(b.scale(sum, 1/float64(hw)), []int{nb, c, 1, 1})
		},
	})
}

// Window sums, for gorgonia's average pooling: each window of a
// (batch, channels, h, w) image summed (windows as max pooling's, clipped
// to the image), and the adjoint, each window's value added back to its
// elements.
var opWindowSum, opWindowSpread opKind // ints: as the max-pooling operations'

// The kernels of the pooling operations.

func poolGatherKernel[T float](n *node, out []T, in [][]T) {
	poolGatherInto(out, in[0], in[1], n.args[0].shape, poolFrom(n.ints))
}

func poolScatterKernel[T float](n *node, out []T, in [][]T) {
	poolScatterInto(out, in[0], in[1], n.args[0].shape, poolFrom(n.ints))
}

func windowSumKernel[T float](n *node, out []T, in [][]T) {
	windowSumInto(out, in[0], n.args[0].shape, poolFrom(n.ints), false)
}

func windowSpreadKernel[T float](n *node, out []T, in [][]T) {
	windowSumInto(in[0], out, n.shape, poolFrom(n.ints), true)
}

// windowSumInto sets out to the window sums of x (of shape shape); with
// spread it computes the adjoint instead: x, cleared, receives each
// window's value in out at each of the window's elements. Sums accumulate
// in float64.
func windowSumInto[T float](out, x []T, shape []int, p poolParams, spread bool) {
	h, w := shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	if spread {
		clear(x)
	}
	o := 0
	for pl := 0; pl < shape[0]*shape[1]; pl++ {
		img := x[pl*h*w : (pl+1)*h*w]
		for or := 0; or < oh; or++ {
			r0, r1 := max(or*p.sH-p.padN, 0), min(or*p.sH-p.padN+p.kh, h)
			for oc := 0; oc < ow; oc++ {
				c0, c1 := max(oc*p.sW-p.padW, 0), min(oc*p.sW-p.padW+p.kw, w)
				s := 0.0
				for r := r0; r < r1; r++ {
					row := img[r*w : r*w+c1]
					for c := c0; c < c1; c++ {
						if spread {
							row[c] += out[o]
						} else {
							s += float64(row[c])
						}
					}
				}
				if !spread {
					out[o] = T(s)
				}
				o++
			}
		}
	}
}

// poolParams are the ints of opPoolGather and opPoolScatter.
type poolParams struct{ kh, kw, padN, padS, padW, padE, sH, sW int }

func (p poolParams) ints() []int {
	return []int{p.kh, p.kw, p.padN, p.padS, p.padW, p.padE, p.sH, p.sW}
}

func poolFrom(ints []int) poolParams {
	return poolParams{ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]}
}

func (p poolParams) outHW(h, w int) (int, int) {
	return (h+p.padN+p.padS-p.kh)/p.sH + 1, (w+p.padW+p.padE-p.kw)/p.sW + 1
}

// gorgoniaPool returns the windows of gorgonia's maxPoolOp. With four
// padding values (north, south, west, east) gorgonia's kernel starts the
// windows padSouth rows above and padEast columns left of the image, not
// padNorth and padWest, while the output size counts all four: graph/
// computes what gorgonia computes.
func gorgoniaPool(op G.Op) poolParams {
	p, explicit := poolingParams(op)
	if explicit {
		p.padN, p.padS, p.padW, p.padE = p.padS, p.padN, p.padE, p.padW
	}
	return p
}

func poolShape(n *node) []int {
	src, val, p := n.args[0], n.args[1], poolFrom(n.ints)
	if len(src.shape) != 4 || !sameShape(src.shape, val.shape) {
		shapePanic("max pooling of shapes %v and %v: want equal (batch, channels, height, width)", src.shape, val.shape)
	}
	oh, ow := p.outHW(src.shape[2], src.shape[3])
	if oh < 1 || ow < 1 {
		shapePanic("max pooling: window %dx%d does not fit %v", p.kh, p.kw, src.shape)
	}
	return []int{src.shape[0], src.shape[1], oh, ow}
}

func poolScatterShape(n *node) []int {
	src, g := n.args[0], n.args[1]
	if pooled := poolShape(&node{args: []*node{src, src}, ints: n.ints}); !sameShape(pooled, g.shape) {
		shapePanic("max-pooling adjoint of shape %v for windows of shape %v", g.shape, pooled)
	}
	return cloneInts(src.shape)
}

// poolGather picks, in each pooling window of src, the element of val at
// src's argmax. poolGather(a, a) is max pooling.
func (b *builder) poolGather(src, val *node, p poolParams) *node {
	return b.add(&node{op: opPoolGather, args: []*node{src, val}, ints: p.ints()})
}

// poolScatter sends each element of g to the argmax of its window in src.
func (b *builder) poolScatter(src, g *node, p poolParams) *node {
	return b.add(&node{op: opPoolScatter, args: []*node{src, g}, ints: p.ints()})
}

// pool2x2 is the common 2×2 pooling with stride 2 and no padding.
var pool2x2 = poolParams{kh: 2, kw: 2, sH: 2, sW: 2}

// poolArgmax returns, for output window (or, oc) of one channel plane, the
// plane offset of its largest element (the first one on ties); padding
// never wins. fast says that p is pool2x2.
func poolArgmax[T float](plane []T, h, w, or, oc int, p poolParams, fast bool) int {
	if fast {
		// The first largest of the four, in the order of the general case
		// below, without branches (which mispredict on activations).
		i := 2*or*w + 2*oc
		q := plane[i : i+w+2]
		bi := b2i(q[1] > q[0])
		t := b2i(q[w] > q[bi])
		bi += t * (w - bi)
		t = b2i(q[w+1] > q[bi])
		bi += t * (w + 1 - bi)
		return i + bi
	}
	best, bi := T(math.Inf(-1)), -1
	for kr := 0; kr < p.kh; kr++ {
		r := or*p.sH - p.padN + kr
		if r < 0 || r >= h {
			continue
		}
		for kc := 0; kc < p.kw; kc++ {
			c := oc*p.sW - p.padW + kc
			if c < 0 || c >= w {
				continue
			}
			if v := plane[r*w+c]; bi < 0 || v > best {
				best, bi = v, r*w+c
			}
		}
	}
	return bi
}

func poolGatherInto[T float](out, src, val []T, shape []int, p poolParams) {
	h, w := shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	planes := shape[0] * shape[1]
	fast := p == pool2x2
	if fast && pool2x2AVX(out, src, val, planes, h, w, false) {
		return
	}
	o := 0
	for pl := 0; pl < planes; pl++ {
		s := src[pl*h*w : (pl+1)*h*w]
		v := val[pl*h*w : (pl+1)*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				out[o] = v[poolArgmax(s, h, w, or, oc, p, fast)]
				o++
			}
		}
	}
}

func poolScatterInto[T float](out, src, g []T, shape []int, p poolParams) {
	h, w := shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	planes := shape[0] * shape[1]
	fast := p == pool2x2
	if fast && pool2x2AVX(g, src, out, planes, h, w, true) {
		return
	}
	for i := range out {
		out[i] = 0
	}
	o := 0
	for pl := 0; pl < planes; pl++ {
		s := src[pl*h*w : (pl+1)*h*w]
		dst := out[pl*h*w : (pl+1)*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				dst[poolArgmax(s, h, w, or, oc, p, fast)] += g[o]
				o++
			}
		}
	}
}
