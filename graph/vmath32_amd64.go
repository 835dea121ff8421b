//go:build amd64 && !purego

package graph

//go:noescape
func exp32AVX512(dst, src *float32, n int)

//go:noescape
func log32AVX512(dst, src *float32, n int)

//go:noescape
func tanh32AVX512(dst, src *float32, n int)

//go:noescape
func sigmoid32AVX512(dst, src *float32, n int)

// expInto32 writes e^x[i] to dst[i] for i < len(x) ≤ len(dst). Groups of
// sixteen take the AVX-512 kernel, the rest expOne32: the same bits.
func expInto32(dst, x []float32) { vmathInto32(dst, x, exp32AVX512, expOne32) }

// logInto32 writes ln x[i] to dst[i] for i < len(x) ≤ len(dst), with the
// bits of logOne32.
func logInto32(dst, x []float32) { vmathInto32(dst, x, log32AVX512, logOne32) }

// tanhInto32 writes tanh x[i] to dst[i] for i < len(x) ≤ len(dst), with
// the bits of tanhOne32.
func tanhInto32(dst, x []float32) { vmathInto32(dst, x, tanh32AVX512, tanhOne32) }

// sigmoidInto32 writes 1/(1 + e^−x[i]) to dst[i] for i < len(x) ≤ len(dst),
// with the bits of sigmoidOne32.
func sigmoidInto32(dst, x []float32) { vmathInto32(dst, x, sigmoid32AVX512, sigmoidOne32) }

// vmathInto32 runs the kernel on the groups of sixteen of x when the
// processor has AVX-512, and one on the rest.
func vmathInto32(dst, x []float32, kernel func(dst, src *float32, n int), one func(float32) float32) {
	dst = dst[:len(x)]
	i := 0
	if useAVX512 && len(x) >= 16 {
		i = len(x) &^ 15
		kernel(&dst[0], &x[0], i)
	}
	vmathLoop32(dst[i:], x[i:], one)
}
