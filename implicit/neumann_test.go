package implicit

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// neumannExact is the closed form of the deterministic series,
// η·Σ_{i=0}^{Q} (I − ηA)^i·b = (I − (I − ηA)^{Q+1})·A⁻¹b.
func neumannExact(p *quadratic, eta float64, q int, b []float64) []float64 {
	n := len(b)
	var m, pw mat.Dense
	m.Scale(-eta, p.A)
	for i := 0; i < n; i++ {
		m.Set(i, i, m.At(i, i)+1)
	}
	pw.Pow(&m, q+1)
	x := p.solveA(b)
	t := make([]float64, n)
	mulVec(t, &pw, x)
	floats.Sub(x, t)
	return x
}

func TestNeumannMatchesClosedForm(t *testing.T) {
	p := newQuadratic(t, 2, linspace(0.5, 10, 12), 8)
	b := make([]float64, 12)
	for i := range b {
		b[i] = math.Cos(float64(i))
	}
	for _, q := range []int{0, 1, 5, 30} {
		v := make([]float64, 12)
		s := Neumann{Eta: 0.09, Terms: q}
		if q == 0 {
			s.Terms = 20 // the documented default
		}
		st, err := s.Solve(v, HVPOperator(p, nil, nil, nil), b)
		if err != nil {
			t.Fatal(err)
		}
		want := neumannExact(p, 0.09, s.Terms, b)
		if e := relErr(v, want); e > 1e-12 {
			t.Errorf("Q = %d: relative error %.3g against the closed form", s.Terms, e)
		}
		if st.Iterations != s.Terms || !st.Converged {
			t.Errorf("Q = %d: stats %+v", s.Terms, st)
		}
	}
}

// TestNeumannGeometricRate checks the predicted rate: with η < 1/L the error
// of the AID-Neumann hypergradient is Bᵀ(I − ηA)^{Q+1}A⁻¹∇y f, which shrinks
// by (1 − ημ)^10 every 10 terms once the slowest mode dominates.
func TestNeumannGeometricRate(t *testing.T) {
	eig := append([]float64{0.5}, linspace(2, 10, 9)...) // μ = 0.5, L = 10
	p := newQuadratic(t, 3, eig, 9)
	x := []float64{1, -0.5, 0.25}
	y := p.yStar(x)
	want := p.gradPhi(x)
	eta := 0.9 / 10
	rate := math.Pow(1-eta*0.5, 10)
	errAt := func(q int) float64 {
		g := make([]float64, 3)
		if _, err := Hypergradient(g, p, x, y, &Settings{Solver: &Neumann{Eta: eta, Terms: q}}); err != nil {
			t.Fatal(err)
		}
		return relErr(g, want)
	}
	for _, q := range []int{40, 60, 80} {
		e0, e1 := errAt(q), errAt(q+10)
		ratio := e1 / e0
		t.Logf("Q = %d: error %.4g → %.4g, ratio %.5f, (1−ημ)^10 = %.5f", q, e0, e1, ratio, rate)
		if math.Abs(ratio/rate-1) > 0.01 {
			t.Errorf("Q = %d: ratio %.5f not within 1%% of (1−ημ)^10 = %.5f", q, ratio, rate)
		}
	}
}

