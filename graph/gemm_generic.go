//go:build !amd64 || purego

package graph

// gemmKernelF64 returns the portable float64 kernel.
func gemmKernelF64() *gemmKernel[float64] { return &gemmF64Go }

// gemmKernelF32 returns the portable float32 kernel.
func gemmKernelF32() *gemmKernel[float32] { return &gemmF32Go }
