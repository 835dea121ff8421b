package unroll

import (
	"errors"
	"math"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
)

// TestSweepEqualsUnrolledClosedForm: on the quadratic, y_T(x) is affine in x
// and its Jacobian follows a matrix recursion; the reverse sweep must
// reproduce d f(x, y_T(x))/dx to 1e-12, for gradient descent and heavy
// ball, full and truncated.
func TestSweepEqualsUnrolledClosedForm(t *testing.T) {
	p := newQuadratic(t, 3, linspaceEig(0.5, 5, 8), 1)
	x := []float64{0.4, -1.2, 0.7}
	y0 := []float64{1, 0, -1, 2, 0.5, 0, 0, 1}
	for _, tc := range []struct {
		name        string
		alpha, beta float64
		T, K        int
	}{
		{"GD T=1", 0.15, 0, 1, 0},
		{"GD T=25", 0.15, 0, 25, 0},
		{"GD T=25 K=7", 0.15, 0, 25, 7},
		{"GD T=25 K=1", 0.15, 0, 25, 1},
		{"HB T=25", 0.1, 0.6, 25, 0},
		{"HB T=40 K=10", 0.1, 0.6, 40, 10},
		{"HB T=40 K=1", 0.1, 0.6, 40, 1},
		{"HB T=2", 0.1, 0.6, 2, 0},
		{"T=0", 0.1, 0.6, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := Unroller{Steps: tc.T, Alpha: tc.alpha, Momentum: tc.beta, Truncate: tc.K}
			got := make([]float64, 3)
			if _, err := u.Hypergradient(got, p, x, y0, nil); err != nil {
				t.Fatal(err)
			}
			want, yT := p.unrolledDerivative(x, y0, tc.alpha, tc.beta, tc.T, tc.K)
			e := relErr(got, want)
			t.Logf("relative difference from the matrix recursion %.2g", e)
			if e > 1e-12 {
				t.Errorf("sweep %v, closed form %v: relative error %.3g", got, want, e)
			}
			if e := relErr(u.Final(), yT); e > 1e-13 {
				t.Errorf("y_T error %.3g", e)
			}
		})
	}
}

// TestTruncatedFullEqualsFull: K = T is the full sweep, bit for bit.
func TestTruncatedFullEqualsFull(t *testing.T) {
	p := newNonquadratic(t, 3, 6, 2)
	x := []float64{0.3, 0.1, -0.5}
	y0 := make([]float64, 6)
	for _, beta := range []float64{0, 0.5} {
		full := Unroller{Steps: 30, Alpha: 0.2, Momentum: beta}
		trunc := full
		trunc.Truncate = 30
		over := full
		over.Truncate = 100
		g1, g2, g3 := make([]float64, 3), make([]float64, 3), make([]float64, 3)
		r1, err1 := full.Hypergradient(g1, p, x, y0, nil)
		r2, err2 := trunc.Hypergradient(g2, p, x, y0, nil)
		r3, err3 := over.Hypergradient(g3, p, x, y0, nil)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if !floats.Equal(g1, g2) || !floats.Equal(g1, g3) || r1 != r2 || r1 != r3 {
			t.Errorf("β = %v: full %v %+v, K = T %v %+v, K > T %v", beta, g1, r1, g2, r2, g3)
		}
	}
}

// TestITDErrorContractsGeometrically: for gradient descent with α = 1/L on
// the quadratic, the ITD error with respect to ∇Φ behaves like (1 − αμ)^T.
// The measured ratio err(T+10)/err(T) must lie within 1% of (1 − αμ)^10.
func TestITDErrorContractsGeometrically(t *testing.T) {
	eig := []float64{0.5, 2, 2.5, 3, 3.5, 4} // μ = 0.5, L = 4
	p := newQuadratic(t, 3, eig, 3)
	x := []float64{1, -0.5, 0.3}
	y0 := make([]float64, len(eig))
	want := p.gradPhi(x)
	const alpha = 0.25
	rate := math.Pow(1-alpha*0.5, 10)
	errAt := func(T int) float64 {
		u := Unroller{Steps: T, Alpha: alpha}
		g := make([]float64, 3)
		if _, err := u.Hypergradient(g, p, x, y0, nil); err != nil {
			t.Fatal(err)
		}
		return relErr(g, want)
	}
	for _, T := range []int{60, 80, 100} {
		e0, e1 := errAt(T), errAt(T+10)
		ratio := e1 / e0
		t.Logf("T = %d: ITD error %.4g → %.4g, ratio %.6f, (1−αμ)^10 = %.6f", T, e0, e1, ratio, rate)
		if math.Abs(ratio/rate-1) > 0.01 {
			t.Errorf("T = %d: ratio %.6f not within 1%% of %.6f", T, ratio, rate)
		}
	}
}

