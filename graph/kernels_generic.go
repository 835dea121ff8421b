//go:build !amd64 || purego

package graph

import "math"

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

// expInto writes exp(x[i]) to dst[i]; dst has x's length.
func expInto(dst, x []float64) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = math.Exp(v)
	}
}
