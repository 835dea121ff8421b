package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// TestPLGameGraph checks the PL game's graph with graph.Check, its exact
// matrices against the oracles, the well-posedness fix (R2ᵀx ∈ range(Q))
// and ∇Φ = M x against a finite difference of Φ(x) = f(x, −Q⁺R2ᵀx).
func TestPLGameGraph(t *testing.T) {
	g := newPLGame(8, 6, 200, 1, 10, true, 1)
	obj, err := g.objective()
	if err != nil {
		t.Fatal(err)
	}
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	x, y := make([]float64, g.d), make([]float64, g.d)
	for i := range x {
		x[i], y[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	if r := graph.Check(p, x, y, nil); r.Max() > 1e-6 {
		t.Errorf("graph.Check: %v", r)
	}
	// ∇y g = Qy + R2ᵀx, ∇x f = Px + R1y.
	gy, fx := make([]float64, g.d), make([]float64, g.d)
	p.GradG(nil, gy, x, y, nil)
	p.GradF(fx, nil, x, y, nil)
	var want, t2 mat.VecDense
	want.MulVec(g.Q, mat.NewVecDense(g.d, y))
	t2.MulVec(g.R2.T(), mat.NewVecDense(g.d, x))
	want.AddVec(&want, &t2)
	if d := floats.Distance(gy, want.RawVector().Data, math.Inf(1)); d > 1e-12 {
		t.Errorf("∇y g differs from Qy + R2ᵀx by %g", d)
	}
	want.MulVec(g.P, mat.NewVecDense(g.d, x))
	t2.MulVec(g.R1, mat.NewVecDense(g.d, y))
	want.AddVec(&want, &t2)
	if d := floats.Distance(fx, want.RawVector().Data, math.Inf(1)); d > 1e-12 {
		t.Errorf("∇x f differs from Px + R1y by %g", d)
	}
	// The fix: Q Q⁺ R2ᵀ x = R2ᵀ x.
	var qinv, proj mat.Dense
	pinv(&qinv, g.Q, 1e-9)
	proj.Mul(g.Q, &qinv)
	t2.MulVec(g.R2.T(), mat.NewVecDense(g.d, x))
	var back mat.VecDense
	back.MulVec(&proj, &t2)
	if d := floats.Distance(back.RawVector().Data, t2.RawVector().Data, math.Inf(1)); d > 1e-10*mat.Norm(&t2, math.Inf(1)) {
		t.Errorf("R2ᵀx leaves range(Q) by %g", d)
	}
	// ∇Φ(x) = M x against central differences of Φ.
	phi := func(x []float64) float64 {
		var ys mat.VecDense
		ys.MulVec(g.R2.T(), mat.NewVecDense(g.d, x))
		ys.MulVec(&qinv, &ys)
		ys.ScaleVec(-1, &ys)
		return p.F(x, ys.RawVector().Data, nil)
	}
	var mx mat.VecDense
	mx.MulVec(g.M, mat.NewVecDense(g.d, x))
	for i := range x {
		h := 1e-5
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		fd := (phi(xp) - phi(xm)) / (2 * h)
		if math.Abs(fd-mx.AtVec(i)) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("∇Φ[%d] = %g, finite difference %g", i, mx.AtVec(i), fd)
		}
	}
}

// TestSensing checks the matrix-sensing graph with graph.Check and the
// closed form against the graph, oracle by oracle, on full and minibatches.
func TestSensing(t *testing.T) {
	s := newSensing(6, 3, 1)
	obj, err := s.objective()
	if err != nil {
		t.Fatal(err)
	}
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	x, y := s.start(4)
	if r := graph.Check(p, x, y, nil); r.Max() > 1e-6 {
		t.Errorf("graph.Check: %v", r)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	v, u := make([]float64, s.DimY()), make([]float64, s.DimX())
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	close := func(what string, a, b []float64) {
		t.Helper()
		if d := floats.Distance(a, b, math.Inf(1)); d > 1e-10*math.Max(1, floats.Norm(b, math.Inf(1))) {
			t.Errorf("%s: closed form differs from the graph by %g", what, d)
		}
	}
	for _, batch := range [][]int{nil, {0, 3, 3, 7}} {
		ub := batch
		if math.Abs(s.F(x, y, ub)-p.F(x, y, ub)) > 1e-10 || math.Abs(s.G(x, y, batch)-p.G(x, y, batch)) > 1e-10 {
			t.Errorf("values differ: f %g %g, g %g %g", s.F(x, y, ub), p.F(x, y, ub), s.G(x, y, batch), p.G(x, y, batch))
		}
		for _, c := range []struct {
			name string
			a, b func(dst []float64)
			n    int
		}{
			{"∇x f", func(d []float64) { s.GradF(d, nil, x, y, ub) }, func(d []float64) { p.GradF(d, nil, x, y, ub) }, s.DimX()},
			{"∇y f", func(d []float64) { s.GradF(nil, d, x, y, ub) }, func(d []float64) { p.GradF(nil, d, x, y, ub) }, s.DimY()},
			{"∇x g", func(d []float64) { s.GradG(d, nil, x, y, batch) }, func(d []float64) { p.GradG(d, nil, x, y, batch) }, s.DimX()},
			{"∇y g", func(d []float64) { s.GradG(nil, d, x, y, batch) }, func(d []float64) { p.GradG(nil, d, x, y, batch) }, s.DimY()},
			{"HVP", func(d []float64) { s.HVP(d, x, y, v, batch) }, func(d []float64) { p.HVP(d, x, y, v, batch) }, s.DimY()},
			{"MixedXY", func(d []float64) { s.MixedXY(d, x, y, v, batch) }, func(d []float64) { p.MixedXY(d, x, y, v, batch) }, s.DimX()},
			{"MixedYX", func(d []float64) { s.MixedYX(d, x, y, u, batch) }, func(d []float64) { p.MixedYX(d, x, y, u, batch) }, s.DimY()},
		} {
			a, b := make([]float64, c.n), make([]float64, c.n)
			c.a(a)
			c.b(b)
			close(c.name, a, b)
		}
		var hs, hg mat.SymDense
		s.HessYY(&hs, x, y, batch)
		p.HessYY(&hg, x, y, batch)
		if !mat.EqualApprox(&hs, &hg, 1e-9) {
			t.Error("HessYY: closed form differs from the graph")
		}
		var xs, xg mat.Dense
		s.HessXY(&xs, x, y, batch)
		p.HessXY(&xg, x, y, batch)
		if !mat.EqualApprox(&xs, &xg, 1e-9) {
			t.Error("HessXY: closed form differs from the graph")
		}
	}
	if e := s.relErr(x, y); !(e > 0.5) {
		t.Errorf("relative error at a random start %g; want about 1 or more", e)
	}
}
