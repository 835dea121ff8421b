//go:build amd64 && !purego

package graph

//go:noescape
func tanhAVX512(dst, src *float64, n int)

//go:noescape
func sigmoidAVX512(dst, src *float64, n int)

// tanhInto writes tanh(x[i]) to dst[i]; dst has x's length. Groups of
// eight take the AVX-512 kernel, the rest tanhOne: the same bits.
func tanhInto(dst, x []float64) { vmathInto(dst, x, tanhAVX512, tanhLoop) }

// sigmoidInto writes 1/(1 + e^−x[i]) to dst[i]; dst has x's length, with
// the bits of sigmoidOne.
func sigmoidInto(dst, x []float64) { vmathInto(dst, x, sigmoidAVX512, sigmoidLoop) }

// vmathInto runs the kernel on the groups of eight of x when the processor
// has AVX-512, and loop on the rest.
func vmathInto(dst, x []float64, kernel func(dst, src *float64, n int), loop func(dst, x []float64)) {
	dst = dst[:len(x)]
	i := 0
	if useAVX512 && len(x) >= 8 {
		i = len(x) &^ 7
		kernel(&dst[0], &x[0], i)
	}
	loop(dst[i:], x[i:])
}
