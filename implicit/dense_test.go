package implicit

import (
	"errors"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
)

func TestDenseHypergradientMatchesClosedForm(t *testing.T) {
	quad := newQuadratic(t, 3, linspace(0.1, 50, 14), 16)
	xq := []float64{-1, 0.5, 2}
	rid := newRidge(50, 25, 7, 17)
	lam := []float64{-2, -1, -3, -0.5, -2.5, -1.5, 0}
	for _, tc := range []struct {
		name string
		p    oracle.Implicit
		x, y []float64
		want []float64
	}{
		{"quadratic", quad, xq, quad.yStar(xq), quad.gradPhi(xq)},
		{"ridge", rid, lam, rid.wStar(lam), rid.gradPhi(lam)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := make([]float64, len(tc.x))
			res, err := Hypergradient(g, tc.p, tc.x, tc.y, &Settings{Solver: &Dense{}})
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(g, tc.want); e > 1e-12 {
				t.Errorf("relative error %.3g > 1e-12", e)
			}
			if res.HVP != len(tc.y) || !res.Converged {
				t.Errorf("result %+v", res.Stats)
			}
		})
	}
}

func TestDenseRejectsNonSPD(t *testing.T) {
	b := []float64{1, 1, 1}
	for _, tc := range []struct {
		name string
		op   Operator
	}{
		{"indefinite", diagOp([]float64{1, -1, 2})},
		{"singular", diagOp([]float64{1, 0, 2})},
		{"asymmetric", denseOp([]float64{2, 1, 0, 0, 2, 0, 0, 0, 2}, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := make([]float64, 3)
			_, err := (&Dense{}).Solve(v, tc.op, b)
			if !errors.Is(err, ErrNotPositiveDefinite) {
				t.Fatalf("want ErrNotPositiveDefinite, got %v", err)
			}
			t.Log(err)
		})
	}
}
