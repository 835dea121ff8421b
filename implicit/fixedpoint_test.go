package implicit

import (
	"errors"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
)

func TestFixedPointConverges(t *testing.T) {
	p := newQuadratic(t, 2, linspace(0.5, 10, 10), 14)
	op := HVPOperator(p, nil, nil, nil)
	b := slices.Repeat([]float64{1, -1}, 5)
	want := p.solveA(b)
	for _, tc := range []struct {
		name string
		s    FixedPoint
	}{
		{"default step", FixedPoint{}},
		{"eta 0.15", FixedPoint{Eta: 0.15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := make([]float64, 10)
			st, err := tc.s.Solve(v, op, b)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Converged || st.Residual > 1e-10*floats.Norm(b, 2) {
				t.Errorf("stats %+v", st)
			}
			if e := relErr(v, want); e > 1e-9 {
				t.Errorf("relative error %.3g", e)
			}
			t.Logf("%d iterations, %d operator calls", st.Iterations, st.HVP)
		})
	}
}

// TestFixedPointRidge checks that Ridge = ρ solves (A + ρI)·v = b, by
// comparison with the dense solve of the shifted operator.
func TestFixedPointRidge(t *testing.T) {
	p := newQuadratic(t, 2, linspace(0.01, 4, 8), 15)
	op := HVPOperator(p, nil, nil, nil)
	const rho = 0.5
	shifted := func(dst, v []float64) {
		op(dst, v)
		floats.AddScaled(dst, rho, v)
	}
	b := []float64{1, 2, 3, 4, 4, 3, 2, 1}
	want := make([]float64, 8)
	if _, err := (&Dense{}).Solve(want, shifted, b); err != nil {
		t.Fatal(err)
	}
	v := make([]float64, 8)
	st, err := (&FixedPoint{Ridge: rho}).Solve(v, op, b)
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(v, want); e > 1e-9 {
		t.Errorf("relative error %.3g (stats %+v)", e, st)
	}
}

func TestFixedPointDetectsDivergence(t *testing.T) {
	op := diagOp([]float64{1, 4, 10})
	b := []float64{1, 1, 1}
	v := make([]float64, 3)
	st, err := (&FixedPoint{Eta: 0.25}).Solve(v, op, b)
	var de *DivergenceError
	if !errors.As(err, &de) || de.Solver != "fixed-point" {
		t.Fatalf("want *DivergenceError, got %v", err)
	}
	// dst is the iterate of step Iter−1: rerun exactly that many steps.
	ref := make([]float64, 3)
	if _, err := (&FixedPoint{Eta: 0.25, MaxIter: de.Iter - 1, Tol: -1}).Solve(ref, op, b); err != nil {
		t.Fatal(err)
	}
	if !floats.Equal(v, ref) || st.Iterations != de.Iter-1 {
		t.Errorf("dst %v, want %v; stats %+v", v, ref, st)
	}
	t.Log(err)
}
