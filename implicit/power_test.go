package implicit

import (
	"math"
	"testing"
)

func TestLargestEigenvalueDiagonal(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    []float64
	}{
		{"1..10", linspace(1, 10, 10)},
		{"gap", []float64{0.001, 3, 0.5, 7, 2}},
		{"dim1", []float64{4.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := 0.0
			for _, e := range tc.d {
				want = math.Max(want, e)
			}
			got, err := LargestEigenvalue(diagOp(tc.d), len(tc.d), 1000, 42)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-want) > 1e-8*want {
				t.Errorf("λmax = %.12g, want %g", got, want)
			}
		})
	}
}

func TestPowerIterationEigenvector(t *testing.T) {
	v := []float64{1, 1, 1, 1}
	lam, iters, err := PowerIteration(v, diagOp([]float64{1, 2, 8, 3}), 500, 1e-14)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lam-8) > 1e-10 || math.Abs(math.Abs(v[2])-1) > 1e-6 || iters >= 500 {
		t.Errorf("λ = %v after %d steps, v = %v", lam, iters, v)
	}
	if _, _, err := PowerIteration(make([]float64, 3), diagOp([]float64{1, 2, 3}), 10, 0); err == nil {
		t.Error("zero start vector: want an error")
	}
}
