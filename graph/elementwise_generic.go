//go:build !amd64 || purego

package graph

// elemVec reports false: the portable build has no vector kernels for
// elementwise arithmetic (elementwise_amd64.s), and evalSame's loops
// compute what they would.
func elemVec[T float](op opKind, kind int, out, x, y []T) bool { return false }

// elemNum reports false, as elemVec.
func elemNum[T float](op opKind, kind int, out, x []T, c T) bool { return false }
