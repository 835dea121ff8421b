package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestElementwiseKernels checks elemVec and elemNum (the AVX-512 kernels
// of the four arithmetic operations and the six comparisons) against the
// scalar operation, bit for bit in both precisions, on lengths around the
// vector widths (8 and 16) with NaNs, infinities, zeros of both signs and
// equal operands among the values, and an output one element longer
// than n to catch a write past it.
func TestElementwiseKernels(t *testing.T) {
	t.Logf("AVX-512: %v", useAVX512)
	ops := []struct {
		name string
		op   opKind
		kind int
		f    func(x, y float64) float64
	}{
		{"add", opAdd, 0, func(x, y float64) float64 { return x + y }},
		{"sub", opSub, 0, func(x, y float64) float64 { return x - y }},
		{"mul", opMul, 0, func(x, y float64) float64 { return x * y }},
		{"div", opDiv, 0, func(x, y float64) float64 { return x / y }},
		{"lt", opCmp, cmpLT, func(x, y float64) float64 { return b2f(x < y) }},
		{"gt", opCmp, cmpGT, func(x, y float64) float64 { return b2f(x > y) }},
		{"le", opCmp, cmpLE, func(x, y float64) float64 { return b2f(x <= y) }},
		{"ge", opCmp, cmpGE, func(x, y float64) float64 { return b2f(x >= y) }},
		{"eq", opCmp, cmpEQ, func(x, y float64) float64 { return b2f(x == y) }},
		{"ne", opCmp, cmpNE, func(x, y float64) float64 { return b2f(x != y) }},
	}
	for _, o := range ops {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 33, 100} {
			name := fmt.Sprintf("%s/%d", o.name, n)
			t.Run("f64/"+name, func(t *testing.T) { checkElem[float64](t, o.op, o.kind, o.f, n) })
			t.Run("f32/"+name, func(t *testing.T) { checkElem[float32](t, o.op, o.kind, o.f, n) })
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func checkElem[T float](t *testing.T, op opKind, kind int, f func(x, y float64) float64, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(kind)))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1}
	x, y := make([]T, n), make([]T, n)
	for i := range x {
		x[i], y[i] = T(rng.NormFloat64()), T(rng.NormFloat64())
		switch rng.IntN(4) {
		case 0:
			x[i] = T(special[rng.IntN(len(special))])
		case 1:
			y[i] = x[i]
		}
	}
	same := func(what string, got []T, want func(i int) T) {
		t.Helper()
		if got[n] != 7 {
			t.Fatalf("%s wrote past the end: %v", what, got[n])
		}
		for i := range n {
			w := want(i)
			if math.Float64bits(float64(got[i])) != math.Float64bits(float64(w)) && !(got[i] != got[i] && w != w) {
				t.Fatalf("%s: element %d of %v op %v = %v, want %v", what, i, x[i], y[i], got[i], w)
			}
		}
	}
	out := make([]T, n+1)
	out[n] = 7
	if !elemVec(op, kind, out[:n], x, y) {
		if useAVX512 {
			t.Fatal("elemVec has no kernel")
		}
		return
	}
	same("elemVec", out, func(i int) T { return T(f(float64(x[i]), float64(y[i]))) })
	c := y[n/2]
	elemNum(op, kind, out[:n], x, c)
	same("elemNum", out, func(i int) T { return T(f(float64(x[i]), float64(c))) })
}
