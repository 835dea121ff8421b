//go:build amd64 && !purego

package graph

//go:noescape
func pool2GatherF32(pooled, src, image *float32, rows, w, n, lo, hi, om, ow int)

//go:noescape
func pool2ScatterF32(pooled, src, image *float32, rows, w, n, lo, hi, om, ow int)

//go:noescape
func pool2GatherF64(pooled, src, image *float64, rows, w, n, lo, hi, om, ow int)

//go:noescape
func pool2ScatterF64(pooled, src, image *float64, rows, w, n, lo, hi, om, ow int)

// pool2x2AVX computes 2×2 max pooling with stride 2 on planes of h×w
// (pool.go's pool2x2) with the kernels of pool_amd64.s, and reports
// whether it did (false without AVX-512). Without scatter it sets pooled
// to the elements of image at the windows' argmaxes in src
// (poolGatherInto); with scatter it sets image to the adjoint of that for
// the adjoint pooled (poolScatterInto). The bits are poolArgmax's.
func pool2x2AVX[T float](pooled, src, image []T, planes, h, w int, scatter bool) bool {
	if !useAVX512 || planes == 0 {
		return false
	}
	oh, ow := h/2, w/2
	if oh == 0 || ow == 0 {
		return false
	}
	_, _, _ = pooled[planes*oh*ow-1], src[planes*h*w-1], image[planes*h*w-1]
	if scatter && (h%2 != 0 || w%2 != 0) {
		clear(image[:planes*h*w]) // the row and column no window covers
	}
	lanes := 16
	if _, f64 := any(src).([]float64); f64 {
		lanes = 8
	}
	n, t := (ow+lanes-1)/lanes, ow-(ow-1)/lanes*lanes // vectors per output row, outputs in the last
	lo, hi, om := 1<<min(2*t, lanes)-1, 1<<max(2*t-lanes, 0)-1, 1<<t-1
	// The output rows of all planes in one call when consecutive input row
	// pairs are too (h even), else a call per plane.
	calls, rows := 1, planes*oh
	if h%2 != 0 {
		calls, rows = planes, oh
	}
	for c := range calls {
		p, s := c*oh*ow, c*h*w
		switch src := any(src).(type) {
		case []float32:
			pd, im := any(pooled).([]float32), any(image).([]float32)
			if scatter {
				pool2ScatterF32(&pd[p], &src[s], &im[s], rows, w, n, lo, hi, om, ow)
			} else {
				pool2GatherF32(&pd[p], &src[s], &im[s], rows, w, n, lo, hi, om, ow)
			}
		case []float64:
			pd, im := any(pooled).([]float64), any(image).([]float64)
			if scatter {
				pool2ScatterF64(&pd[p], &src[s], &im[s], rows, w, n, lo, hi, om, ow)
			} else {
				pool2GatherF64(&pd[p], &src[s], &im[s], rows, w, n, lo, hi, om, ow)
			}
		}
	}
	return true
}
