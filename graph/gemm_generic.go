//go:build !amd64 || purego

package graph

// gemmKernelF64 returns the portable float64 kernel.
func gemmKernelF64() *gemmKernel[float64] { return &gemmF64Go }

// gemmKernelF32 returns the portable float32 kernel.
func gemmKernelF32() *gemmKernel[float32] { return &gemmF32Go }

// packTermsFast packs nothing: there are no routines in this build.
func packTermsFast[S, T float](dst []T, x []S, ps, kc, panels, w int) bool { return false }

// packRowsFast packs nothing.
func packRowsFast[S, T float](d []T, x []S, rs, kc, w int) int { return 0 }
