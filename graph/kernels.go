package graph

// Portable versions of the four-way kernels; the assembly versions call
// them for the tails.

func dot4Go(x, b0, b1, b2, b3 []float64) (s0, s1, s2, s3 float64) {
	b0, b1, b2, b3 = b0[:len(x)], b1[:len(x)], b2[:len(x)], b3[:len(x)]
	for i, v := range x {
		s0 += v * b0[i]
		s1 += v * b1[i]
		s2 += v * b2[i]
		s3 += v * b3[i]
	}
	return s0, s1, s2, s3
}

func axpy4Go(c, x0, x1, x2, x3 []float64, a *[4]float64) {
	x0, x1, x2, x3 = x0[:len(c)], x1[:len(c)], x2[:len(c)], x3[:len(c)]
	for i := range c {
		c[i] += a[0]*x0[i] + a[1]*x1[i] + a[2]*x2[i] + a[3]*x3[i]
	}
}
