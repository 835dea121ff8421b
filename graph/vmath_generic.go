//go:build !amd64 || purego

package graph

// tanhInto writes tanh(x[i]) to dst[i]; dst has x's length, with the bits
// of the vector kernel of amd64 (tanhOne).
func tanhInto(dst, x []float64) { tanhLoop(dst[:len(x)], x) }

// sigmoidInto writes 1/(1 + e^−x[i]) to dst[i]; dst has x's length, with
// the bits of the vector kernel of amd64 (sigmoidOne).
func sigmoidInto(dst, x []float64) { sigmoidLoop(dst[:len(x)], x) }
