package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestBatchNormRowKernels checks the passes of batch normalization
// (addRows, bnSqRows, bnNormRows, bnSumsRows, bnOutRows: AVX-512 kernels
// where the processor has them) against their portable loops, bit for
// bit in both precisions, on column counts around the kernels' 8 and 32
// and row counts around their blocks of rowBlock rows, with output
// buffers one element longer than the array to catch a write past it.
func TestBatchNormRowKernels(t *testing.T) {
	t.Logf("AVX-512: %v", useAVX512)
	for _, c := range []int{1, 3, 8, 9, 17, 31, 32, 33, 40, 64, 71} {
		for _, rows := range []int{0, 1, 5, 255, 256, 515} { // around rowBlock (256) on amd64
			name := fmt.Sprintf("%dx%d", rows, c)
			t.Run("f64/"+name, func(t *testing.T) { checkBNRows[float64](t, rows, c) })
			t.Run("f32/"+name, func(t *testing.T) { checkBNRows[float32](t, rows, c) })
		}
	}
}

func checkBNRows[T float](t *testing.T, rows, c int) {
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(c)))
	data := func(n int, off float64) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(off + rng.NormFloat64())
		}
		return x
	}
	vec := func(off float64) []float64 {
		v := make([]float64, c)
		for i := range v {
			v[i] = off + rng.NormFloat64()
		}
		return v
	}
	x, g := data(rows*c, 3), data(rows*c, 0)
	m, k, b, inv, sg0, sgx0 := vec(3), vec(0), vec(0), vec(2), vec(0), vec(0)
	acc, want := append([]float64{}, sg0...), append([]float64{}, sg0...)
	addRows(acc, x, rows)
	addRowsGo(want, x, rows)
	requireBits(t, "addRows", acc, want)

	acc, want = append([]float64{}, sg0...), append([]float64{}, sg0...)
	bnSqRows(acc, m, x, rows)
	bnSqRowsGo(want, m, x, rows)
	requireBits(t, "bnSqRows", acc, want)

	out, wantOut := make([]T, rows*c+1), make([]T, rows*c+1)
	out[rows*c], wantOut[rows*c] = 7, 7
	bnNormRows(out[:rows*c], x, m, k, b, rows)
	bnNormRowsGo(wantOut[:rows*c], x, m, k, b, rows)
	requireBits(t, "bnNormRows", out, wantOut)

	sg, sgx := append([]float64{}, sg0...), append([]float64{}, sgx0...)
	wsg, wsgx := append([]float64{}, sg0...), append([]float64{}, sgx0...)
	bnSumsRows(sg, sgx, m, inv, g, x, rows)
	bnSumsRowsGo(wsg, wsgx, m, inv, g, x, rows)
	requireBits(t, "bnSumsRows sg", sg, wsg)
	requireBits(t, "bnSumsRows sgx", sgx, wsgx)

	bnOutRows(out[:rows*c], g, x, m, inv, sg0, sgx0, k, rows)
	bnOutRowsGo(wantOut[:rows*c], g, x, m, inv, sg0, sgx0, k, rows)
	requireBits(t, "bnOutRows", out, wantOut)
}

// requireBits fails the test at the first element of got whose bits differ
// from want's.
func requireBits[T float](t *testing.T, what string, got, want []T) {
	t.Helper()
	for i := range want {
		if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v (the portable loop's)", what, i, got[i], want[i])
		}
	}
}
