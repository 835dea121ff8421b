package graph

// Portable versions of the register-blocked product kernels; the assembly
// versions (kernels_amd64.s) compute the same sums with FMA.

// kw is the number of columns of a packed block of the right-hand factor.
const kw = 12

// kern4x12Go sets c[i·ldc+j] = Σ_p a[i·lda+p]·b[kw·p+j] for i < 4,
// j < kw, p < k.
func kern4x12Go(a []float64, lda int, b []float64, k int, c []float64, ldc int) {
	for i := 0; i < 4; i++ {
		ai, ci := a[i*lda:i*lda+k], c[i*ldc:i*ldc+kw]
		clear(ci)
		for p, v := range ai {
			for j, w := range b[p*kw : (p+1)*kw] {
				ci[j] += v * w
			}
		}
	}
}

// kernT4x12Go adds Σ_p a[p·lda+i]·b[kw·p+j] to c[kw·i+j] for i < 4,
// j < kw, p < k.
func kernT4x12Go(a []float64, lda int, b []float64, k int, c []float64) {
	for p := 0; p < k; p++ {
		bp := b[p*kw : (p+1)*kw]
		for i, v := range a[p*lda : p*lda+4] {
			ci := c[i*kw : (i+1)*kw]
			for j, w := range bp {
				ci[j] += v * w
			}
		}
	}
}
