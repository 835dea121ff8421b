package implicit

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

func TestCGSolvesSPDSystems(t *testing.T) {
	for _, tc := range []struct {
		name string
		eig  []float64
	}{
		{"dim1", []float64{3}}, // TorchOpt #222: size-1 systems must not be skipped
		{"dim2", []float64{0.5, 4}},
		{"dim12", linspace(0.1, 10, 12)},
		{"dim40", linspace(1, 1000, 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newQuadratic(t, 2, tc.eig, 3)
			n := len(tc.eig)
			b := make([]float64, n)
			for i := range b {
				b[i] = math.Sin(float64(i + 1))
			}
			want := p.solveA(b)
			v := make([]float64, n)
			var cg CG
			st, err := cg.Solve(v, HVPOperator(p, nil, nil, nil), b)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Converged || st.Iterations > 2*n || st.HVP != st.Iterations {
				t.Errorf("stats %+v", st)
			}
			if e := relErr(v, want); e > 1e-8 {
				t.Errorf("relative error %.3g > 1e-8 (%d iterations)", e, st.Iterations)
			}
		})
	}
}

func TestCGWarmStart(t *testing.T) {
	p := newQuadratic(t, 2, linspace(0.1, 10, 20), 4)
	op := HVPOperator(p, nil, nil, nil)
	b := make([]float64, 20)
	for i := range b {
		b[i] = float64(i%3) - 1
	}
	want := p.solveA(b)
	var cg CG

	// From the exact solution: no CG step, one operator call for the residual.
	v := append([]float64(nil), want...)
	st, err := cg.Solve(v, op, b)
	if err != nil || !st.Converged || st.Iterations != 0 || st.HVP != 1 {
		t.Errorf("warm start at the solution: stats %+v, err %v", st, err)
	}

	// From a nearby point: fewer steps than from zero.
	cold, err := cg.Solve(make([]float64, 20), op, b)
	if err != nil {
		t.Fatal(err)
	}
	v = append([]float64(nil), want...)
	for i := range v {
		v[i] += 1e-6 * float64(i%2)
	}
	warm, err := cg.Solve(v, op, b)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Iterations >= cold.Iterations {
		t.Errorf("warm start took %d iterations, cold %d", warm.Iterations, cold.Iterations)
	}
	if e := relErr(v, want); e > 1e-8 {
		t.Errorf("warm-started solution error %.3g", e)
	}
}

func TestCGFixedStepsNoTolerance(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 100, 10), 5)
	b := make([]float64, 10)
	b[0] = 1
	cg := CG{MaxIter: 3, Tol: -1}
	st, err := cg.Solve(make([]float64, 10), HVPOperator(p, nil, nil, nil), b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Iterations != 3 || st.Converged {
		t.Errorf("want exactly 3 unconverged iterations, got %+v", st)
	}
}

func TestCGZeroRightHandSide(t *testing.T) {
	v := make([]float64, 3)
	st, err := (&CG{}).Solve(v, diagOp([]float64{1, 2, 3}), make([]float64, 3))
	if err != nil || !st.Converged || st.HVP != 0 || !floats.Equal(v, []float64{0, 0, 0}) {
		t.Errorf("b = 0: v %v, stats %+v, err %v", v, st, err)
	}
}

func TestCGNegativeCurvature(t *testing.T) {
	op := diagOp([]float64{1, -2, 3, 0.5})
	b := []float64{1, 1, 1, 1}
	v := make([]float64, 4)
	_, err := (&CG{}).Solve(v, op, b)
	var ce *CurvatureError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CurvatureError, got %v", err)
	}
	if !errors.Is(err, ErrNotPositiveDefinite) {
		t.Error("errors.Is(err, ErrNotPositiveDefinite) is false")
	}
	// p₁ = b has curvature 1 − 2 + 3 + 0.5 > 0; the second direction has not.
	if ce.Curvature > 0 || ce.Iter != 2 {
		t.Errorf("curvature error %+v", ce)
	}
	if floats.HasNaN(v) {
		t.Fatalf("dst has NaN: %v", v)
	}
	// dst is the iterate of step Iter−1: the same as stopping there.
	ref := make([]float64, 4)
	if _, err := (&CG{MaxIter: 1, Tol: -1}).Solve(ref, op, b); err != nil {
		t.Fatal(err)
	}
	if !floats.EqualApprox(v, ref, 1e-15) {
		t.Errorf("dst %v, want last good iterate %v", v, ref)
	}
	t.Logf("%v", err)
}

