//go:build !amd64 || purego

package graph

// addRows adds the rows of x (rows × len(acc), row-major) to acc, each
// column's terms in row order.
func addRows[T float](acc []float64, x []T, rows int) { addRowsGo(acc, x, rows) }

// bnSqRows adds (x − m)² to acc, row after row (x: rows × len(m)).
func bnSqRows[T float](acc, m []float64, x []T, rows int) { bnSqRowsGo(acc, m, x, rows) }

// bnNormRows sets out = (x − m)·k + b, rounded to T.
func bnNormRows[T float](out, x []T, m, k, b []float64, rows int) {
	bnNormRowsGo(out, x, m, k, b, rows)
}

// bnSumsRows adds g to sg and g·(x − m)·inv to sgx, row after row.
func bnSumsRows[T float](sg, sgx, m, inv []float64, g, x []T, rows int) {
	bnSumsRowsGo(sg, sgx, m, inv, g, x, rows)
}

// bnOutRows sets out = k·((g − sg) − (x − m)·inv·sgx), rounded to T.
func bnOutRows[T float](out, g, x []T, m, inv, sg, sgx, k []float64, rows int) {
	bnOutRowsGo(out, g, x, m, inv, sg, sgx, k, rows)
}
