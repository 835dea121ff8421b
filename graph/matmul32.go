package graph

// Products in float32 (Objective.Float32). Wide products go to gemm with
// the float32 micro-kernels (gemm_amd64.s: 8×48 with AVX-512), which
// accumulate in float32 as every float32 BLAS does. Narrow products (at
// most narrow columns or rows) are bound by memory, not by arithmetic:
// they go to the kernels of matmul.go that read their large operand in
// float32 and accumulate in float64, and the result is rounded to float32
// — more accurate than float32 sums at the same speed. Where no such
// kernel fits (without AVX-512, short inner dimensions, a narrow
// transposed product of few columns), both operands are widened and
// multiplied by matmulInto.

// matmul32 computes out = op(x)·op(y) for row-major x (xs) and y (ys), in
// float32.
func matmul32(out, x, y []float32, xs, ys []int, tx, ty bool) {
	m, k, n, sp, sj := productShape(xs, ys, tx, ty)
	switch {
	case m == 0 || n == 0:
		return
	case k == 0:
		clear(out)
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
	}
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
