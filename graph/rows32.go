package graph

// Loops over float32 rows for the log-softmax, its adjoint and the row
// sums, sixteen (sums: thirty-two) lanes at a time on AVX-512
// (rows32_amd64.s), and in Go with the same lanes and the same operations
// elsewhere, so that a result's bits do not depend on the build or the
// processor. Go compiles the loops of reduce.go and softmax.go to scalar
// code: in float32 they were a row's time, not its memory passes.

// rowMax32 returns the maximum of x (not empty): per lane of sixteen, then
// over the lanes and the last elements, each step keeping the value held
// when it is greater (VMAXPS's rule: of two zeros, or a NaN, the new
// value).
func rowMax32(x []float32) float32 {
	n := len(x) &^ 15
	if n == 0 {
		m := x[0]
		for _, v := range x[1:] {
			m = max32Step(m, v)
		}
		return m
	}
	var lanes [16]float32
	maxLanes32(&lanes, x[:n])
	m := lanes[0]
	for _, v := range lanes[1:] {
		m = max32Step(m, v)
	}
	for _, v := range x[n:] {
		m = max32Step(m, v)
	}
	return m
}

// max32Step is one step of rowMax32: m when m > v, else v.
func max32Step(m, v float32) float32 {
	if m > v {
		return m
	}
	return v
}

// maxLanes32Go sets lanes[l] to the maximum of x[16k+l] by max32Step, k in
// order, for len(x) a positive multiple of 16.
func maxLanes32Go(lanes *[16]float32, x []float32) {
	copy(lanes[:], x[:16])
	for i := 16; i < len(x); i++ {
		lanes[i&15] = max32Step(lanes[i&15], x[i])
	}
}

// sum32 returns the sum of x in float64: thirty-two partial sums, lane l
// adding x[32k+l] in order, added pairwise at the end; fewer than 32
// terms are added in order.
func sum32(x []float32) float64 {
	var lanes [32]float64
	if len(x) < 32 {
		// Term after term, as rowSums adds float64 rows: the lanes'
		// clearing and their tree were most of the work on the short rows
		// of a softmax over a few classes.
		s := 0.0
		for _, v := range x {
			s += float64(v)
		}
		return s
	}
	n := len(x) &^ 31
	if n > 0 {
		sumLanes32(&lanes, x[:n])
	}
	for i := n; i < len(x); i++ {
		lanes[i&31] += float64(x[i])
	}
	for w := 16; w > 0; w /= 2 {
		for j := range w {
			lanes[j] += lanes[j+w]
		}
	}
	return lanes[0]
}

// sumLanes32Go adds x[32k+l] to lanes[l] in float64, k in order, for
// len(x) a multiple of 32.
func sumLanes32Go(lanes *[32]float64, x []float32) {
	for i, v := range x {
		lanes[i&31] += float64(v)
	}
}

func shift32Go(dst, x []float32, c float32) {
	for i, v := range x {
		dst[i] = v - c
	}
}

func subLog32Go(dst []float32, l float64) {
	for i, v := range dst {
		dst[i] = float32(float64(v) - l)
	}
}

func mulSub32Go(out, g, e []float32, s float32) {
	for i, v := range g {
		out[i] = v - float32(e[i]*s)
	}
}
