//go:build !amd64 || purego

package bench

// peakLoops returns no loop: this build has no assembly.
func peakLoops() (isa string, f64, f32 peakLoop) { return "", f64, f32 }
