//go:build !amd64 || purego

package graph

// useAVX512 is false: the AVX-512 kernels are for amd64 only. (A variable,
// as on amd64, where the tests switch it off.)
var useAVX512 = false

// widenKernel converts nothing: widenInto's loop does it all.
func widenKernel(dst []float64, src []float32) int { return 0 }

// kernDot4x5 sets c[i·ldc+j] = Σ_p a[i·lda+p]·bt[j·ldb+p] for i < 4,
// j < 5, p < k.
func kernDot4x5(a array, lda int, bt []float64, ldb, k int, c []float64, ldc int) {
	if a.f32 != nil {
		kernDot4x5Go(a.f32, lda, bt, ldb, k, c, ldc)
		return
	}
	kernDot4x5Go(a.f64, lda, bt, ldb, k, c, ldc)
}

// kernT16x10 adds Σ_p a[p·lda+i]·b[10p+j] to c[j·ldc+i] for i < cols ≤ 16,
// j < 10, p < k.
func kernT16x10(cols int, a array, lda int, b []float64, k int, c []float64, ldc int) {
	if a.f32 != nil {
		kernTGo(10, cols, a.f32, lda, b, k, c, ldc)
		return
	}
	kernTGo(10, cols, a.f64, lda, b, k, c, ldc)
}

// kernT32x5 adds Σ_p a[p·lda+i]·b[5p+j] to c[j·ldc+i] for i < 32, j < 5,
// p < k.
func kernT32x5(a array, lda int, b []float64, k int, c []float64, ldc int) {
	kernTx5(32, a, lda, b, k, c, ldc)
}

// kernTx5 adds Σ_p a[p·lda+i]·b[5p+j] to c[j·ldc+i] for i < cols ≤ 8,
// j < 5, p < k.
func kernTx5(cols int, a array, lda int, b []float64, k int, c []float64, ldc int) {
	if a.f32 != nil {
		kernTGo(5, cols, a.f32, lda, b, k, c, ldc)
		return
	}
	kernTGo(5, cols, a.f64, lda, b, k, c, ldc)
}

// kern4x12 sets c[i·ldc+j] = Σ_p a[i·lda+p]·b[kw·p+j] for i < 4, j < kw,
// p < k: four rows of a times a packed block of b.
func kern4x12(a []float64, lda int, b []float64, k int, c []float64, ldc int) {
	kern4x12Go(a, lda, b, k, c, ldc)
}

// kernT4x12 adds Σ_p a[p·lda+i]·b[kw·p+j] to c[kw·i+j] for i < 4, j < kw,
// p < k: four columns of a, transposed, times a packed block of b.
func kernT4x12(a []float64, lda int, b []float64, k int, c []float64) {
	kernT4x12Go(a, lda, b, k, c)
}

// expInto writes exp(x[i]) to dst[i]; dst has x's length, with the bits of
// the vector kernels of amd64 (expOne).
func expInto(dst, x []float64) { expIntoWith(dst, x, false) }

// expIntoWith is expInto (there is no AVX-512 kernel here).
func expIntoWith(dst, x []float64, _ bool) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = expOne(v)
	}
}

// logInto writes log(x[i]) to dst[i]; dst has x's length, with the bits of
// the vector kernel of amd64 (logOne).
func logInto(dst, x []float64) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = logOne(v)
	}
}

// Kernels names the kernels this process runs: "portable" in this build
// (see kernels_amd64.go for the others).
func Kernels() string { return "portable" }
