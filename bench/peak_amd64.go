//go:build amd64 && !purego

package bench

func peakCPUID(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func peakXGETBV() uint32

func peakFMA512PD(n int)
func peakFMA512PS(n int)
func peakFMA256PD(n int)
func peakFMA256PS(n int)

// peakLoops returns the loops of the widest vector unit the processor and
// the operating system support: AVX-512 (48 multiply-adds of 8 float64 or
// 16 float32 lanes a round), else AVX2 with FMA (48 of 4 or 8 lanes).
func peakLoops() (isa string, f64, f32 peakLoop) {
	if max7, _, _, _ := peakCPUID(0, 0); max7 < 7 {
		return "", f64, f32
	}
	_, _, ecx1, _ := peakCPUID(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx || peakXGETBV()&6 != 6 {
		return "", f64, f32
	}
	_, ebx7, _, _ := peakCPUID(7, 0)
	switch {
	case ebx7&(1<<16) != 0 && peakXGETBV()&0xe6 == 0xe6:
		return "AVX-512", peakLoop{peakFMA512PD, 48 * 8 * 2}, peakLoop{peakFMA512PS, 48 * 16 * 2}
	case ebx7&(1<<5) != 0:
		return "AVX2", peakLoop{peakFMA256PD, 48 * 4 * 2}, peakLoop{peakFMA256PS, 48 * 8 * 2}
	}
	return "", f64, f32
}
