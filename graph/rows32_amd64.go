//go:build amd64 && !purego

package graph

//go:noescape
func max32AVX512(x *float32, n int, lanes *float32)

//go:noescape
func shift32AVX512(dst, x *float32, n int, c float32)

//go:noescape
func sum32AVX512(x *float32, n int, lanes *float64)

//go:noescape
func subLog32AVX512(dst *float32, n int, l float64)

//go:noescape
func mulSub32AVX512(out, x, e *float32, n int, s float32)

// maxLanes32 is maxLanes32Go, by AVX-512 when the processor has it.
func maxLanes32(lanes *[16]float32, x []float32) {
	if !useAVX512 {
		maxLanes32Go(lanes, x)
		return
	}
	max32AVX512(&x[0], len(x), &lanes[0])
}

// sumLanes32 is sumLanes32Go, by AVX-512 when the processor has it.
func sumLanes32(lanes *[32]float64, x []float32) {
	if !useAVX512 {
		sumLanes32Go(lanes, x)
		return
	}
	sum32AVX512(&x[0], len(x), &lanes[0])
}

// shift32 sets dst[i] = x[i] − c for i < len(x).
func shift32(dst, x []float32, c float32) {
	i := 0
	if useAVX512 && len(x) >= 16 {
		i = len(x) &^ 15
		shift32AVX512(&dst[0], &x[0], i, c)
	}
	shift32Go(dst[i:len(x)], x[i:], c)
}

// subLog32 sets dst[i] = float32(float64(dst[i]) − l) for every i.
func subLog32(dst []float32, l float64) {
	i := 0
	if useAVX512 && len(dst) >= 16 {
		i = len(dst) &^ 15
		subLog32AVX512(&dst[0], i, l)
	}
	subLog32Go(dst[i:], l)
}

// mulSub32 sets out[i] = g[i] − float32(e[i]·s) for i < len(g).
func mulSub32(out, g, e []float32, s float32) {
	i := 0
	if useAVX512 && len(g) >= 16 {
		i = len(g) &^ 15
		_, _ = out[i-1], e[i-1]
		mulSub32AVX512(&out[0], &g[0], &e[0], i, s)
	}
	mulSub32Go(out[i:len(g)], g[i:], e[i:len(g)], s)
}
