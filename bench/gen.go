// Package bench measures bilevel's oracles and hypergradients against a
// PyTorch reference on the same data (issue 7). The data come from a
// counter-based generator that bench/torch_ref.py implements identically
// with numpy, so both sides see bit-identical float64 inputs without any
// file exchange; BenchmarkRows times the rows, bench/cmd/benchrun runs both
// sides and prints the comparison table (see docs/benchmarks.md).
package bench

import "math"

// Seed is the seed of every array the benchmarks use.
const Seed = 20261122

// Alpha is the inner step size of the ITD rows (y ← y − α∇y g).
const Alpha = 0.5

const (
	gamma  = 0x9E3779B97F4A7C15 // Weyl increment of splitmix64
	stream = 0xD1B54A32D192ED03 // multiplier separating streams
)

// mix64 is splitmix64's finalizer.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Uniforms returns n uniforms in [0, 1) of stream s:
//
//	key = mix64(Seed ⊕ s·0xD1B54A32D192ED03),
//	u_i = (mix64(key + (i+1)·0x9E3779B97F4A7C15) >> 11) · 2⁻⁵³,  i = 0, …, n−1,
//
// with wrapping uint64 arithmetic. Every step is exact, so numpy gets the
// same bits (torch_ref.py, uniforms).
func Uniforms(s uint64, n int) []float64 {
	key := mix64(Seed ^ s*stream)
	u := make([]float64, n)
	for i := range u {
		u[i] = float64(mix64(key+uint64(i+1)*gamma)>>11) * 0x1p-53
	}
	return u
}

// Symmetric returns n values a·(2u−1) of stream s; with a = √3 they have
// mean 0 and variance 1.
func Symmetric(s uint64, n int, a float64) []float64 {
	u := Uniforms(s, n)
	for i, v := range u {
		u[i] = float64(2*v-1) * a
	}
	return u
}

// Labels returns n labels ⌊u·c⌋ in [0, c) of stream s.
func Labels(s uint64, n, c int) []int {
	u := Uniforms(s, n)
	l := make([]int, n)
	for i, v := range u {
		l[i] = min(int(math.Floor(v*float64(c))), c-1)
	}
	return l
}