func TestNeumannRefusesLargeStep(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 10, 8), 10)
	op := HVPOperator(p, nil, nil, nil)
	b := slices.Repeat([]float64{1}, 8)
	for _, tc := range []struct {
		name      string
		s         Neumann
		estimated bool
	}{
		{"estimated", Neumann{Eta: 0.3}, true},
		{"given", Neumann{Eta: 0.3, LambdaMax: 10}, false},
		{"above custom bound", Neumann{Eta: 0.195, MaxEtaLambda: 1.9}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := make([]float64, 8)
			_, err := tc.s.Solve(v, op, b)
			var se *StepSizeError
			if !errors.As(err, &se) {
				t.Fatalf("want *StepSizeError, got %v", err)
			}
			if se.Estimated != tc.estimated || math.Abs(se.LambdaMax-10) > 0.1 { // power iteration stops at 0.1% change
				t.Errorf("error %+v", se)
			}
			if !strings.Contains(err.Error(), "use η ≤") || !isZero(v) {
				t.Errorf("message %q, dst %v", err, v)
			}
			t.Log(err)
		})
	}
	// η·λmax = 1.5 is admitted when the bound is raised, and converges.
	v := make([]float64, 8)
	if _, err := (&Neumann{Eta: 0.15, MaxEtaLambda: 1.9, Terms: 200}).Solve(v, op, b); err != nil {
		t.Fatal(err)
	}
	if e := relErr(v, p.solveA(b)); e > 1e-10 {
		t.Errorf("η·λmax = 1.5: error %.3g", e)
	}
}

func TestNeumannDetectsDivergence(t *testing.T) {
	op := diagOp([]float64{1, 4, 10})
	v := make([]float64, 3)
	// The check is disabled, so only the growth test can stop η·λmax = 2.5.
	st, err := (&Neumann{Eta: 0.25, LanczosSteps: -1, Terms: 50}).Solve(v, op, []float64{1, 1, 1})
	var de *DivergenceError
	if !errors.As(err, &de) {
		t.Fatalf("want *DivergenceError, got %v (stats %+v)", err, st)
	}
	// The λ = 10 component |1 − 2.5|^i first exceeds 10·‖b‖ = 17.3 at i = 8.
	if de.Iter != 8 || floats.HasNaN(v) || st.Iterations != 7 {
		t.Errorf("error %+v, stats %+v, dst %v", de, st, v)
	}
}

func TestNeumannDefaultStepConverges(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 10, 8), 11)
	b := slices.Repeat([]float64{1}, 8)
	v := make([]float64, 8)
	st, err := (&Neumann{Terms: 400}).Solve(v, HVPOperator(p, nil, nil, nil), b)
	if err != nil {
		t.Fatal(err)
	}
	// η = 1/λmax: rate 0.9 per term, so 0.9^400 ≈ 5e-19.
	if e := relErr(v, p.solveA(b)); e > 1e-12 {
		t.Errorf("error %.3g", e)
	}
	if st.HVP <= 400 || st.HVP > 430 {
		t.Errorf("HVP %d: want 400 terms plus at most 30 Lanczos steps", st.HVP)
	}
}

// TestNeumannWarmStartIsFixedPoint checks the documented identity: Q terms
// from a warm start v0 equal Q+1 fixed-point steps from v0.
func TestNeumannWarmStartIsFixedPoint(t *testing.T) {
	p := newQuadratic(t, 2, linspace(1, 5, 6), 12)
	op := HVPOperator(p, nil, nil, nil)
	b := []float64{1, 2, 3, 4, 5, 6}
	v0 := []float64{0.1, -0.2, 0.3, 0, 0.5, 1}
	nv := append([]float64(nil), v0...)
	if _, err := (&Neumann{Eta: 0.15, Terms: 7}).Solve(nv, op, b); err != nil {
		t.Fatal(err)
	}
	fv := append([]float64(nil), v0...)
	if _, err := (&FixedPoint{Eta: 0.15, MaxIter: 8, Tol: -1}).Solve(fv, op, b); err != nil {
		t.Fatal(err)
	}
	if e := relErr(nv, fv); e > 1e-13 {
		t.Errorf("warm Neumann %v, fixed point %v (error %.3g)", nv, fv, e)
	}
}