func TestCGBreakdownOnNaN(t *testing.T) {
	calls := 0
	op := func(dst, v []float64) {
		calls++
		for i := range dst {
			dst[i] = float64(i+1) * v[i]
		}
		if calls == 3 {
			dst[1] = math.NaN()
		}
	}
	v := make([]float64, 5)
	_, err := (&CG{}).Solve(v, op, []float64{1, 2, 3, 4, 5})
	var be *BreakdownError
	if !errors.As(err, &be) || be.Iter != 3 || be.Solver != "cg" {
		t.Fatalf("want breakdown at iteration 3, got %v", err)
	}
	if floats.HasNaN(v) {
		t.Errorf("dst has NaN: %v", v)
	}
}

// TestAIDCGErrorFallsWithSteps is the accuracy test of AID-CG: at y = y*(x)
// the hypergradient error decreases as N = 1, 2, 4, … CG steps and is below
// 1e-10 (relative) at N = d_y.
func TestAIDCGErrorFallsWithSteps(t *testing.T) {
	quad := newQuadratic(t, 3, linspace(0.5, 20, 16), 6)
	xq := []float64{0.3, -1, 2}
	rid := newRidge(60, 30, 8, 7)
	lam := []float64{-2, -1, -3, 0, -2.5, -1.5, -0.5, -2}
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
			dy := len(tc.y)
			prev := math.Inf(1)
			g := make([]float64, len(tc.x))
			for n := 1; ; n *= 2 {
				if n > dy {
					n = dy
				}
				_, err := Hypergradient(g, tc.p, tc.x, tc.y, &Settings{Solver: &CG{MaxIter: n, Tol: -1}})
				if err != nil {
					t.Fatal(err)
				}
				e := relErr(g, tc.want)
				t.Logf("N = %2d: relative error %.3g", n, e)
				if e >= prev && prev > 1e-13 {
					t.Errorf("error did not decrease from %.3g to %.3g at N = %d", prev, e, n)
				}
				prev = e
				if n == dy {
					break
				}
			}
			if prev > 1e-10 {
				t.Errorf("error at N = d_y = %d is %.3g > 1e-10", dy, prev)
			}
		})
	}
}

// TestSolversDoNotAllocate: once their scratch has grown, the iterative
// solvers allocate nothing per call (and so nothing per iteration).
func TestSolversDoNotAllocate(t *testing.T) {
	const n = 16
	op := denseOp(spdMatrix(n), n)
	b := make([]float64, n)
	for i := range b {
		b[i] = float64(i%4) - 1.5
	}
	v := make([]float64, n)
	for _, s := range []Solver{&CG{}, &Neumann{Terms: 10}, &FixedPoint{MaxIter: 10}} {
		run := func() {
			clear(v)
			if _, err := s.Solve(v, op, b); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if a := testing.AllocsPerRun(20, run); a != 0 {
			t.Errorf("%T: %v allocations per Solve", s, a)
		}
	}
}

// TestNegativeCounts: a negative iteration cap is an error of every
// iterative solver, not a solve that does nothing.
func TestNegativeCounts(t *testing.T) {
	op := diagOp([]float64{1, 2})
	for _, s := range []Solver{&CG{MaxIter: -1}, &Neumann{Terms: -1}, &FixedPoint{MaxIter: -1}} {
		v := make([]float64, 2)
		if _, err := s.Solve(v, op, []float64{1, 1}); err == nil || !strings.Contains(err.Error(), "< 0") {
			t.Errorf("%T: error %v, want one about a negative count", s, err)
		}
	}
}
