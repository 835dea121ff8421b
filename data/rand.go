package data

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// Stream constants give each kind of generator its own PCG stream, so that
// the same user seed used for, say, a split and a label corruption does not
// give correlated draws.
const (
	streamSampler     = 0x5a4d_504c_4552_0001
	streamReplacement = 0x5a4d_504c_4552_0002
	streamSplit       = 0x5a4d_504c_4552_0003
	streamCorrupt     = 0x5a4d_504c_4552_0004
	streamLogistic    = 0x5a4d_504c_4552_0005
	streamSPD         = 0x5a4d_504c_4552_0006
	streamTasks       = 0x5a4d_504c_4552_0007
	streamBalanced    = 0x5a4d_504c_4552_0008
)

// rng draws from a PCG source with this package's own algorithms, so that a
// seed gives the same numbers whatever the Go release.
type rng struct {
	src *rand.PCG
}

func newRNG(seed, stream uint64) *rng {
	return &rng{src: rand.NewPCG(seed, stream)}
}

// uint64n returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method.
func (r *rng) uint64n(n uint64) uint64 {
	hi, lo := bits.Mul64(r.src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.src.Uint64(), n)
		}
	}
	return hi
}

// intn returns a uniform integer in [0, n), n > 0.
func (r *rng) intn(n int) int {
	return int(r.uint64n(uint64(n)))
}

// float64 returns a uniform number in [0, 1) with 53 random bits.
func (r *rng) float64() float64 {
	return float64(r.src.Uint64()>>11) * 0x1p-53
}

// norm returns a standard normal deviate by Marsaglia's polar method.
func (r *rng) norm() float64 {
	for {
		u := 2*r.float64() - 1
		v := 2*r.float64() - 1
		s := u*u + v*v
		if s > 0 && s < 1 {
			return u * math.Sqrt(-2*math.Log(s)/s)
		}
	}
}

// shuffle permutes p uniformly by the Fisher–Yates algorithm.
func (r *rng) shuffle(p []int) {
	for i := len(p) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}

// perm returns a uniform random permutation of 0..n-1.
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.shuffle(p)
	return p
}