// TestNeumannTermOrder checks Algorithm 3's order with non-commuting
// per-term operators: r_0 = (I − ηA_1)(I − ηA_2)…(I − ηA_Q)·b.
func TestNeumannTermOrder(t *testing.T) {
	const q, eta = 4, 0.2
	ops := make([]*mat.SymDense, q+1)
	for i := 1; i <= q; i++ {
		fi := float64(i)
		ops[i] = mat.NewSymDense(2, []float64{1 + fi, fi / 2, fi / 2, 2})
	}
	var calls []int
	s := Neumann{Eta: eta, Terms: q, LambdaMax: 4}
	b := []float64{1, -1}
	v := make([]float64, 2)
	// Step k applies A_i with i = Q − k + 1.
	if _, err := s.SolveSteps(v, func(k int) Operator {
		calls = append(calls, k)
		return func(dst, v []float64) { mulVec(dst, ops[q-k+1], v) }
	}, b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{1, 2, 3, 4}) {
		t.Errorf("steps asked for %v, want [1 2 3 4]", calls)
	}
	want := mat.NewVecDense(2, nil)
	r := mat.NewVecDense(2, slices.Clone(b))
	want.AddScaledVec(want, eta, r)
	for i := q; i >= 1; i-- {
		var ar mat.VecDense
		ar.MulVec(ops[i], r)
		r.AddScaledVec(r, -eta, &ar)
		want.AddScaledVec(want, eta, r)
	}
	if e := relErr(v, want.RawVector().Data); e > 1e-15 {
		t.Errorf("got %v, want %v", v, want.RawVector().Data)
	}
}

func TestNeumannBatchSizes(t *testing.T) {
	for _, tc := range []struct {
		q       int
		b, rate float64
		max     int
		want    []int
	}{
		{4, 2, 0.5, 0, []int{1, 2, 4, 8}},
		{4, 2, 0.5, 5, []int{1, 2, 4, 5}},
		{3, 0.1, 0.5, 0, []int{1, 1, 1}},
		{3, 10, 1, 0, []int{30, 30, 30}},
	} {
		if got := NeumannBatchSizes(tc.q, tc.b, tc.rate, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("NeumannBatchSizes(%d, %v, %v, %d) = %v, want %v", tc.q, tc.b, tc.rate, tc.max, got, tc.want)
		}
	}
}

// TestNeumannStochasticUnbiased runs stocBiO's estimator on ridge regression
// with independent batches of decaying size: the batch HVPs are unbiased and
// independent, so the mean of v_Q over many draws approaches the
// deterministic v_Q.
func TestNeumannStochasticUnbiased(t *testing.T) {
	r := newRidge(60, 30, 6, 13)
	lam := []float64{-1, -2, -1.5, -0.5, -1, -2}
	w := r.wStar(lam)
	b := make([]float64, 6)
	r.GradF(nil, b, lam, w, nil)
	const q, eta = 8, 0.1
	full := HVPOperator(r, lam, w, nil)
	want := make([]float64, 6)
	if _, err := (&Neumann{Eta: eta, Terms: q}).Solve(want, full, b); err != nil {
		t.Fatal(err)
	}
	sizes := NeumannBatchSizes(q, 2, 0.9, 60)
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([][]int, q)
	s := Neumann{Eta: eta, Terms: q}
	ops := func(k int) Operator {
		if k == 0 {
			return full
		}
		return HVPOperator(r, lam, w, batches[q-k]) // B_i, i = Q − k + 1
	}
	const draws = 4000
	mean := make([]float64, 6)
	v := make([]float64, 6)
	for k := 0; k < draws; k++ {
		for i := range batches {
			batches[i] = rng.Perm(60)[:sizes[i]]
		}
		clear(v)
		if _, err := s.SolveSteps(v, ops, b); err != nil {
			t.Fatal(err)
		}
		floats.AddScaled(mean, 1.0/draws, v)
	}
	e := relErr(mean, want)
	t.Logf("batch sizes %v: relative error of the mean of %d draws %.3g", sizes, draws, e)
	if e > 0.01 {
		t.Errorf("mean of stochastic estimates is %.3g away from the deterministic series", e)
	}
}
