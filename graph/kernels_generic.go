//go:build !amd64 || purego

package graph

import "math"

// dot4 returns the dot products of x with b0, b1, b2 and b3, which have
// x's length.
func dot4(x, b0, b1, b2, b3 []float64) (s0, s1, s2, s3 float64) {
	return dot4Go(x, b0, b1, b2, b3)
}

// axpy4 adds a[0]·x0 + a[1]·x1 + a[2]·x2 + a[3]·x3 to c; the x have c's
// length.
func axpy4(c, x0, x1, x2, x3 []float64, a *[4]float64) {
	axpy4Go(c, x0, x1, x2, x3, a)
}

// expInto writes exp(x[i]) to dst[i]; dst has x's length.
func expInto(dst, x []float64) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = math.Exp(v)
	}
}
