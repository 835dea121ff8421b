package implicit

import (
	"testing"
)

// spdMatrix returns a row-major n×n symmetric positive definite matrix with
// diagonal 4 and off-diagonals ±1 on the first band (a discrete Laplacian
// shifted by 2).
func spdMatrix(n int) []float64 {
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		a[i*n+i] = 4
		if i+1 < n {
			a[i*n+i+1], a[(i+1)*n+i] = -1, -1
		}
	}
	return a
}

// BenchmarkCG runs a fixed number of CG steps on a 64×64 operator; after
// the first call the solver reuses its scratch, so allocs/op must be 0.
func BenchmarkCG(b *testing.B) {
	const n, steps = 64, 32
	op := denseOp(spdMatrix(n), n)
	rhs := make([]float64, n)
	for i := range rhs {
		rhs[i] = float64(i%5) - 2
	}
	v := make([]float64, n)
	cg := CG{MaxIter: steps, Tol: -1}
	if _, err := cg.Solve(v, op, rhs); err != nil { // grow the scratch once
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(v)
		if _, err := cg.Solve(v, op, rhs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
}

func BenchmarkNeumann(b *testing.B) {
	const n, terms = 64, 32
	op := denseOp(spdMatrix(n), n)
	rhs := make([]float64, n)
	for i := range rhs {
		rhs[i] = 1
	}
	v := make([]float64, n)
	s := Neumann{Eta: 1.0 / 6, LambdaMax: 6, Terms: terms}
	b.ReportAllocs()
	for b.Loop() {
		clear(v)
		if _, err := s.Solve(v, op, rhs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFixedPoint(b *testing.B) {
	const n = 64
	op := denseOp(spdMatrix(n), n)
	rhs := make([]float64, n)
	for i := range rhs {
		rhs[i] = 1
	}
	v := make([]float64, n)
	s := FixedPoint{Eta: 1.0 / 6, MaxIter: 32, Tol: -1}
	b.ReportAllocs()
	for b.Loop() {
		clear(v)
		if _, err := s.Solve(v, op, rhs); err != nil {
			b.Fatal(err)
		}
	}
}
