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

// kernDot4x5Go sets c[i·ldc+j] = Σ_p a[i·lda+p]·bt[j·ldb+p] for i < 4,
// j < 5, p < k.
func kernDot4x5Go(a []float64, lda int, bt []float64, ldb, k int, c []float64, ldc int) {
	for i := 0; i < 4; i++ {
		ai := a[i*lda : i*lda+k]
		for j := 0; j < 5; j++ {
			s := 0.0
			for p, v := range bt[j*ldb : j*ldb+k] {
				s += ai[p] * v
			}
			c[i*ldc+j] = s
		}
	}
}

// kernTx5Go adds Σ_p a[p·lda+i]·b[5p+j] to c[j·ldc+i] for i < cols,
// j < 5, p < k.
func kernTx5Go(cols int, a []float64, lda int, b []float64, k int, c []float64, ldc int) {
	for p := 0; p < k; p++ {
		ap := a[p*lda : p*lda+cols]
		for j, w := range b[5*p : 5*p+5] {
			cj := c[j*ldc : j*ldc+cols]
			for i, v := range ap {
				cj[i] += v * w
			}
		}
	}
}