// TestHeavyBallMatchesFiniteDifferences checks the heavy-ball (and GD)
// adjoint recursion against central differences of the unrolled map
// x ↦ f(x, y_T(x)) on a problem with state-dependent curvature and
// per-step mini-batches.
func TestHeavyBallMatchesFiniteDifferences(t *testing.T) {
	p := newNonquadratic(t, 3, 6, 4)
	x := []float64{0.5, -0.3, 0.8}
	y0 := []float64{0.2, -0.1, 0, 0.4, 1, -1}
	batches := [][]int{{0, 1, 2, 3}, {2, 3, 4, 5}, {0, 2, 4, 5}, {1, 3, 5, 0}}
	for _, tc := range []struct {
		name    string
		beta    float64
		batched bool
		K       int
	}{
		{"GD", 0, false, 0},
		{"HB", 0.7, false, 0},
		{"HB batched", 0.7, true, 0},
		{"HB truncated", 0.5, false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := Unroller{Steps: 35, Alpha: 0.15, Momentum: tc.beta, Truncate: tc.K}
			if tc.batched {
				u.Batch = func(t int) []int { return batches[t%len(batches)] }
			}
			got := make([]float64, 3)
			res, err := u.Hypergradient(got, p, x, y0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.K > 0 {
				// Truncation changes the derivative: only check that it is
				// finite and differs from the full one.
				full := u
				full.Truncate = 0
				g := make([]float64, 3)
				if _, err := full.Hypergradient(g, p, x, y0, nil); err != nil {
					t.Fatal(err)
				}
				if relErr(got, g) < 1e-8 || res.Backprop != tc.K {
					t.Errorf("truncated %v, full %v, backprop %d", got, g, res.Backprop)
				}
				return
			}
			unrolled := func(x []float64) float64 {
				v := u // a copy: its own storage
				v.ring, v.x, v.batches = nil, nil, nil
				if err := v.Forward(p, x, y0); err != nil {
					t.Fatal(err)
				}
				return p.F(x, v.Final(), nil)
			}
			num := fd.Gradient(nil, unrolled, x, &fd.Settings{Formula: fd.Central, Step: 1e-5})
			e := relErr(got, num)
			t.Logf("sweep %v, central differences %v, relative difference %.2g", got, num, e)
			if e > 1e-6 {
				t.Errorf("relative difference %.3g > 1e-6", e)
			}
		})
	}
}

// TestNonquadraticOracles validates the hand-written test problem itself
// against finite differences, since the FD test above relies on it.
func TestNonquadraticOracles(t *testing.T) {
	p := newNonquadratic(t, 3, 6, 5)
	x := []float64{0.5, -0.3, 0.8}
	y := []float64{0.2, -0.1, 0.3, 0.4, 1, -1}
	v := []float64{1, 2, -1, 0.5, 0, 1}
	batch := []int{1, 4, 5}
	set := &fd.Settings{Formula: fd.Central, Step: 1e-6}
	gx, gy := make([]float64, 3), make([]float64, 6)
	p.GradG(gx, gy, x, y, batch)
	numX := fd.Gradient(nil, func(x []float64) float64 { return p.G(x, y, batch) }, x, set)
	numY := fd.Gradient(nil, func(y []float64) float64 { return p.G(x, y, batch) }, y, set)
	hv, mx := make([]float64, 6), make([]float64, 3)
	p.HVP(hv, x, y, v, batch)
	p.MixedXY(mx, x, y, v, batch)
	gyv := func(x, y []float64) float64 {
		g := make([]float64, 6)
		p.GradG(nil, g, x, y, batch)
		return floats.Dot(g, v)
	}
	numH := fd.Gradient(nil, func(y []float64) float64 { return gyv(x, y) }, y, set)
	numM := fd.Gradient(nil, func(x []float64) float64 { return gyv(x, y) }, x, set)
	fx, fy := make([]float64, 3), make([]float64, 6)
	p.GradF(fx, fy, x, y, nil)
	numFx := fd.Gradient(nil, func(x []float64) float64 { return p.F(x, y, nil) }, x, set)
	numFy := fd.Gradient(nil, func(y []float64) float64 { return p.F(x, y, nil) }, y, set)
	for _, c := range []struct {
		name      string
		got, want []float64
	}{
		{"∇x g", gx, numX}, {"∇y g", gy, numY}, {"HVP", hv, numH},
		{"MixedXY", mx, numM}, {"∇x f", fx, numFx}, {"∇y f", fy, numFy},
	} {
		if e := relErr(c.got, c.want); e > 1e-7 {
			t.Errorf("%s: %v, finite differences %v (%.3g)", c.name, c.got, c.want, e)
		}
	}
}

