//go:build amd64 && !purego

package graph

//go:noescape
func gemm8x24F64(k int, a, b, c *float64, ldc int, add bool)

//go:noescape
func gemm8x48F32(k int, a, b, c *float32, ldc int, add bool)

//go:noescape
func gemm6x8F64(k int, a, b, c *float64, ldc int, add bool)

//go:noescape
func gemm6x16F32(k int, a, b, c *float32, ldc int, add bool)

// The kernels of gemm_amd64.s with their blocking: a panel of A of kc
// terms fills a third of the first-level cache (48 KiB on Zen 4 and 5), a
// block of B about half of the second-level cache (1 MiB).
var (
	gemmF64AVX512 = gemmKernel[float64]{mr: 8, nr: 24, kc: 256, mc: 1024, nc: 240, kern: asmKernel(8, 24, gemm8x24F64)}
	gemmF32AVX512 = gemmKernel[float32]{mr: 8, nr: 48, kc: 512, mc: 1024, nc: 240, kern: asmKernel(8, 48, gemm8x48F32)}
	gemmF64AVX2   = gemmKernel[float64]{mr: 6, nr: 8, kc: 256, mc: 1020, nc: 240, kern: asmKernel(6, 8, gemm6x8F64)}
	gemmF32AVX2   = gemmKernel[float32]{mr: 6, nr: 16, kc: 512, mc: 1020, nc: 240, kern: asmKernel(6, 16, gemm6x16F32)}
)

// asmKernel returns the kernel f of mr×nr blocks behind a check of its
// operands' bounds.
func asmKernel[T float](mr, nr int, f func(k int, a, b, c *T, ldc int, add bool)) func(k int, a, b, c []T, ldc int, add bool) {
	return func(k int, a, b, c []T, ldc int, add bool) {
		_, _, _ = a[mr*k-1], b[nr*k-1], c[(mr-1)*ldc+nr-1]
		f(k, &a[0], &b[0], &c[0], ldc, add)
	}
}

// gemmKernelF64 returns the float64 kernel for the processor: AVX-512,
// AVX2 with FMA, or portable Go.
func gemmKernelF64() *gemmKernel[float64] {
	switch {
	case useAVX512:
		return &gemmF64AVX512
	case useAVX2:
		return &gemmF64AVX2
	}
	return &gemmF64Go
}

// gemmKernelF32 is gemmKernelF64 for float32.
func gemmKernelF32() *gemmKernel[float32] {
	switch {
	case useAVX512:
		return &gemmF32AVX512
	case useAVX2:
		return &gemmF32AVX2
	}
	return &gemmF32Go
}

//go:noescape
func packTermsF64(dst, src *float64, ps, kc, panels, w int)

//go:noescape
func packTermsF32F64(dst *float64, src *float32, ps, kc, panels, w int)

//go:noescape
func packTermsF32(dst, src *float32, ps, kc, panels, w int)

//go:noescape
func packRows8F64(dst, src *float64, rs, kc, w int)

//go:noescape
func packRows8F32(dst, src *float32, rs, kc, w int)

//go:noescape
func packRows8F32F64(dst *float64, src *float32, rs, kc, w int)

// packTermsFast is packTerms for panels whole panels (w a multiple of 8)
// by the routines of gemm_amd64.s: float64 panels from float64 or float32
// with AVX-512, float32 panels from float32 with AVX2. It reports whether
// it packed them.
func packTermsFast[S, T float](dst []T, x []S, ps, kc, panels, w int) bool {
	if w%8 != 0 || panels == 0 {
		return false
	}
	_, _ = dst[panels*kc*w-1], x[(kc-1)*ps+panels*w-1]
	switch d := any(dst).(type) {
	case []float64:
		if !useAVX512 {
			return false
		}
		switch x := any(x).(type) {
		case []float64:
			packTermsF64(&d[0], &x[0], ps, kc, panels, w)
		case []float32:
			packTermsF32F64(&d[0], &x[0], ps, kc, panels, w)
		}
	case []float32:
		x, ok := any(x).([]float32)
		if !useAVX2 || !ok {
			return false
		}
		packTermsF32(&d[0], &x[0], ps, kc, panels, w)
	}
	return true
}

// packRowsFast packs eight rows of x (row stride rs) into a panel of w
// rows at d (its rows r0, …, r0+7 given by d's start), the first kc&^7
// terms, by the routines of gemm_amd64.s (as packTermsFast); it returns
// the number of terms packed (0 where it cannot).
func packRowsFast[S, T float](d []T, x []S, rs, kc, w int) int {
	k8 := kc &^ 7
	if k8 == 0 {
		return 0
	}
	_, _ = d[(k8-1)*w+7], x[7*rs+k8-1]
	switch d := any(d).(type) {
	case []float64:
		if !useAVX512 {
			return 0
		}
		switch x := any(x).(type) {
		case []float64:
			packRows8F64(&d[0], &x[0], rs, k8, w)
		case []float32:
			packRows8F32F64(&d[0], &x[0], rs, k8, w)
		}
	case []float32:
		x, ok := any(x).([]float32)
		if !useAVX2 || !ok {
			return 0
		}
		packRows8F32(&d[0], &x[0], rs, k8, w)
	}
	return k8
}
