package graph

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestSumPartsBusy checks that a transposed product split into partial
// sums has the same bits when the cores are busy (the parts then run one
// after the other) as when they are spare: package meta's tasks give the
// same bits in parallel goroutines and one at a time in a dist worker.
func TestSumPartsBusy(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const m, k, n = 16, 1 << 14, 10 // k·m·n multiply-adds > parallelWork
	r := rand.New(rand.NewPCG(1, 2))
	a, b := make([]float64, k*m), make([]float64, k*n)
	for i := range a {
		a[i] = r.NormFloat64()
	}
	for i := range b {
		b[i] = r.NormFloat64()
	}
	spare, busy := make([]float64, m*n), make([]float64, m*n)
	mulNarrowT(spare, a, m, k, n, b, n, 1)
	running.Add(64) // as if 64 programs ran on the cores
	mulNarrowT(busy, a, m, k, n, b, n, 1)
	running.Add(-64)
	for i := range spare {
		if math.Float64bits(spare[i]) != math.Float64bits(busy[i]) {
			t.Fatalf("out[%d] = %v with busy cores, %v with spare ones", i, busy[i], spare[i])
		}
	}
}
