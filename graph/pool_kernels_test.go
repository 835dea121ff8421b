package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPool2x2Kernels checks 2×2 max pooling's kernels (poolGatherInto and
// poolScatterInto with pool2x2: AVX-512 where the processor has it)
// against the portable loops (useAVX512 off), bit for bit in both
// precisions, on planes of even and odd sizes whose output rows take
// whole and partial vectors, with ties, signed zeros and NaNs among the
// values (the first largest wins, NaN never wins over an earlier
// element, and the adjoint at the argmax is 0 + g).
func TestPool2x2Kernels(t *testing.T) {
	t.Logf("AVX-512: %v", useAVX512)
	for _, hw := range [][2]int{{2, 2}, {3, 5}, {4, 4}, {6, 14}, {28, 28}, {7, 33}, {14, 34}, {5, 64}, {2, 65}} {
		for _, planes := range []int{1, 3} {
			name := fmt.Sprintf("%dx%dx%d", planes, hw[0], hw[1])
			t.Run("f64/"+name, func(t *testing.T) { checkPool2x2[float64](t, planes, hw[0], hw[1]) })
			t.Run("f32/"+name, func(t *testing.T) { checkPool2x2[float32](t, planes, hw[0], hw[1]) })
		}
	}
}

func checkPool2x2[T float](t *testing.T, planes, h, w int) {
	rng := rand.New(rand.NewPCG(uint64(h), uint64(w*planes)))
	special := []float64{math.NaN(), 0, math.Copysign(0, -1), 1, math.Inf(-1)}
	values := func(n int) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(rng.NormFloat64())
			if rng.IntN(3) == 0 {
				x[i] = T(special[rng.IntN(len(special))])
			}
		}
		return x
	}
	shape := []int{1, planes, h, w}
	oh, ow := h/2, w/2
	src, val, g := values(planes*h*w), values(planes*h*w), values(planes*oh*ow)
	run := func(avx bool) (pooled, adj []T) {
		saved := useAVX512
		useAVX512 = avx && saved
		defer func() { useAVX512 = saved }()
		pooled, adj = make([]T, len(g)+1), make([]T, len(src)+1)
		pooled[len(g)], adj[len(src)] = 7, 7
		for i := range adj[:len(src)] {
			adj[i] = 5 // to be overwritten
		}
		poolGatherInto(pooled[:len(g)], src, val, shape, pool2x2)
		poolScatterInto(adj[:len(src)], src, g, shape, pool2x2)
		return pooled, adj
	}
	got, gotAdj := run(true)
	want, wantAdj := run(false)
	requireBits(t, "gather", got, want)
	requireBits(t, "scatter", gotAdj, wantAdj)
}
