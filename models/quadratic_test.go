package models

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

func mulVec(a mat.Matrix, v []float64) []float64 {
	r, _ := a.Dims()
	out := mat.NewVecDense(r, nil)
	out.MulVec(a, mat.NewVecDense(len(v), append([]float64{}, v...)))
	return out.RawVector().Data
}

var quadraticCases = []struct {
	name string
	s    QuadraticSettings
}{
	{"deterministic", QuadraticSettings{DimX: 4, DimY: 6, Rho: 0.3, Cond: 50, Seed: 1}},
	{"deterministic, ρ = 0, c = 0", QuadraticSettings{DimX: 3, DimY: 5, NoShift: true, Seed: 2}},
	{"stochastic", QuadraticSettings{DimX: 4, DimY: 6, Rho: 0.3, LowerSamples: 9, UpperSamples: 5, Seed: 3}},
	{"stochastic, c = 0", QuadraticSettings{DimX: 5, DimY: 3, Rho: 1, NoShift: true, LowerSamples: 4, Noise: 0.9, Seed: 4}},
}

// TestQuadraticOracles compares every graph oracle of the quadratic on the
// full data with its closed form: ∇y g = Ay − Bx + c, ∇x g = −Bᵀy,
// ∇yy g·v = Av, ∇xy g·v = −Bᵀv, ∇yx g·u = −Bu, ∇y f = y − b, ∇x f = ρx.
func TestQuadraticOracles(t *testing.T) {
	const tol = 1e-12
	for _, c := range quadraticCases {
		t.Run(c.name, func(t *testing.T) {
			q, err := Quadratic(c.s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := q.Compile()
			if err != nil {
				t.Fatal(err)
			}
			m, n := c.s.DimX, c.s.DimY
			if p.DimX() != m || p.DimY() != n || p.NumLower() != max(c.s.LowerSamples, 1) || p.NumUpper() != max(c.s.UpperSamples, 1) {
				t.Fatalf("dims %d, %d, samples %d, %d", p.DimX(), p.DimY(), p.NumLower(), p.NumUpper())
			}
			cv := q.C
			if cv == nil {
				cv = make([]float64, n)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			x, y, v, u := randVec(rng, m, 1), randVec(rng, n, 1), randVec(rng, n, 1), randVec(rng, m, 1)

			ay, bx := mulVec(q.A, y), mulVec(q.B, x)
			wantG := floats.Dot(y, ay)/2 - floats.Dot(y, bx) + floats.Dot(cv, y)
			near(t, "g", []float64{p.G(x, y, nil)}, []float64{wantG}, tol)
			d := make([]float64, n)
			floats.SubTo(d, y, q.Target)
			wantF := floats.Dot(d, d)/2 + q.Rho*floats.Dot(x, x)/2 + q.phiConst
			near(t, "f", []float64{p.F(x, y, nil)}, []float64{wantF}, tol)

			gx, gy := make([]float64, m), make([]float64, n)
			p.GradG(gx, gy, x, y, nil)
			wantGy := append([]float64{}, ay...)
			floats.Sub(wantGy, bx)
			floats.Add(wantGy, cv)
			near(t, "∇y g", gy, wantGy, tol)
			wantGx := mulVec(q.B.T(), y)
			floats.Scale(-1, wantGx)
			near(t, "∇x g", gx, wantGx, tol)

			p.GradF(gx, gy, x, y, nil)
			near(t, "∇y f", gy, d, tol)
			near(t, "∇x f", gx, floats.ScaleTo(make([]float64, m), q.Rho, x), tol)

			hv := make([]float64, n)
			p.HVP(hv, x, y, v, nil)
			near(t, "∇yy g·v", hv, mulVec(q.A, v), tol)
			l := p.Linearize(x, y, nil)
			l.HVP(hv, v)
			near(t, "linearized ∇yy g·v", hv, mulVec(q.A, v), tol)
			mx := make([]float64, m)
			p.MixedXY(mx, x, y, v, nil)
			wantMx := mulVec(q.B.T(), v)
			floats.Scale(-1, wantMx)
			near(t, "∇xy g·v", mx, wantMx, tol)
			l.MixedXY(mx, v)
			near(t, "linearized ∇xy g·v", mx, wantMx, tol)
			p.MixedYX(hv, x, y, u, nil)
			wantMy := mulVec(q.B, u)
			floats.Scale(-1, wantMy)
			near(t, "∇yx g·u", hv, wantMy, tol)
		})
	}
}

// TestQuadraticClosedForms checks y*, ∇Φ, x* and the spectrum of A: ∇y g
// vanishes at y*(x); the closed-form ∇Φ equals
// ∇x f − ∇xy g [∇yy g]⁻¹ ∇y f assembled from the graph's dense oracles and
// a dense solve; ∇Φ(x*) = 0 and Φ grows around x*.
func TestQuadraticClosedForms(t *testing.T) {
	for _, c := range quadraticCases {
		t.Run(c.name, func(t *testing.T) {
			q, err := Quadratic(c.s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := q.Compile()
			if err != nil {
				t.Fatal(err)
			}
			m, n := c.s.DimX, c.s.DimY

			var es mat.EigenSym
			if !es.Factorize(q.A, false) {
				t.Fatal("eigenvalues of A")
			}
			ev := es.Values(nil)
			mu, cond := 1.0, c.s.Cond
			if cond == 0 {
				cond = 10
			}
			if math.Abs(ev[0]-mu) > 1e-12 || math.Abs(ev[n-1]-mu*cond) > 1e-12*cond {
				t.Errorf("eigenvalues of A span [%v, %v]; want [%v, %v]", ev[0], ev[n-1], mu, mu*cond)
			}

			rng := rand.New(rand.NewPCG(7, 8))
			for k := 0; k < 3; k++ {
				x := randVec(rng, m, 1)
				ys := q.YStar(nil, x)
				gy := make([]float64, n)
				p.GradG(nil, gy, x, ys, nil)
				if e := floats.Norm(gy, 2); e > 1e-12 {
					t.Errorf("‖∇y g(x, y*(x))‖ = %.2e", e)
				}
				near(t, "Φ = f(x, y*)", []float64{q.Phi(x)}, []float64{p.F(x, ys, nil)}, 1e-12)

				var hyy mat.SymDense
				p.HessYY(&hyy, x, ys, nil)
				var hxy mat.Dense
				p.HessXY(&hxy, x, ys, nil)
				fx, fy := make([]float64, m), make([]float64, n)
				p.GradF(fx, fy, x, ys, nil)
				var w mat.VecDense
				if err := w.SolveVec(&hyy, mat.NewVecDense(n, fy)); err != nil {
					t.Fatal(err)
				}
				want := mulVec(&hxy, w.RawVector().Data)
				floats.Scale(-1, want)
				floats.Add(want, fx)
				near(t, "∇Φ against the oracles", q.HyperGrad(nil, x), want, 1e-10)
			}

			xs := q.XStar(nil)
			if e := floats.Norm(q.HyperGrad(nil, xs), 2); e > 1e-10 {
				t.Errorf("‖∇Φ(x*)‖ = %.2e", e)
			}
			phi := q.Phi(xs)
			for k := 0; k < 5; k++ {
				z := randVec(rng, m, 1e-3)
				floats.Add(z, xs)
				if q.Phi(z) < phi {
					t.Errorf("Φ(x* + δ) = %v < Φ(x*) = %v", q.Phi(z), phi)
				}
			}
		})
	}
}

// TestQuadraticStochastic checks that the oracles on single-sample batches
// average to the full-data oracles, that sample i's Hessian is A_i, and
// that every A_i stays within Noise·μ of A.
func TestQuadraticStochastic(t *testing.T) {
	const tol = 1e-12
	s := QuadraticSettings{DimX: 4, DimY: 6, Rho: 0.3, LowerSamples: 9, UpperSamples: 5, Noise: 0.8, Seed: 9}
	q, err := Quadratic(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Compile()
	if err != nil {
		t.Fatal(err)
	}
	m, n := s.DimX, s.DimY
	rng := rand.New(rand.NewPCG(9, 10))
	x, y, v := randVec(rng, m, 1), randVec(rng, n, 1), randVec(rng, n, 1)

	full, one, sum := make([]float64, n), make([]float64, n), make([]float64, n)
	fullX, oneX, sumX := make([]float64, m), make([]float64, m), make([]float64, m)
	p.HVP(full, x, y, v, nil)
	p.MixedXY(fullX, x, y, v, nil)
	var es mat.EigenSym
	for i := 0; i < s.LowerSamples; i++ {
		p.HVP(one, x, y, v, []int{i})
		ai, _, _ := q.Sample(i)
		near(t, "single-sample ∇yy g·v = A_i v", one, mulVec(ai, v), tol)
		floats.Add(sum, one)
		p.MixedXY(oneX, x, y, v, []int{i})
		floats.Add(sumX, oneX)

		neg := mat.NewSymDense(n, nil)
		neg.ScaleSym(-1, q.A)
		dev := mat.NewSymDense(n, nil)
		dev.AddSym(ai, neg)
		es.Factorize(dev, false)
		ev := es.Values(nil)
		if r := math.Max(-ev[0], ev[n-1]); r > s.Noise*(1+1e-12) {
			t.Errorf("‖A_%d − A‖₂ = %v > Noise·μ = %v", i, r, s.Noise)
		}
	}
	floats.Scale(1/float64(s.LowerSamples), sum)
	floats.Scale(1/float64(s.LowerSamples), sumX)
	near(t, "mean of single-sample HVPs", sum, full, tol)
	near(t, "mean of single-sample ∇xy g·v", sumX, fullX, tol)

	p.GradG(nil, full, x, y, nil)
	floats.Scale(0, sum)
	for i := 0; i < s.LowerSamples; i++ {
		p.GradG(nil, one, x, y, []int{i})
		floats.Add(sum, one)
	}
	floats.Scale(1/float64(s.LowerSamples), sum)
	near(t, "mean of single-sample ∇y g", sum, full, tol)

	p.GradF(nil, full, x, y, nil)
	floats.Scale(0, sum)
	fsum := 0.0
	for j := 0; j < s.UpperSamples; j++ {
		p.GradF(nil, one, x, y, []int{j})
		floats.Add(sum, one)
		fsum += p.F(x, y, []int{j})
		bj := q.UpperSample(j)
		want := append([]float64{}, y...)
		floats.Sub(want, bj)
		near(t, "single-sample ∇y f = y − b_j", one, want, tol)
	}
	floats.Scale(1/float64(s.UpperSamples), sum)
	near(t, "mean of single-sample ∇y f", sum, full, tol)
	near(t, "mean of single-sample f", []float64{fsum / float64(s.UpperSamples)}, []float64{p.F(x, y, nil)}, tol)
}

// TestQuadraticOf rebuilds a random problem from its matrices.
func TestQuadraticOf(t *testing.T) {
	q, err := Quadratic(QuadraticSettings{DimX: 3, DimY: 4, Rho: 0.5, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := QuadraticOf(q.A, q.B, q.C, q.Target, q.Rho)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.1, -2, 0.7}
	near(t, "∇Φ", r.HyperGrad(nil, x), q.HyperGrad(nil, x), 1e-14)
	near(t, "x*", r.XStar(nil), q.XStar(nil), 1e-14)
	near(t, "Φ", []float64{r.Phi(x)}, []float64{q.Phi(x)}, 1e-14)
}

func TestQuadraticErrors(t *testing.T) {
	notPD := mat.NewSymDense(2, []float64{1, 2, 2, 1})
	for _, c := range []struct {
		name, want string
		err        func() error
	}{
		{"no dims", "DimX and DimY", func() error { _, err := Quadratic(QuadraticSettings{DimY: 3}); return err }},
		{"cond < 1", "Cond", func() error { _, err := Quadratic(QuadraticSettings{DimX: 2, DimY: 3, Cond: 0.5}); return err }},
		{"noise ≥ 1", "Noise", func() error { _, err := Quadratic(QuadraticSettings{DimX: 2, DimY: 3, Noise: 1}); return err }},
		{"ρ < 0", "ρ", func() error { _, err := Quadratic(QuadraticSettings{DimX: 2, DimY: 3, Rho: -1}); return err }},
		{"ρ = 0, m > n", "no unique minimizer", func() error { _, err := Quadratic(QuadraticSettings{DimX: 4, DimY: 3}); return err }},
		{"negative samples", "sample counts", func() error {
			_, err := Quadratic(QuadraticSettings{DimX: 2, DimY: 3, LowerSamples: -1})
			return err
		}},
		{"A not PD", "not positive definite", func() error {
			_, err := QuadraticOf(notPD, mat.NewDense(2, 1, []float64{1, 1}), nil, []float64{0, 0}, 1)
			return err
		}},
		{"B rows", "B has 3 rows", func() error {
			_, err := QuadraticOf(mat.NewSymDense(2, []float64{1, 0, 0, 1}), mat.NewDense(3, 1, nil), nil, []float64{0, 0}, 1)
			return err
		}},
		{"b length", "b has length 1", func() error {
			_, err := QuadraticOf(mat.NewSymDense(2, []float64{1, 0, 0, 1}), mat.NewDense(2, 1, nil), nil, []float64{0}, 1)
			return err
		}},
	} {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one mentioning %q", c.name, err, c.want)
		}
	}
}
