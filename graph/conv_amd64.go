//go:build amd64 && !purego

package graph

//go:noescape
func im2colRowF32(col, pad *float32, ow, ch, plane, pw, sw, kh, kw int)

//go:noescape
func im2colRowF64(col, pad *float64, ow, ch, plane, pw, sw, kh, kw int)

//go:noescape
func col2imRowF32(col, pad *float32, ow, ch, plane, pw, sw, kh, kw int)

//go:noescape
func col2imRowF64(col, pad *float64, ow, ch, plane, pw, sw, kh, kw int)

// patchRow copies the patches of an output row from pad to col, or with
// add adds col's back into pad (see patchRowGo): with the kernels of
// conv_amd64.s when the processor has AVX-512 and a kernel row fits a
// vector, else patchRowGo. The bits are the same.
func patchRow[T float](col, pad []T, base, ow, ch, plane, pw int, p convParams, add bool) {
	lanes := 16
	if _, f64 := any(col).([]float64); f64 {
		lanes = 8
	}
	if !useAVX512 || p.kw > lanes || ow == 0 || ch == 0 || p.kh == 0 || p.kw == 0 {
		patchRowGo(col, pad, base, ow, ch, plane, pw, p, add)
		return
	}
	_, _ = col[ow*ch*p.kh*p.kw-1], pad[base+(ow-1)*p.sW+(ch-1)*plane+(p.kh-1)*pw+p.kw-1]
	switch col := any(col).(type) {
	case []float32:
		pd := any(pad).([]float32)
		if add {
			col2imRowF32(&col[0], &pd[base], ow, ch, plane, pw, p.sW, p.kh, p.kw)
		} else {
			im2colRowF32(&col[0], &pd[base], ow, ch, plane, pw, p.sW, p.kh, p.kw)
		}
	case []float64:
		pd := any(pad).([]float64)
		if add {
			col2imRowF64(&col[0], &pd[base], ow, ch, plane, pw, p.sW, p.kh, p.kw)
		} else {
			im2colRowF64(&col[0], &pd[base], ow, ch, plane, pw, p.sW, p.kh, p.kw)
		}
	}
}
