//go:build !amd64 || purego

package graph

import "testing"

// forEachISA runs f with the portable kernels, the only ones of this build.
func forEachISA(t *testing.T, f func(t *testing.T, isa string)) { f(t, "Go") }
