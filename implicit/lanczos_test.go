package implicit

import (
	"errors"
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
			if math.Abs(got-want) > 1e-12*want {
				t.Errorf("λmax = %.15g, want %g", got, want)
			}
		})
	}
}

// TestLanczos checks the Ritz range of Lanczos on a diagonal operator of
// dimension 40: with all 40 steps it is the spectrum's range to 1e-12
// (eigendecomposition and bisection alike); with tol it stops before and
// approaches both ends from inside; a zero start or a NaN from the
// operator is an error.
func TestLanczos(t *testing.T) {
	d := linspace(0.5, 20, 40)
	start := func() []float64 {
		v := make([]float64, 40)
		randomFill(v, 3)
		return v
	}
	for _, tol := range []float64{0, 1e-14} {
		lo, hi, n, err := Lanczos(diagOp(d), start(), 40, tol)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(lo-0.5) > 1e-12 || math.Abs(hi-20) > 1e-12*20 || n > 40 {
			t.Errorf("tol %g: Ritz range [%.15g, %.15g] after %d steps, want [0.5, 20]", tol, lo, hi, n)
		}
	}
	lo, hi, n, err := Lanczos(diagOp(d), start(), 40, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 40 || hi > 20 || hi < 19 || lo < 0.5 {
		t.Errorf("tol 1e-3: Ritz range [%v, %v] after %d steps", lo, hi, n)
	}
	t.Logf("tol 1e-3: λmax ≈ %.6g after %d steps", hi, n)
	if _, _, _, err := Lanczos(diagOp(d), make([]float64, 40), 10, 0); err == nil {
		t.Error("zero start vector: no error")
	}
	nan := func(dst, v []float64) { dst[0] = math.NaN() }
	var be *BreakdownError
	if _, _, _, err := Lanczos(nan, start(), 10, 0); !errors.As(err, &be) || be.Iter != 1 {
		t.Errorf("NaN operator: error %v, want a *BreakdownError at step 1", err)
	}
}