func TestResultCounts(t *testing.T) {
	p := newQuadratic(t, 2, linspaceEig(1, 2, 5), 6)
	for _, tc := range []struct {
		T, K, backprop int
	}{{50, 0, 50}, {50, 10, 10}, {50, 1, 1}, {0, 0, 0}} {
		u := Unroller{Steps: tc.T, Truncate: tc.K, Alpha: 0.3, Momentum: 0.2}
		res, err := u.Hypergradient(make([]float64, 2), p, []float64{1, 1}, make([]float64, 5), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Result{Steps: tc.T, Backprop: tc.backprop, StorageBytes: (tc.backprop + 1) * 5 * 8,
			Calls: oracle.Calls{GradG: int64(tc.T), GradF: 1, HVP: int64(max(tc.backprop-1, 0)), MixedXY: int64(tc.backprop)}}
		if res != want {
			t.Errorf("T = %d, K = %d: result %+v, want %+v", tc.T, tc.K, res, want)
		}
	}
}

func TestBackwardDoesNotAllocate(t *testing.T) {
	p := &diagProblem{d: []float64{1, 2, 3, 4}, b: []float64{1, -1, 0.5, 2}}
	u := Unroller{Steps: 20, Alpha: 0.2, Momentum: 0.5}
	x, y0 := []float64{0.5, 1, -1, 2}, make([]float64, 4)
	dst := make([]float64, 4)
	if _, err := u.Hypergradient(dst, p, x, y0, nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { u.Backward(dst, nil, p, nil) }); n != 0 {
		t.Errorf("Backward: %v allocations per run", n)
	}
	if n := testing.AllocsPerRun(10, func() { u.Forward(p, x, y0) }); n != 0 {
		t.Errorf("Forward: %v allocations per run", n)
	}
}

func TestErrors(t *testing.T) {
	p := newQuadratic(t, 2, []float64{1, 10}, 7)
	x, y0 := []float64{1, 1}, []float64{0, 0}
	dst := make([]float64, 2)
	for _, u := range []Unroller{
		{Steps: 5, Alpha: 0},
		{Steps: 5, Alpha: math.NaN()},
		{Steps: 5, Alpha: 0.1, Momentum: 1},
		{Steps: -1, Alpha: 0.1},
		{Steps: 5, Alpha: 0.1, Truncate: -2},
	} {
		if _, err := u.Hypergradient(dst, p, x, y0, nil); err == nil {
			t.Errorf("%+v: no error", u)
		}
	}
	var u Unroller
	if _, err := u.Backward(dst, nil, p, nil); !errors.Is(err, ErrNoForward) {
		t.Errorf("Backward before Forward: %v", err)
	}
	// α·λmax = 50: the iterates blow up and the error names the step.
	u = Unroller{Steps: 2000, Alpha: 5}
	_, err := u.Hypergradient(dst, p, x, y0, nil)
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Phase != "forward" || nf.Step < 100 {
		t.Fatalf("want a forward NonFiniteError, got %v", err)
	}
	if _, err := u.Backward(dst, nil, p, nil); !errors.Is(err, ErrNoForward) {
		t.Errorf("Backward after a failed Forward: %v", err)
	}
	t.Log(err)
}

// diagProblem is an allocation-free problem for the allocation test:
// g = Σ ½ d_i y_i² − b_i x_i y_i, f = ½‖y‖² + ½‖x‖².
type diagProblem struct{ d, b []float64 }

func (p *diagProblem) F(x, y []float64, _ []int) float64 {
	return 0.5 * (floats.Dot(x, x) + floats.Dot(y, y))
}
func (p *diagProblem) GradF(dx, dy, x, y []float64, _ []int) {
	copy(dx, x)
	copy(dy, y)
}
func (p *diagProblem) GradG(dx, dy, x, y []float64, _ []int) {
	for i := range y {
		if dx != nil {
			dx[i] = -p.b[i] * y[i]
		}
		if dy != nil {
			dy[i] = p.d[i]*y[i] - p.b[i]*x[i]
		}
	}
}
func (p *diagProblem) HVP(dst, _, _, v []float64, _ []int) {
	for i := range v {
		dst[i] = p.d[i] * v[i]
	}
}
func (p *diagProblem) MixedXY(dst, _, _, v []float64, _ []int) {
	for i := range v {
		dst[i] = -p.b[i] * v[i]
	}
}

// TestFirstAdjoint checks the first adjoint of the sweep: with K' = T it is
// the gradient of y_0 ↦ f(x, y_T(y_0)) (ANIL's gradient for the head
// initialization), against central differences (1e-7); with K' < T it is
// the gradient with respect to y_{T−K'}, that of the unroll of K' steps
// from y_{T−K'}; asking for it costs one more HVP and leaves dst as it is.
func TestFirstAdjoint(t *testing.T) {
	p := newNonquadratic(t, 3, 5, 4)
	x := []float64{0.4, -0.2, 0.7}
	y0 := []float64{0.1, -0.3, 0.2, 0.5, -0.1}
	for _, beta := range []float64{0, 0.4} {
		u := Unroller{Steps: 8, Alpha: 0.2, Momentum: beta}
		if err := u.Forward(p, x, y0); err != nil {
			t.Fatal(err)
		}
		dx, dx2, dy0 := make([]float64, 3), make([]float64, 3), make([]float64, 5)
		r1, err1 := u.Backward(dx, nil, p, nil)
		r2, err2 := u.Backward(dx2, dy0, p, nil)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !floats.Equal(dx, dx2) || r2.Calls.HVP != r1.Calls.HVP+1 {
			t.Errorf("β = %v: dst %v with the adjoint, %v without; HVPs %d and %d", beta, dx2, dx, r2.Calls.HVP, r1.Calls.HVP)
		}
		fy0 := func(y []float64) float64 {
			v := Unroller{Steps: 8, Alpha: 0.2, Momentum: beta}
			if err := v.Forward(p, x, y); err != nil {
				t.Fatal(err)
			}
			return p.F(x, v.Final(), nil)
		}
		want := fd.Gradient(nil, fy0, y0, &fd.Settings{Formula: fd.Central, Step: 1e-5})
		if e := relErr(dy0, want); e > 1e-7 {
			t.Errorf("β = %v: a_0 = %v, finite differences %v (%.3g)", beta, dy0, want, e)
		}
	}
	// Truncated: a_{T−K} of T = 8, K = 3 is a_0 of the 3 steps from y_5.
	u := Unroller{Steps: 8, Alpha: 0.2, Truncate: 3}
	if err := u.Forward(p, x, y0); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, 5)
	if _, err := u.Backward(make([]float64, 3), got, p, nil); err != nil {
		t.Fatal(err)
	}
	five := Unroller{Steps: 5, Alpha: 0.2}
	if err := five.Forward(p, x, y0); err != nil {
		t.Fatal(err)
	}
	three := Unroller{Steps: 3, Alpha: 0.2}
	if err := three.Forward(p, x, five.Final()); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 5)
	if _, err := three.Backward(make([]float64, 3), want, p, nil); err != nil {
		t.Fatal(err)
	}
	if !floats.Equal(got, want) {
		t.Errorf("truncated first adjoint %v, want that of the last 3 steps %v", got, want)
	}
}

