//go:build amd64 && !purego

package graph

//go:noescape
func addRowsF64(acc *float64, x *float64, stride, rows int, mask uint64)

//go:noescape
func addRowsF32(acc *float64, x *float32, stride, rows int, mask uint64)

//go:noescape
func bnSqRowsF64(acc, m *float64, x *float64, stride, rows int, mask uint64)

//go:noescape
func bnSqRowsF32(acc, m *float64, x *float32, stride, rows int, mask uint64)

//go:noescape
func bnNormRowsF64(out, x *float64, m, k, b *float64, stride, rows int, mask uint64)

//go:noescape
func bnNormRowsF32(out, x *float32, m, k, b *float64, stride, rows int, mask uint64)

//go:noescape
func bnSumsRowsF64(sg, sgx, m, inv *float64, gr, x *float64, stride, rows int, mask uint64)

//go:noescape
func bnSumsRowsF32(sg, sgx, m, inv *float64, gr, x *float32, stride, rows int, mask uint64)

//go:noescape
func bnOutRowsF64(out, gr, x *float64, m, inv, sg, sgx, k *float64, stride, rows int, mask uint64)

//go:noescape
func bnOutRowsF32(out, gr, x *float32, m, inv, sg, sgx, k *float64, stride, rows int, mask uint64)

// rowBlock is the number of rows a kernel of batchnorm_amd64.s takes in
// one call: blocks of rows, and in each block the columns 32 at a time,
// so that a block's rows stay in cache while the kernel takes its columns
// (the kernels' sums run row after row within a column, so the blocks
// keep their order).
const rowBlock = 256

// rowBlocks calls f for each block of at most rowBlock rows and 32 columns
// of a rows×c array: its first row and column, its number of rows, and
// the mask of its columns (bit l: column j + l).
func rowBlocks(rows, c int, f func(r, j, n int, mask uint64)) {
	for r := 0; r < rows; r += rowBlock {
		n := min(rowBlock, rows-r)
		for j := 0; j < c; j += 32 {
			f(r, j, n, uint64(1)<<min(32, c-j)-1)
		}
	}
}

// addRows adds the rows of x (rows × len(acc), row-major) to acc, each
// column's terms in row order: addRowsGo, with AVX-512 when the processor
// has it (the same bits).
func addRows[T float](acc []float64, x []T, rows int) {
	c := len(acc)
	if !useAVX512 || rows == 0 || c == 0 {
		addRowsGo(acc, x, rows)
		return
	}
	_ = x[rows*c-1]
	rowBlocks(rows, c, func(r, j, n int, mask uint64) {
		switch x := any(x).(type) {
		case []float64:
			addRowsF64(&acc[j], &x[r*c+j], c, n, mask)
		case []float32:
			addRowsF32(&acc[j], &x[r*c+j], c, n, mask)
		}
	})
}

// bnSqRows adds (x − m)² to acc, row after row (x: rows × len(m)):
// bnSqRowsGo, with AVX-512 when the processor has it.
func bnSqRows[T float](acc, m []float64, x []T, rows int) {
	c := len(m)
	if !useAVX512 || rows == 0 || c == 0 {
		bnSqRowsGo(acc, m, x, rows)
		return
	}
	_, _ = x[rows*c-1], acc[c-1]
	rowBlocks(rows, c, func(r, j, n int, mask uint64) {
		switch x := any(x).(type) {
		case []float64:
			bnSqRowsF64(&acc[j], &m[j], &x[r*c+j], c, n, mask)
		case []float32:
			bnSqRowsF32(&acc[j], &m[j], &x[r*c+j], c, n, mask)
		}
	})
}

// bnNormRows sets out = (x − m)·k + b, rounded to T: bnNormRowsGo, with
// AVX-512 when the processor has it.
func bnNormRows[T float](out, x []T, m, k, b []float64, rows int) {
	c := len(m)
	if !useAVX512 || rows == 0 || c == 0 {
		bnNormRowsGo(out, x, m, k, b, rows)
		return
	}
	_, _, _, _ = out[rows*c-1], x[rows*c-1], k[c-1], b[c-1]
	rowBlocks(rows, c, func(r, j, n int, mask uint64) {
		switch x := any(x).(type) {
		case []float64:
			bnNormRowsF64(&any(out).([]float64)[r*c+j], &x[r*c+j], &m[j], &k[j], &b[j], c, n, mask)
		case []float32:
			bnNormRowsF32(&any(out).([]float32)[r*c+j], &x[r*c+j], &m[j], &k[j], &b[j], c, n, mask)
		}
	})
}

// bnSumsRows adds g to sg and g·(x − m)·inv to sgx, row after row:
// bnSumsRowsGo, with AVX-512 when the processor has it.
func bnSumsRows[T float](sg, sgx, m, inv []float64, g, x []T, rows int) {
	c := len(m)
	if !useAVX512 || rows == 0 || c == 0 {
		bnSumsRowsGo(sg, sgx, m, inv, g, x, rows)
		return
	}
	_, _, _, _, _ = g[rows*c-1], x[rows*c-1], sg[c-1], sgx[c-1], inv[c-1]
	rowBlocks(rows, c, func(r, j, n int, mask uint64) {
		switch x := any(x).(type) {
		case []float64:
			bnSumsRowsF64(&sg[j], &sgx[j], &m[j], &inv[j], &any(g).([]float64)[r*c+j], &x[r*c+j], c, n, mask)
		case []float32:
			bnSumsRowsF32(&sg[j], &sgx[j], &m[j], &inv[j], &any(g).([]float32)[r*c+j], &x[r*c+j], c, n, mask)
		}
	})
}

// bnOutRows sets out = k·((g − sg) − (x − m)·inv·sgx), rounded to T:
// bnOutRowsGo, with AVX-512 when the processor has it.
func bnOutRows[T float](out, g, x []T, m, inv, sg, sgx, k []float64, rows int) {
	c := len(m)
	if !useAVX512 || rows == 0 || c == 0 {
		bnOutRowsGo(out, g, x, m, inv, sg, sgx, k, rows)
		return
	}
	_, _, _ = out[rows*c-1], g[rows*c-1], x[rows*c-1]
	_, _, _, _ = inv[c-1], sg[c-1], sgx[c-1], k[c-1]
	rowBlocks(rows, c, func(r, j, n int, mask uint64) {
		switch x := any(x).(type) {
		case []float64:
			o, gg := any(out).([]float64), any(g).([]float64)
			bnOutRowsF64(&o[r*c+j], &gg[r*c+j], &x[r*c+j], &m[j], &inv[j], &sg[j], &sgx[j], &k[j], c, n, mask)
		case []float32:
			o, gg := any(out).([]float32), any(g).([]float32)
			bnOutRowsF32(&o[r*c+j], &gg[r*c+j], &x[r*c+j], &m[j], &inv[j], &sg[j], &sgx[j], &k[j], c, n, mask)
		}
	})
}
