package graph

// Products in float32 (Objective.Float32). Wide products go to gemm with
// the float32 micro-kernels (gemm_amd64.s: 8×48 with AVX-512), which
// accumulate in float32 as every float32 BLAS does. So do narrow products
// of at least gemmColumns32 columns, as the transposed product: the
// result's few columns along the kernel's rows, its many rows along the
// kernel's columns (the convolutions of a CNN, 16 or 32 filters: 1.5 to
// 4 times faster than the narrow kernels, BenchmarkMatmul32Routes).
// Narrower products (logistic regression's classes) are bound by memory,
// not by arithmetic: they go to the kernels of matmul.go that read their
// large operand in float32 and accumulate in float64, and the result is
// rounded to float32 — more accurate than float32 sums at the same speed.
// Where no such kernel fits (without AVX-512, short inner dimensions, a
// narrow transposed product of few columns), both operands are widened
// and multiplied by matmulInto.

// gemmColumns32 is the narrowest float32 product that goes to gemm.
const gemmColumns32 = 16

// matmul32 computes out = op(x)·op(y) for row-major x (xs) and y (ys), in
// float32.
func matmul32(out, x, y []float32, xs, ys []int, tx, ty bool) {
	m, k, n, _, _ := productShape(xs, ys, tx, ty)
	switch {
	case emptyProduct(out, m, n, k):
		return
	case wide(m, n):
		gemm(gemmKernelF32(), out, n, m, n, k, sideA(x, m, k, tx), sideB(y, k, n, ty), false)
		return
	case n > narrow:
		// A narrow result transposed: outᵀ = op(y)ᵀ·op(x)ᵀ.
		t := getBuf[float32](n * m)
		matmul32(*t, y, x, ys, xs, !ty, !tx)
		transposeInto(out, *t, []int{n, m}, []int{1, 0})
		putBuf(t)
		return
	case n >= gemmColumns32:
		gemmNarrow32(out, x, y, m, k, n, tx, ty)
		return
	}
	mulNarrow32(out, x, y, xs, ys, tx, ty)
}

// gemmNarrow32 computes out (m×n) = op(x)·op(y), n at most narrow, by gemm
// on the transposed product outᵀ = op(y)ᵀ·op(x)ᵀ.
func gemmNarrow32(out, x, y []float32, m, k, n int, tx, ty bool) {
	t := getBuf[float32](n * m)
	gemm(gemmKernelF32(), *t, m, n, m, k, sideA(y, n, k, !ty), sideB(x, k, m, !tx), false)
	transposeInto(out, *t, []int{n, m}, []int{1, 0})
	putBuf(t)
}

// mulNarrow32 computes out = op(x)·op(y), at most narrow columns, by the
// narrow kernels with float64 sums.
func mulNarrow32(out, x, y []float32, xs, ys []int, tx, ty bool) {
	m, k, n, sp, sj := productShape(xs, ys, tx, ty)
	o, b := getScratch(m*n), getScratch(len(y))
	defer putScratch(o)
	defer putScratch(b)
	widenInto(*b, y)
	switch {
	case useAVX512 && !tx && k > shortK:
		mulNarrowDot(*o, array{f32: x}, m, k, n, *b, sp, sj)
	case useAVX512 && tx && m >= 32:
		mulNarrowT5(*o, array{f32: x}, m, k, n, *b, sp, sj)
	default:
		a := getScratch(len(x))
		defer putScratch(a)
		widenInto(*a, x)
		matmulInto(*o, *a, *b, xs, ys, tx, ty)
	}
	narrowInto(out, *o)
}
