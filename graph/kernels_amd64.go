//go:build amd64 && !purego

package graph

import "math"

// The AVX2/FMA kernels of kernels_amd64.s, used when the processor and the
// operating system support them (checked once, at start-up); build with the
// purego tag to use the portable kernels of kernels.go everywhere.

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

//go:noescape
func dot4AVX(x, b0, b1, b2, b3 *float64, n int) (s0, s1, s2, s3 float64)

//go:noescape
func axpy4AVX(c, x0, x1, x2, x3 *float64, a *[4]float64, n int)

//go:noescape
func expAVX(dst, src *float64, n int) int

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

// dot4 returns the dot products of x with b0, b1, b2 and b3, which have
// x's length.
func dot4(x, b0, b1, b2, b3 []float64) (s0, s1, s2, s3 float64) {
	n := len(x)
	head := 0
	if useAVX2 && n >= 8 {
		head = n &^ 7
		_, _, _, _ = b0[n-1], b1[n-1], b2[n-1], b3[n-1]
		s0, s1, s2, s3 = dot4AVX(&x[0], &b0[0], &b1[0], &b2[0], &b3[0], head)
	}
	t0, t1, t2, t3 := dot4Go(x[head:], b0[head:n], b1[head:n], b2[head:n], b3[head:n])
	return s0 + t0, s1 + t1, s2 + t2, s3 + t3
}

// axpy4 adds a[0]·x0 + a[1]·x1 + a[2]·x2 + a[3]·x3 to c; the x have c's
// length.
func axpy4(c, x0, x1, x2, x3 []float64, a *[4]float64) {
	n := len(c)
	head := 0
	if useAVX2 && n >= 4 {
		head = n &^ 3
		_, _, _, _ = x0[n-1], x1[n-1], x2[n-1], x3[n-1]
		axpy4AVX(&c[0], &x0[0], &x1[0], &x2[0], &x3[0], a, head)
	}
	axpy4Go(c[head:], x0[head:n], x1[head:n], x2[head:n], x3[head:n], a)
}

// expInto writes exp(x[i]) to dst[i]; dst has x's length. Groups of four
// in [−700, 700] take the vector kernel (within 1 ulp of math.Exp); the
// others, and the tail, math.Exp.
func expInto(dst, x []float64) {
	dst = dst[:len(x)]
	i := 0
	if useAVX2 {
		head := len(x) &^ 3
		for i < head {
			i += expAVX(&dst[i], &x[i], head-i)
			if i < head {
				for j := i; j < i+4; j++ {
					dst[j] = math.Exp(x[j])
				}
				i += 4
			}
		}
	}
	for ; i < len(x); i++ {
		dst[i] = math.Exp(x[i])
	}
}
