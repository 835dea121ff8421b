package implicit

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
)

// TestNeumannTruncate checks the randomized-truncation estimator: a draw J
// gives (Q+1)·η·Π_{j=1}^{J}(I − ηA_j)·b with J products, and the mean over
// the Q+1 draws is the Neumann series of Solve (to rounding, 1e-14).
func TestNeumannTruncate(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 4, 5), 31)
	op := HVPOperator(p, nil, nil, nil)
	b := []float64{1, -2, 0.5, 3, 1}
	const q, eta = 6, 0.2
	want := make([]float64, 5)
	if _, err := (&Neumann{Eta: eta, Terms: q, LanczosSteps: -1}).Solve(want, op, b); err != nil {
		t.Fatal(err)
	}
	mean := make([]float64, 5)
	for j := 0; j <= q; j++ {
		s := Neumann{Eta: eta, Terms: q, LanczosSteps: -1, Truncate: func(n int) int {
			if n != q+1 {
				t.Fatalf("Truncate(%d), want Truncate(Q+1 = %d)", n, q+1)
			}
			return j
		}}
		v := make([]float64, 5)
		st, err := s.Solve(v, op, b)
		if err != nil {
			t.Fatal(err)
		}
		if st.HVP != j || st.Iterations != j {
			t.Errorf("J = %d: %d products in %d iterations", j, st.HVP, st.Iterations)
		}
		r := append([]float64(nil), b...)
		ar := make([]float64, 5)
		for range j {
			op(ar, r)
			floats.AddScaled(r, -eta, ar)
		}
		floats.Scale(float64(q+1)*eta, r)
		if e := relErr(v, r); e > 1e-15 {
			t.Errorf("J = %d: %v, want %v", j, v, r)
		}
		floats.AddScaled(mean, 1/float64(q+1), v)
	}
	if e := relErr(mean, want); e > 1e-14 {
		t.Errorf("mean over J of the truncated estimates differs from the series by %.3g", e)
	}
}

// TestFixedPointSteps: FixedPoint on a per-step source uses step k's
// operator and right-hand side (refreshed by the source) for its k-th
// update, with one product per step, and equals the deterministic
// iteration when every step gives the same A and b. A source whose
// estimates grow the residual fails with a *DivergenceError and leaves the
// last iterate that passed the checks.
func TestFixedPointSteps(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 3, 4), 32)
	op := HVPOperator(p, nil, nil, nil)
	b0 := []float64{1, 0, -1, 2}
	const eta = 0.3
	want := make([]float64, 4)
	if _, err := (&FixedPoint{Eta: eta, MaxIter: 7, Tol: -1}).Solve(want, op, b0); err != nil {
		t.Fatal(err)
	}
	b := append([]float64(nil), b0...)
	got := make([]float64, 4)
	var asked []int
	st, err := (&FixedPoint{Eta: eta, MaxIter: 7, Tol: -1}).SolveSteps(got, func(k int) Operator {
		asked = append(asked, k)
		copy(b, b0) // a "fresh" right-hand side, the same every step
		return op
	}, b)
	if err != nil {
		t.Fatal(err)
	}
	if st.HVP != 7 || st.Iterations != 7 || len(asked) != 7 || asked[0] != 1 || asked[6] != 7 {
		t.Errorf("stats %+v, steps asked %v; want 7 products, steps 1..7", st, asked)
	}
	if relErr(got, want) != 0 {
		t.Errorf("per-step source %v, fixed operator %v", got, want)
	}
	// Step k's right-hand side enters step k's update: v_1 = η·b_1.
	rnd := rand.New(rand.NewPCG(1, 1))
	v := make([]float64, 4)
	var b1 []float64
	if _, err := (&FixedPoint{Eta: eta, MaxIter: 1, Tol: -1}).SolveSteps(v, func(k int) Operator {
		for i := range b {
			b[i] = rnd.NormFloat64()
		}
		b1 = append([]float64(nil), b...)
		return op
	}, b); err != nil {
		t.Fatal(err)
	}
	floats.Scale(eta, b1)
	if relErr(v, b1) > 1e-16 {
		t.Errorf("v_1 = %v, want η·b_1 = %v", v, b1)
	}
	// Growing estimates: A_k = −k·I makes the residual grow.
	v = make([]float64, 4)
	var de *DivergenceError
	_, err = (&FixedPoint{Eta: eta, MaxIter: 50, Tol: -1}).SolveSteps(v, func(k int) Operator {
		return func(dst, x []float64) { floats.ScaleTo(dst, -float64(k), x) }
	}, b0)
	if !errors.As(err, &de) || !floats.Equal(v, v) || math.IsNaN(floats.Norm(v, 2)) {
		t.Fatalf("growing operator: error %v, v %v; want a *DivergenceError and finite v", err, v)
	}
	t.Logf("%v", err)
}

// TestEstimate checks the AID estimate g_x − C·v of a System on the toy of
// the examples (C = −I): the parts are called in the order Gradient,
// Solve, Cross, a nil Solve keeps v, and a failing solve returns its error
// with dst = g_x.
func TestEstimate(t *testing.T) {
	var order []string
	sys := System{
		Gradient: func(gx, gy []float64) {
			order = append(order, "gradient")
			copy(gx, []float64{1, 2})
			copy(gy, []float64{3, 4})
		},
		Solve: func(v, b []float64) (Stats, error) {
			order = append(order, "solve")
			floats.ScaleTo(v, 0.5, b)
			return Stats{HVP: 3}, nil
		},
		Cross: func(dst, v []float64) { order = append(order, "cross"); floats.ScaleTo(dst, -1, v) },
	}
	dst, v := make([]float64, 2), make([]float64, 2)
	st, err := Estimate(dst, v, sys, nil, nil)
	if err != nil || st.HVP != 3 || !floats.Equal(dst, []float64{2.5, 4}) || !floats.Equal(v, []float64{1.5, 2}) {
		t.Errorf("Estimate: %v, %+v, dst %v, v %v", err, st, dst, v)
	}
	if len(order) != 3 || order[0] != "gradient" || order[1] != "solve" || order[2] != "cross" {
		t.Errorf("parts called in the order %v", order)
	}
	sys.Solve = nil
	copy(v, []float64{1, 1})
	if _, err := Estimate(dst, v, sys, nil, nil); err != nil || !floats.Equal(dst, []float64{2, 3}) {
		t.Errorf("nil Solve: %v, dst %v", err, dst)
	}
	fail := errors.New("no")
	sys.Solve = func(v, b []float64) (Stats, error) { return Stats{}, fail }
	if _, err := Estimate(dst, v, sys, nil, nil); err != fail || !floats.Equal(dst, []float64{1, 2}) {
		t.Errorf("failing solve: %v, dst %v", err, dst)
	}
}
