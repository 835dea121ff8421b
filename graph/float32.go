package graph

import (
	"gonum.org/v1/gonum/floats"
)

// Data in float32 (Objective.Float32Data). A data array held in float32
// enters the IR as a float32 leaf (or, read by the other level, a float32
// constant). Products read it as it is: matmulMixed widens it a block of
// rows at a time into a buffer that stays in cache and multiplies the block
// with the float64 kernels, so the data stream from memory at half the
// width and nothing the size of the data is ever held in float64. Every
// other operation reads it through opWiden, a float64 copy. Arithmetic is
// float64 throughout: a float32 problem computes exactly the float64
// problem whose data are the float32-rounded values, up to the order of
// the sums in the products.
//
// Arithmetic in float32 (Objective.Float32) holds the data the same way,
// but its programs compute in float32 (schedule.go): the data leaves are
// read as they are by every operation's float32 kernel, and nothing is
// widened.

var opWiden opKind // args[0], a float32 leaf or constant, in float64

func init() {
	opWiden = define(opDef{name: "widen", arity: 1, shape: sameAsArg, constant: true,
		f64: func(n *node, _ []float64, _ [][]float64) { panic("graph: " + n.String() + " reads a float64 node") },
		f32: func(n *node, _ []float32, _ [][]float32) {
			panic("graph: " + n.String() + " in a float32 program, which reads float32 data as they are")
		},
		mixed: func(n *node, out []float64, _ [][]float64, in32 [][]float32) { widenInto(out, in32[0]) },
	})
	reject("dtConvOp", "graph/ reads float64 graphs: build the graph in float64 without ConvType, and set Objective.Float32 to compute in float32 (or Objective.Float32Data to hold only the data in float32)")
}

// widen returns a float32 node's values in float64. A product reads the
// float32 node directly (see matmul), so the widened copy is computed only
// for the other operations.
func (b *builder) widen(a *node) *node {
	if !a.f32 {
		panic("graph: widen of " + a.String() + ", which is not float32")
	}
	return b.add(&node{op: opWiden, args: []*node{a}})
}

// array is a data array, held in float64 (f64) or in float32 (f32).
type array struct {
	f64 []float64
	f32 []float32
}

// rows returns rows [lo, hi) of a, whose rows have row elements.
func (a array) rows(lo, hi, row int) array {
	if a.f32 != nil {
		return array{f32: a.f32[lo*row : hi*row]}
	}
	return array{f64: a.f64[lo*row : hi*row]}
}

// from returns a's elements from i on.
func (a array) from(i int) array {
	if a.f32 != nil {
		return array{f32: a.f32[i:]}
	}
	return array{f64: a.f64[i:]}
}

// float64s returns rows [lo, hi) of a, whose rows have row elements, in
// float64.
func (a array) float64s(lo, hi, row int) []float64 {
	if a.f32 == nil {
		return a.f64[lo*row : hi*row]
	}
	return widened(a.f32[lo*row : hi*row])
}

// widened returns src in float64.
func widened(src []float32) []float64 {
	r := make([]float64, len(src))
	widenInto(r, src)
	return r
}

// at returns element i.
func (a array) at(i int) float64 {
	if a.f32 != nil {
		return float64(a.f32[i])
	}
	return a.f64[i]
}

// make returns a new array of n elements in a's precision.
func (a array) make(n int) array {
	if a.f32 != nil {
		return array{f32: make([]float32, n)}
	}
	return array{f64: make([]float64, n)}
}

// copyFrom copies src, of the same precision, to a.
func (a array) copyFrom(src array) {
	if a.f32 != nil {
		copy(a.f32, src.f32)
		return
	}
	copy(a.f64, src.f64)
}

// dataConstant returns a data array as a constant of the IR: in float32
// when it is held in float32, read through widen unless the builder's
// nodes are computed in float32.
func (b *builder) dataConstant(shape []int, a array) *node {
	switch {
	case a.f32 != nil && b.f32:
		return b.constant32(shape, a.f32)
	case a.f32 != nil:
		return b.widen(b.constant32(shape, a.f32))
	}
	return b.constant(shape, a.f64)
}

