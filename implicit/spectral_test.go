package implicit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// randSym returns a random symmetric n×n row-major matrix with eigenvalues
// spread over [lo, hi] (some negative when lo < 0).
func randSym(rnd *rand.Rand, n int, lo, hi float64) []float64 {
	g := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			g.Set(i, j, rnd.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	a := make([]float64, n*n)
	for i := range n {
		for j := i; j < n; j++ {
			var v float64
			for k := range n {
				v += q.At(i, k) * (lo + (hi-lo)*float64(k)/float64(n-1)) * q.At(j, k)
			}
			a[i*n+j], a[j*n+i] = v, v
		}
	}
	return a
}

// symEigs returns the ascending eigenvalues of the symmetric part of a.
func symEigs(t *testing.T, a []float64, n int) []float64 {
	t.Helper()
	s := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			s.SetSym(i, j, (a[i*n+j]+a[j*n+i])/2)
		}
	}
	var e mat.EigenSym
	if !e.Factorize(s, false) {
		t.Fatal("eigendecomposition failed")
	}
	return e.Values(nil)
}

// TestSpectral: the eigenvalue floor of paper 000, eq. 9b (P̲ onto
// {H ⪰ μI}) and the clip S_[μ,L_g] of paper 001 give matrices with
// eigenvalues in [μ, L_g], keep the eigenvalues already inside and the
// eigenvectors, leave a matrix with λ ∈ [μ, L_g] unchanged bit for bit, are
// idempotent up to rounding (1e-13), and solve with the projected matrix.
func TestSpectral(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	const n, mu = 6, 0.3
	for _, c := range []struct {
		name   string
		lo, hi float64 // spectrum of the input
		upper  float64 // L_g of the clip (0: floor only)
	}{
		{"indefinite, floor", -2, 3, 0},
		{"near singular, floor", 1e-9, 1, 0},
		{"indefinite, clip [μ, 2]", -2, 3, 2},
	} {
		a := randSym(rnd, n, c.lo, c.hi)
		s := Spectral{Lo: mu, Hi: c.upper}
		upper := c.upper
		if upper == 0 {
			upper = math.Inf(1)
		}
		got := make([]float64, n*n)
		if err := s.Factorize(got, a, n); err != nil {
			t.Fatal(err)
		}
		ev, evIn := symEigs(t, got, n), symEigs(t, a, n)
		if ev[0] < mu*(1-1e-12) || ev[n-1] > upper*(1+1e-12) {
			t.Errorf("%s: projected eigenvalues %v outside [%v, %v]", c.name, ev, mu, upper)
		}
		for i, v := range evIn { // eigenvalues of P(a) are clip(eigenvalues of a)
			if want := math.Min(math.Max(v, mu), upper); math.Abs(ev[i]-want) > 1e-12 {
				t.Errorf("%s: eigenvalue %d = %v, want clip(%v) = %v", c.name, i, ev[i], v, want)
			}
		}
		again := make([]float64, n*n)
		if err := s.Factorize(again, got, n); err != nil {
			t.Fatal(err)
		}
		if d := floats.Distance(again, got, 2); d > 1e-13*floats.Norm(got, 2) {
			t.Errorf("%s: not idempotent: ‖P(P(a)) − P(a)‖ = %.3g", c.name, d)
		}
		b, x, hx := []float64{1, -2, 0.5, 3, 0, 1}, make([]float64, n), make([]float64, n)
		if err := s.Factorize(got, a, n); err != nil {
			t.Fatal(err)
		}
		s.Solve(x, b)
		denseOp(got, n)(hx, x)
		if d := floats.Distance(hx, b, 2); d > 1e-12*floats.Norm(b, 2)/mu {
			t.Errorf("%s: ‖P(a) H⁻¹b − b‖ = %.3g", c.name, d)
		}
	}
	// A matrix with λmin ≥ μ (and λmax ≤ L_g) is left unchanged, bit for bit.
	a := randSym(rnd, n, mu*1.01, 4) // exactly symmetric
	if ev := symEigs(t, a, n); ev[0] < mu {
		t.Fatalf("test matrix has λmin %v < μ", ev[0])
	}
	got := make([]float64, n*n)
	for _, hi := range []float64{0, 5} {
		s := Spectral{Lo: mu, Hi: hi}
		if err := s.Factorize(got, a, n); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if math.Float64bits(got[i]) != math.Float64bits(a[i]) {
				t.Errorf("L_g = %v: a matrix with eigenvalues in [μ, L_g] was changed: ‖Δ‖ = %.3g", hi, floats.Distance(got, a, 2))
				break
			}
		}
	}
	// Non-finite input is an error, not a panic.
	a[0] = math.NaN()
	s := Spectral{Lo: mu}
	if err := s.Factorize(got, a, n); err == nil {
		t.Error("NaN matrix: no error")
	}
}
