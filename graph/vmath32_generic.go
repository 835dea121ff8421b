//go:build !amd64 || purego

package graph

// expInto32 writes e^x[i] to dst[i] for i < len(x) ≤ len(dst), with the
// bits of the vector kernel of amd64 (expOne32).
func expInto32(dst, x []float32) { vmathLoop32(dst[:len(x)], x, expOne32) }

// logInto32 writes ln x[i] to dst[i] for i < len(x) ≤ len(dst), with the
// bits of the vector kernel of amd64 (logOne32).
func logInto32(dst, x []float32) { vmathLoop32(dst[:len(x)], x, logOne32) }

// tanhInto32 writes tanh x[i] to dst[i] for i < len(x) ≤ len(dst), with the
// bits of the vector kernel of amd64 (tanhOne32).
func tanhInto32(dst, x []float32) { vmathLoop32(dst[:len(x)], x, tanhOne32) }

// sigmoidInto32 writes 1/(1 + e^−x[i]) to dst[i] for i < len(x) ≤ len(dst),
// with the bits of the vector kernel of amd64 (sigmoidOne32).
func sigmoidInto32(dst, x []float32) { vmathLoop32(dst[:len(x)], x, sigmoidOne32) }
