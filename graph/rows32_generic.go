//go:build !amd64 || purego

package graph

// The portable build computes rows32.go's loops in Go, with the bits of
// the vector kernels of amd64.

func maxLanes32(lanes *[16]float32, x []float32) { maxLanes32Go(lanes, x) }

func sumLanes32(lanes *[32]float64, x []float32) { sumLanes32Go(lanes, x) }

// shift32 sets dst[i] = x[i] − c for i < len(x).
func shift32(dst, x []float32, c float32) { shift32Go(dst[:len(x)], x, c) }

// subLog32 sets dst[i] = float32(float64(dst[i]) − l) for every i.
func subLog32(dst []float32, l float64) { subLog32Go(dst, l) }

// mulSub32 sets out[i] = g[i] − float32(e[i]·s) for i < len(g).
func mulSub32(out, g, e []float32, s float32) { mulSub32Go(out[:len(g)], g, e[:len(g)], s) }
