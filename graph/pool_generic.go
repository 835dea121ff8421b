//go:build !amd64 || purego

package graph

// pool2x2AVX reports false: the portable build pools with poolArgmax.
func pool2x2AVX[T float](pooled, src, image []T, planes, h, w int, scatter bool) bool {
	return false
}
