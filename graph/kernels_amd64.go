//go:build amd64 && !purego

package graph

// The AVX2/FMA kernels of kernels_amd64.s, used when the processor and the
// operating system support them (checked once, at start-up); build with the
// purego tag to use the portable kernels of kernels.go everywhere.

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

//go:noescape
func kern4x12AVX(a *float64, lda int, b *float64, k int, c *float64, ldc int)

//go:noescape
func kernT4x12AVX(a *float64, lda int, b *float64, k int, c *float64)

//go:noescape
func kernDot4x5AVX512(a *float64, lda int, bt *float64, ldb int, k int, c *float64, ldc int, tail int)

//go:noescape
func kernT32x5AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int)

//go:noescape
func kernT8x5AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int, mask int)

//go:noescape
func kernDot4x5F32AVX512(a *float32, lda int, bt *float64, ldb int, k int, c *float64, ldc int, tail int)

//go:noescape
func kernT32x5F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int)

//go:noescape
func kernT8x5F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int, mask int)

//go:noescape
func kernT16x10AVX512(a *float64, lda int, b *float64, k int, c *float64, ldc int, mask int)

//go:noescape
func kernT16x10F32AVX512(a *float32, lda int, b *float64, k int, c *float64, ldc int, mask int)

//go:noescape
func expAVX(dst, src *float64, n int) int

//go:noescape
func widenAVX(dst *float64, src *float32, n int) int

//go:noescape
func expAVX512(dst, src *float64, n int) int

//go:noescape
func logAVX512(dst, src *float64, n int) int

var useAVX2 = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&fma == 0 || ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0 // AVX2
}()

// useAVX512 reports whether the processor has AVX-512 (foundation) and the
// operating system saves its registers (opmask and all 512 bits of the 32
// vector registers).
var useAVX512 = useAVX2 && func() bool {
	_, ebx7, _, _ := cpuid(7, 0)
	if ebx7&(1<<16) == 0 {
		return false
	}
	xcr0, _ := xgetbv()
	return xcr0&0xe6 == 0xe6
}()

// kernDot4x5 sets c[i·ldc+j] = Σ_p a[i·lda+p]·bt[j·ldb+p] for i < 4,
// j < 5, p < k: four rows of a dotted with five rows of bt. It needs
// AVX-512.
func kernDot4x5(a array, lda int, bt []float64, ldb, k int, c []float64, ldc int) {
	switch {
	case k == 0:
		for i := 0; i < 4; i++ {
			clear(c[i*ldc : i*ldc+5])
		}
	case a.f32 != nil:
		_, _, _ = a.f32[3*lda+k-1], bt[4*ldb+k-1], c[3*ldc+4]
		kernDot4x5F32AVX512(&a.f32[0], lda, &bt[0], ldb, k&^7, &c[0], ldc, 1<<(k&7)-1)
	default:
		_, _, _ = a.f64[3*lda+k-1], bt[4*ldb+k-1], c[3*ldc+4]
		kernDot4x5AVX512(&a.f64[0], lda, &bt[0], ldb, k&^7, &c[0], ldc, 1<<(k&7)-1)
	}
}

// kernT16x10 adds Σ_p a[p·lda+i]·b[10p+j] to c[j·ldc+i] for i < cols ≤ 16,
// j < 10, p < k: sixteen columns of a, transposed, times a packed block of
// ten columns. It needs AVX-512.
func kernT16x10(cols int, a array, lda int, b []float64, k int, c []float64, ldc int) {
	if k == 0 || cols == 0 {
		return
	}
	_, _ = b[10*k-1], c[9*ldc+cols-1]
	if a.f32 != nil {
		_ = a.f32[(k-1)*lda+cols-1]
		kernT16x10F32AVX512(&a.f32[0], lda, &b[0], k, &c[0], ldc, 1<<cols-1)
		return
	}
	_ = a.f64[(k-1)*lda+cols-1]
	kernT16x10AVX512(&a.f64[0], lda, &b[0], k, &c[0], ldc, 1<<cols-1)
}

// widenKernel sets dst[i] = float64(src[i]) for a prefix of src (of
// len(dst) elements) and returns its length.
func widenKernel(dst []float64, src []float32) int {
	if !useAVX2 || len(src) < 16 {
		return 0
	}
	_ = dst[len(src)-1]
	return widenAVX(&dst[0], &src[0], len(src))
}

