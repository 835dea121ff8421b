package graph

// Gemm64 and Gemm32 give the benchmarks of package graph_test the general
// product: c (m×n) = op(a)·op(b) for row-major a (m×k, or k×m with ta) and
// b (k×n, or n×k with tb), with the kernels of this processor.
func Gemm64(c, a, b []float64, m, n, k int, ta, tb bool) {
	gemm(gemmKernelF64(), c, n, m, n, k, sideA(a, m, k, ta), sideB(b, k, n, tb), false)
}

func Gemm32(c, a, b []float32, m, n, k int, ta, tb bool) {
	gemm(gemmKernelF32(), c, n, m, n, k, sideA(a, m, k, ta), sideB(b, k, n, tb), false)
}
