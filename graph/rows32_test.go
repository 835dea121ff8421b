package graph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRows32 checks the float32 row loops of rows32.go — the kernels of
// this processor (AVX-512 when it has it) — against their definitions
// computed here element by element, bit for bit, on lengths around the
// lanes' multiples and on rows holding zeros of both signs, infinities and
// NaN, and on magnitudes from 2⁻⁴⁰ to 2⁴⁰ (float64 sums of float32 values
// of one magnitude are exact in any order): the maximum (VMAXPS's rule),
// the shift, the float64 sums (lane l adding x[32k+l], then pairwise; and
// within 1e-14·Σ|x| of the float64 sum term after term), the subtraction of a float64 and the rounded
// product subtracted; with and without AVX-512.
func TestRows32(t *testing.T) { withoutAVX512Too(func() { testRows32(t) }) }

func testRows32(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, n := range []int{1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 100, 1000, 1031} {
		for trial := range 4 {
			x, e := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], e[i] = float32(rng.NormFloat64()*10), float32(rng.Float64())
			}
			if trial == 1 { // ties of zeros of both signs at the maximum
				for i := range x {
					x[i] = -float32(rng.Float64())
				}
				x[rng.IntN(n)], x[rng.IntN(n)] = special[0], special[1]
			}
			if trial == 2 {
				x[rng.IntN(n)] = special[2+rng.IntN(3)]
			}
			if trial == 3 { // magnitudes from 2⁻⁴⁰ to 2⁴⁰: sums whose order shows
				for i := range x {
					x[i] = float32(math.Ldexp(rng.NormFloat64(), rng.IntN(81)-40))
				}
			}
			// The maximum: lane by lane, then over the lanes and the tail.
			var want float32
			if k := n &^ 15; k == 0 {
				want = x[0]
				for _, v := range x[1:] {
					want = max32Step(want, v)
				}
			} else {
				var lanes [16]float32
				copy(lanes[:], x)
				for i := 16; i < k; i++ {
					lanes[i%16] = max32Step(lanes[i%16], x[i])
				}
				want = lanes[0]
				for _, v := range append(lanes[1:], x[k:]...) {
					want = max32Step(want, v)
				}
			}
			if got := rowMax32(x); !same(got, want) {
				t.Errorf("n = %d, trial %d: rowMax32 = %v, want %v", n, trial, got, want)
			}
			// The sum in thirty-two lanes (fewer terms: in order).
			var lanes [32]float64
			plain, abs := 0.0, 0.0
			for i, v := range x {
				lanes[i%32] += float64(v)
				plain += float64(v)
				abs += math.Abs(float64(v))
			}
			for w := 16; w > 0; w /= 2 {
				for j := range w {
					lanes[j] += lanes[j+w]
				}
			}
			if n < 32 {
				lanes[0] = plain
			}
			if got := sum32(x); math.Float64bits(got) != math.Float64bits(lanes[0]) && !(math.IsNaN(got) && math.IsNaN(lanes[0])) {
				t.Errorf("n = %d, trial %d: sum32 = %v, want %v", n, trial, got, lanes[0])
			} else if trial != 2 && !(math.Abs(got-plain) <= 1e-14*abs) {
				t.Errorf("n = %d: sum32 = %v, the sum term after term %v", n, got, plain)
			}
			// Shift, subtraction of a float64, product subtracted.
			c, l := x[0], rng.NormFloat64()
			dst, out := make([]float32, n+1), make([]float32, n+1)
			dst[n], out[n] = 7, 7
			shift32(dst, x, c)
			mulSub32(out, x, e, c)
			sub := append([]float32{}, x...)
			subLog32(sub, l)
			for i, v := range x {
				if !same(dst[i], v-c) || !same(out[i], v-float32(e[i]*c)) || !same(sub[i], float32(float64(v)-l)) {
					t.Fatalf("n = %d, trial %d, element %d: shift %v, product subtracted %v, log subtracted %v; want %v, %v, %v",
						n, trial, i, dst[i], out[i], sub[i], v-c, v-float32(e[i]*c), float32(float64(v)-l))
				}
			}
			if dst[n] != 7 || out[n] != 7 {
				t.Fatalf("n = %d: a loop wrote past its length", n)
			}
		}
	}
}
