//go:build amd64 && !purego

package graph

import "testing"

// forEachISA runs f with each instruction set this processor has switched
// on in turn, the wider ones off: AVX-512, AVX2 with FMA, portable Go.
func forEachISA(t *testing.T, f func(t *testing.T, isa string)) {
	avx512, avx2 := useAVX512, useAVX2
	defer func() { useAVX512, useAVX2 = avx512, avx2 }()
	if avx512 {
		f(t, "AVX-512")
	}
	useAVX512 = false
	if avx2 {
		f(t, "AVX2")
	}
	useAVX2 = false
	f(t, "Go")
}