// narrowed returns src rounded to float32.
func narrowed(src []float64) []float32 {
	dst := make([]float32, len(src))
	for i, v := range src {
		dst[i] = float32(v)
	}
	return dst
}

// narrowInto sets dst[i] = float32(src[i]) for every i < len(src).
func narrowInto(dst []float32, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(v)
	}
}

// widenInto sets dst[i] = float64(src[i]) for every i < len(src).
func widenInto(dst []float64, src []float32) {
	dst = dst[:len(src)]
	for i := widenKernel(dst, src); i < len(src); i++ {
		dst[i] = float64(src[i])
	}
}

// mixedBlock is the number of elements of a float32 operand that
// matmulMixed widens at a time: 256 KiB in float64, which stays in the
// second-level cache while the kernels go over it.
const mixedBlock = 1 << 15

// matmulMixed computes out = op(x)·op(y) as matmulInto does, with the x
// operand given in float32 by x32 when x32 is not nil (x is then nil), and
// likewise y.
func matmulMixed(out, x []float64, x32 []float32, y []float64, y32 []float32, xs, ys []int, tx, ty bool) {
	m, k, n, sp, sj := productShape(xs, ys, tx, ty)
	switch {
	case emptyProduct(out, m, n, k):
		return
	case wide(m, n) && !openBLAS:
		// gemm packs the float32 operands as float64.
		gemmMixed(out, x, x32, y, y32, m, k, n, tx, ty)
	case x32 != nil && y32 == nil && useAVX512 && n <= narrow && k > shortK && !tx:
		// The kernels of matmulInto's AVX-512 routes read float32 rows too.
		mulNarrowDot(out, array{f32: x32}, m, k, n, y, sp, sj)
	case x32 != nil && y32 == nil && useAVX512 && n <= narrow && m >= 32 && tx:
		mulNarrowT5(out, array{f32: x32}, m, k, n, y, sp, sj)
	case x32 == nil: // outᵀ = op(y)ᵀ·op(x)ᵀ, with the float32 operand first
		t := getScratch(m * n)
		matmulMixed(*t, y, y32, x, nil, ys, xs, !ty, !tx)
		transposeInto(out, *t, []int{n, m}, []int{1, 0})
		putScratch(t)
		return
	case y32 != nil || tx && ty:
		// Rare shapes (both operands data, or the data transposed on both
		// sides): one operand widened whole.
		if y32 != nil {
			w := getScratch(len(y32))
			widenInto(*w, y32)
			matmulMixed(out, x, x32, *w, nil, xs, ys, tx, ty)
			putScratch(w)
			return
		}
		w := getScratch(len(x32))
		widenInto(*w, x32)
		matmulInto(out, *w, y, xs, ys, tx, ty)
		putScratch(w)
		return
	case !tx:
		// Rows of x, a block at a time, give the same rows of out.
		rb := max(4, mixedBlock/k&^3)
		blocks := (m + rb - 1) / rb
		split(blocks, m*k*n, func(lo, hi int) {
			w := getScratch(rb * k)
			defer putScratch(w)
			for q := lo; q < hi; q++ {
				r0, r1 := q*rb, min(m, (q+1)*rb)
				widenInto((*w)[:(r1-r0)*k], x32[r0*k:r1*k])
				matmulInto(out[r0*n:r1*n], (*w)[:(r1-r0)*k], y, []int{r1 - r0, k}, ys, false, ty)
			}
		})
	default:
		// x is k×m, y k×n: out = Σ over blocks of rows p of x[p]ᵀ·y[p].
		rb := max(4, 2*mixedBlock/m)
		acc := sumParts(k, k*m*n, m*n, func(lo, hi int, acc []float64) {
			w, t := getScratch(rb*m), getScratch(m*n)
			defer putScratch(w)
			defer putScratch(t)
			for p0 := lo; p0 < hi; p0 += rb {
				pc := min(rb, hi-p0)
				widenInto((*w)[:pc*m], x32[p0*m:(p0+pc)*m])
				matmulInto(*t, (*w)[:pc*m], y[p0*n:(p0+pc)*n], []int{pc, m}, []int{pc, n}, true, false)
				floats.Add(acc, *t)
			}
		})
		copy(out, (*acc)[:m*n])
		putScratch(acc)
	}
}