// kernT32x5 adds Σ_p a[p·lda+i]·b[5p+j] to c[j·ldc+i] for i < 32, j < 5,
// p < k. It needs AVX-512.
func kernT32x5(a array, lda int, b []float64, k int, c []float64, ldc int) {
	switch {
	case k == 0:
	case a.f32 != nil:
		_, _, _ = a.f32[(k-1)*lda+31], b[5*k-1], c[4*ldc+31]
		kernT32x5F32AVX512(&a.f32[0], lda, &b[0], k, &c[0], ldc)
	default:
		_, _, _ = a.f64[(k-1)*lda+31], b[5*k-1], c[4*ldc+31]
		kernT32x5AVX512(&a.f64[0], lda, &b[0], k, &c[0], ldc)
	}
}

// kernTx5 adds Σ_p a[p·lda+i]·b[5p+j] to c[j·ldc+i] for i < cols ≤ 8,
// j < 5, p < k. It needs AVX-512.
func kernTx5(cols int, a array, lda int, b []float64, k int, c []float64, ldc int) {
	switch {
	case k == 0 || cols == 0:
	case a.f32 != nil:
		_, _, _ = a.f32[(k-1)*lda+cols-1], b[5*k-1], c[4*ldc+cols-1]
		kernT8x5F32AVX512(&a.f32[0], lda, &b[0], k, &c[0], ldc, 1<<cols-1)
	default:
		_, _, _ = a.f64[(k-1)*lda+cols-1], b[5*k-1], c[4*ldc+cols-1]
		kernT8x5AVX512(&a.f64[0], lda, &b[0], k, &c[0], ldc, 1<<cols-1)
	}
}

// kern4x12 sets c[i·ldc+j] = Σ_p a[i·lda+p]·b[kw·p+j] for i < 4, j < kw,
// p < k: four rows of a times a packed block of b.
func kern4x12(a []float64, lda int, b []float64, k int, c []float64, ldc int) {
	if !useAVX2 || k == 0 {
		kern4x12Go(a, lda, b, k, c, ldc)
		return
	}
	_, _, _ = a[3*lda+k-1], b[kw*k-1], c[3*ldc+kw-1]
	kern4x12AVX(&a[0], lda, &b[0], k, &c[0], ldc)
}

// kernT4x12 adds Σ_p a[p·lda+i]·b[kw·p+j] to c[kw·i+j] for i < 4, j < kw,
// p < k: four columns of a, transposed, times a packed block of b.
func kernT4x12(a []float64, lda int, b []float64, k int, c []float64) {
	if !useAVX2 || k == 0 {
		kernT4x12Go(a, lda, b, k, c)
		return
	}
	_, _, _ = a[(k-1)*lda+3], b[kw*k-1], c[4*kw-1]
	kernT4x12AVX(&a[0], lda, &b[0], k, &c[0])
}

// expInto writes exp(x[i]) to dst[i]; dst has x's length. Groups of eight
// (AVX-512) or four (AVX2) in [−700, 700] take the vector kernels (within
// 2 ulp of math.Exp), the rest expOne: every element gets the same bits
// wherever it lies in x.
func expInto(dst, x []float64) { expIntoWith(dst, x, useAVX512) }

// expIntoWith is expInto with the AVX-512 kernel or without it.
func expIntoWith(dst, x []float64, avx512 bool) {
	dst = dst[:len(x)]
	i := 0
	if avx512 && len(x) >= 8 {
		// Up to the first group of eight with an element outside the
		// fast range; from there on, by fours.
		i = expAVX512(&dst[0], &x[0], len(x)&^7)
	}
	if useAVX2 {
		head := len(x) &^ 3
		for i < head {
			i += expAVX(&dst[i], &x[i], head-i)
			if i < head {
				for j := i; j < i+4; j++ {
					dst[j] = expOne(x[j])
				}
				i += 4
			}
		}
	}
	for ; i < len(x); i++ {
		dst[i] = expOne(x[i])
	}
}

// logInto writes log(x[i]) to dst[i]; dst has x's length. Groups of eight
// positive normal numbers take the AVX-512 kernel (within 1 ulp of
// math.Log), the rest logOne: every element gets the same bits wherever it
// lies in x.
func logInto(dst, x []float64) {
	dst = dst[:len(x)]
	i := 0
	if useAVX512 {
		head := len(x) &^ 7
		for i < head {
			i += logAVX512(&dst[i], &x[i], head-i)
			if i < head {
				for j := i; j < i+8; j++ {
					dst[j] = logOne(x[j])
				}
				i += 8
			}
		}
	}
	for ; i < len(x); i++ {
		dst[i] = logOne(x[i])
	}
}

// Kernels names the kernels this process runs: "avx512", "avx2" or
// "portable". Results agree across them to rounding, not bit for bit: the
// vector kernels fuse multiply-adds and sum in their own orders.
func Kernels() string {
	switch {
	case useAVX512:
		return "avx512"
	case useAVX2:
		return "avx2"
	}
	return "portable"
}