// TestDescend: Descend is Forward's gradient descent without storage, bit
// for bit, with the same batches, and stops at the first non-finite
// iterate.
func TestDescend(t *testing.T) {
	p := newNonquadratic(t, 3, 5, 5)
	x := []float64{0.4, -0.2, 0.7}
	y0 := []float64{0.1, -0.3, 0.2, 0.5, -0.1}
	batch := func(t int) []int { return []int{t % 4, (t + 1) % 4} }
	u := Unroller{Steps: 7, Alpha: 0.3, Batch: batch}
	if err := u.Forward(p, x, y0); err != nil {
		t.Fatal(err)
	}
	y := append([]float64(nil), y0...)
	if err := Descend(p, x, y, 7, 0.3, batch, nil); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if math.Float64bits(y[i]) != math.Float64bits(u.Final()[i]) {
			t.Fatalf("Descend %v, Forward %v", y, u.Final())
		}
	}
	q := newQuadratic(t, 2, []float64{1, 10}, 7)
	var nf *NonFiniteError
	if err := Descend(q, []float64{1, 1}, []float64{0, 0}, 2000, 5, nil, nil); !errors.As(err, &nf) || nf.Phase != "forward" {
		t.Errorf("diverging descent: error %v, want a forward *NonFiniteError", err)
	}
}
