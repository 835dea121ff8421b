package optim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// eqQuadratic is the quadratic of quadratic_test.go with equality
// constraints on both levels (paper 004, eq. 1):
//
//	X = {x : D x = e},   Y(x) = {y : C y + H x = d},
//
// C 3×5 of rank 2 (row 3 = row 1 + row 2), D 2×3 of rank 1 (row 2 = 2·row 1),
// H = C G so that d − H x ∈ Ran(C) for every x (Assumption 4); H = 0 for
// the uncoupled variant.
//
// Closed form (null-space method). With Z an orthonormal basis of Ker C and
// C⁺ the pseudo-inverse, every y ∈ Y(x) is y = C⁺(d − Hx) + Z z, and
// minimizing ½yᵀAy − yᵀBx over z gives
//
//	y*(x) = y_p + Z (ZᵀAZ)⁻¹ Zᵀ (B x − A y_p),   y_p = C⁺(d − H x),
//
// affine in x: y*(x) = M x + m₀ with M = ∇y*(x) = −C⁺H + Z(ZᵀAZ)⁻¹Zᵀ(B + AC⁺H),
// which is eq. 8 of paper 004 with ∇yx g = −B, ∇yy g = A, ∇h = H. Then
// Φ(x) = ½‖Mx + m₀ − c‖² + ½μ‖x‖², ∇Φ(x) = Mᵀ(Mx + m₀ − c) + μx, and with W a
// basis of Ker D, x* = D⁺e + W v*, (Wᵀ(MᵀM + μI)W) v* = Wᵀ(Mᵀ(c − m₀) − (MᵀM + μI)D⁺e).
// TestEqQuadraticClosedForm checks both against dense KKT solves.
type eqQuadratic struct {
	*quadratic
	cm, hm, dm *mat.Dense // C, H, D
	d, e       []float64
	lower      *LowerEquality
	upper      *LinearEquality
	mm         *mat.Dense // M
	m0         []float64
}

func newEqQuadratic(t testing.TB, q *quadratic, coupled bool) *eqQuadratic {
	t.Helper()
	rnd := rand.New(rand.NewPCG(11, 13))
	cm := mat.NewDense(3, 5, nil)
	for j := range 5 {
		cm.Set(0, j, rnd.NormFloat64())
		cm.Set(1, j, rnd.NormFloat64())
		cm.Set(2, j, cm.At(0, j)+cm.At(1, j))
	}
	yc := mat.NewVecDense(5, []float64{0.3, -0.2, 0.5, 0.1, -0.4})
	var dv mat.VecDense
	dv.MulVec(cm, yc)
	hm := mat.NewDense(3, 3, nil)
	if coupled {
		gm := mat.NewDense(5, 3, nil)
		for i := range 5 {
			for j := range 3 {
				gm.Set(i, j, 0.5*rnd.NormFloat64())
			}
		}
		hm.Mul(cm, gm)
	}
	dm := mat.NewDense(2, 3, []float64{1, 1, 1, 2, 2, 2})
	e := []float64{0.5, 1}
	var h Coupling
	if coupled {
		h = NewLinearCoupling(hm)
	}
	lower, err := NewLowerEquality(cm, mat.Col(nil, 0, &dv), h)
	if err != nil {
		t.Fatal(err)
	}
	upper, err := NewLinearEquality(dm, e)
	if err != nil {
		t.Fatal(err)
	}
	p := &eqQuadratic{quadratic: q, cm: cm, hm: hm, dm: dm, d: mat.Col(nil, 0, &dv), e: e, lower: lower, upper: upper}
	p.m0 = p.yStar(make([]float64, 3))
	p.mm = mat.NewDense(5, 3, nil)
	for j := range 3 {
		ej := make([]float64, 3)
		ej[j] = 1
		col := p.yStar(ej)
		floats.Sub(col, p.m0)
		p.mm.SetCol(j, col)
	}
	return p
}

// nullBasis returns an orthonormal basis of Ker a and the pseudo-inverse of
// a, from a full SVD.
func aipodNullBasis(a *mat.Dense) (z, pinv *mat.Dense) {
	r, c := a.Dims()
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDFull) {
		panic("SVD failed")
	}
	s := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	rank := 0
	for rank < len(s) && s[rank] > 1e-10*s[0] {
		rank++
	}
	z = mat.DenseCopyOf(v.Slice(0, c, rank, c))
	pinv = mat.NewDense(c, r, nil)
	for k := range rank {
		for i := range c {
			for j := range r {
				pinv.Set(i, j, pinv.At(i, j)+v.At(i, k)*u.At(j, k)/s[k])
			}
		}
	}
	return z, pinv
}

// yStar is the null-space closed form of y*(x).
func (p *eqQuadratic) yStar(x []float64) []float64 {
	z, pinv := aipodNullBasis(p.cm)
	rhs := mat.NewVecDense(3, nil)
	rhs.MulVec(p.hm, mat.NewVecDense(3, append([]float64(nil), x...)))
	rhs.SubVec(mat.NewVecDense(3, append([]float64(nil), p.d...)), rhs)
	var yp, bx, r, zr, sol, y mat.VecDense
	yp.MulVec(pinv, rhs)
	bx.MulVec(p.b, mat.NewVecDense(3, append([]float64(nil), x...)))
	r.MulVec(p.a, &yp)
	r.SubVec(&bx, &r)
	zr.MulVec(z.T(), &r)
	var zaz mat.Dense
	zaz.Product(z.T(), p.a, z)
	if err := sol.SolveVec(&zaz, &zr); err != nil {
		panic(err)
	}
	y.MulVec(z, &sol)
	y.AddVec(&y, &yp)
	return mat.Col(nil, 0, &y)
}

// yStarKKT solves the KKT system [A Cᵣᵀ; Cᵣ 0][y; λ] = [Bx; dᵣ − Hᵣx] with
// the two independent rows of C.
func (p *eqQuadratic) yStarKKT(x []float64) []float64 {
	k := mat.NewDense(7, 7, nil)
	rhs := mat.NewVecDense(7, nil)
	var bx mat.VecDense
	bx.MulVec(p.b, mat.NewVecDense(3, append([]float64(nil), x...)))
	for i := range 5 {
		for j := range 5 {
			k.Set(i, j, p.a.At(i, j))
		}
		rhs.SetVec(i, bx.AtVec(i))
	}
	for r := range 2 {
		hx := 0.0
		for j := range 3 {
			hx += p.hm.At(r, j) * x[j]
		}
		for j := range 5 {
			k.Set(5+r, j, p.cm.At(r, j))
			k.Set(j, 5+r, p.cm.At(r, j))
		}
		rhs.SetVec(5+r, p.d[r]-hx)
	}
	var sol mat.VecDense
	if err := sol.SolveVec(k, rhs); err != nil {
		panic(err)
	}
	return mat.Col(nil, 0, sol.SliceVec(0, 5))
}

// phiHessian returns MᵀM + μI and the gradient offset Mᵀ(m₀ − c).
func (p *eqQuadratic) phiHessian() (*mat.Dense, []float64) {
	var h mat.Dense
	h.Mul(p.mm.T(), p.mm)
	for i := range 3 {
		h.Set(i, i, h.At(i, i)+p.mu)
	}
	r := append([]float64(nil), p.m0...)
	floats.Sub(r, p.c)
	var g mat.VecDense
	g.MulVec(p.mm.T(), mat.NewVecDense(5, r))
	return &h, mat.Col(nil, 0, &g)
}

// solution returns the null-space closed form of x*.
func (p *eqQuadratic) solution() []float64 {
	w, pinv := aipodNullBasis(p.dm)
	h, g := p.phiHessian()
	var xp mat.VecDense
	xp.MulVec(pinv, mat.NewVecDense(2, append([]float64(nil), p.e...)))
	var hx, rhs, wr mat.VecDense
	hx.MulVec(h, &xp)
	rhs.AddVec(&hx, mat.NewVecDense(3, g))
	wr.MulVec(w.T(), &rhs)
	wr.ScaleVec(-1, &wr)
	var whw mat.Dense
	whw.Product(w.T(), h, w)
	var v, x mat.VecDense
	if err := v.SolveVec(&whw, &wr); err != nil {
		panic(err)
	}
	x.MulVec(w, &v)
	x.AddVec(&x, &xp)
	return mat.Col(nil, 0, &x)
}

// solutionKKT solves [MᵀM + μI, Dᵣᵀ; Dᵣ, 0][x; ν] = [Mᵀ(c − m₀); eᵣ] with the
// independent first row of D.
func (p *eqQuadratic) solutionKKT() []float64 {
	h, g := p.phiHessian()
	k := mat.NewDense(4, 4, nil)
	rhs := mat.NewVecDense(4, nil)
	for i := range 3 {
		for j := range 3 {
			k.Set(i, j, h.At(i, j))
		}
		k.Set(3, i, p.dm.At(0, i))
		k.Set(i, 3, p.dm.At(0, i))
		rhs.SetVec(i, -g[i])
	}
	rhs.SetVec(3, p.e[0])
	var sol mat.VecDense
	if err := sol.SolveVec(k, rhs); err != nil {
		panic(err)
	}
	return mat.Col(nil, 0, sol.SliceVec(0, 3))
}

// hypergrad returns ∇Φ(x) = Mᵀ(Mx + m₀ − c) + μx (unprojected).
func (p *eqQuadratic) hypergrad(x []float64) []float64 {
	h, g := p.phiHessian()
	var hx mat.VecDense
	hx.MulVec(h, mat.NewVecDense(3, append([]float64(nil), x...)))
	out := mat.Col(nil, 0, &hx)
	floats.Add(out, g)
	return out
}

// phi returns Φ(x) = f(x, y*(x)) on the whole upper data set.
func (p *eqQuadratic) phi(x []float64) float64 { return p.F(x, p.yStar(x), nil) }

// TestEqQuadraticClosedForm checks the closed forms of eqQuadratic against
// dense KKT solves, the matrix M against eq. 8 (Lemma 2) written with the
// basis Z of Ker C, and ∇Φ against finite differences of Φ.
func TestEqQuadraticClosedForm(t *testing.T) {
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, testProblem(t), coupled)
		for _, x := range [][]float64{{0, 0, 0}, {0.3, -1.2, 0.7}, {2, 1, -1}} {
			if d := floats.Distance(p.yStar(x), p.yStarKKT(x), math.Inf(1)); d > 1e-12 {
				t.Errorf("coupled=%v x=%v: null-space y* and KKT y* differ by %.3g", coupled, x, d)
			}
			if v := p.lower.Violation(x, p.yStar(x)); v > 1e-12 {
				t.Errorf("coupled=%v: y*(x) violates Y(x) by %.3g", coupled, v)
			}
			ref := fd.Gradient(nil, p.phi, x, &fd.Settings{Formula: fd.Central, Step: 1e-5})
			if d := floats.Distance(p.hypergrad(x), ref, math.Inf(1)); d > 1e-7 {
				t.Errorf("coupled=%v x=%v: ∇Φ %v, finite differences %v", coupled, x, p.hypergrad(x), ref)
			}
		}
		xs, xk := p.solution(), p.solutionKKT()
		if d := floats.Distance(xs, xk, math.Inf(1)); d > 1e-12 {
			t.Errorf("coupled=%v: x* null-space %v, KKT %v", coupled, xs, xk)
		}
		if v := p.upper.Violation(xs); v > 1e-12 {
			t.Errorf("coupled=%v: x* violates X by %.3g", coupled, v)
		}
		// Eq. 8: ∇y*(x) = −Z(ZᵀAZ)⁻¹Zᵀ(∇yx g − ∇yy g C⁺∇h) − C⁺∇h, ∇yx g = −B.
		z, pinv := aipodNullBasis(p.cm)
		var zaz, inv, p1, p2, ah, ch, want mat.Dense
		zaz.Product(z.T(), p.a, z)
		if err := inv.Inverse(&zaz); err != nil {
			t.Fatal(err)
		}
		p1.Product(z, &inv, z.T())
		ch.Mul(pinv, p.hm)
		ah.Mul(p.a, &ch)
		p2.Scale(-1, p.b)
		p2.Sub(&p2, &ah)
		want.Mul(&p1, &p2)
		want.Scale(-1, &want)
		want.Sub(&want, &ch)
		if !mat.EqualApprox(&want, p.mm, 1e-12) {
			t.Errorf("coupled=%v: M = ∇y* %v, eq. 8 gives %v", coupled, mat.Formatted(p.mm), mat.Formatted(&want))
		}
		// The projected gradient vanishes at x*.
		g := p.hypergrad(xs)
		p.upper.Null(g, g)
		if n := floats.Norm(g, 2); n > 1e-12 {
			t.Errorf("coupled=%v: ‖P_x ∇Φ(x*)‖ = %.3g", coupled, n)
		}
		t.Logf("coupled=%v: x* = %v, Φ(x*) = %.6f", coupled, xs, p.phi(xs))
	}
}

// TestLinearEquality checks the projection of Lemma 6 for rank-deficient
// and full-rank matrices: feasibility, idempotence, orthogonality of the
// residual to Ker A, Null(v) = Proj(v) − Proj(0), agreement with Affine for
// full row rank, and the errors for an empty set and a zero matrix.
func TestLinearEquality(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 5))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rnd.NormFloat64()
		}
		return v
	}
	full := mat.NewDense(2, 4, vec(8))
	deficient := mat.NewDense(4, 4, nil) // rank 2, more rows than rank
	for j := range 4 {
		deficient.Set(0, j, full.At(0, j))
		deficient.Set(1, j, full.At(1, j))
		deficient.Set(2, j, full.At(0, j)-3*full.At(1, j))
		deficient.Set(3, j, 2*full.At(1, j))
	}
	z0 := vec(4)
	for _, a := range []*mat.Dense{full, deficient} {
		r, _ := a.Dims()
		var bv mat.VecDense
		bv.MulVec(a, mat.NewVecDense(4, z0))
		b := mat.Col(nil, 0, &bv)
		l, err := NewLinearEquality(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if l.Rank() != 2 {
			t.Errorf("%d×4: rank %d, want 2", r, l.Rank())
		}
		x := vec(4)
		px, ppx := make([]float64, 4), make([]float64, 4)
		l.Project(px, x)
		l.Project(ppx, px)
		if v := l.Violation(px); v > 1e-13 {
			t.Errorf("%d×4: violation %.3g after projection", r, v)
		}
		if d := floats.Distance(px, ppx, math.Inf(1)); d > 1e-14 {
			t.Errorf("%d×4: projection not idempotent (%.3g)", r, d)
		}
		// x − Proj(x) ⊥ Ker A: its null-space part is zero.
		res := append([]float64(nil), x...)
		floats.Sub(res, px)
		l.Null(res, res)
		if n := floats.Norm(res, 2); n > 1e-14 {
			t.Errorf("%d×4: residual has a null-space part of norm %.3g", r, n)
		}
		nv, p0, pv := make([]float64, 4), make([]float64, 4), make([]float64, 4)
		l.Null(nv, x)
		l.Project(p0, make([]float64, 4))
		l.Project(pv, x)
		floats.Sub(pv, p0)
		if d := floats.Distance(nv, pv, math.Inf(1)); d > 1e-14 {
			t.Errorf("%d×4: Null(v) ≠ Proj(v) − Proj(0) by %.3g", r, d)
		}
		if a == full {
			af, err := NewAffine(a, b)
			if err != nil {
				t.Fatal(err)
			}
			pa := make([]float64, 4)
			af.Project(pa, x)
			if d := floats.Distance(pa, px, math.Inf(1)); d > 1e-13 {
				t.Errorf("LinearEquality and Affine differ by %.3g", d)
			}
		}
	}
	if _, err := NewLinearEquality(deficient, []float64{1, 0, 0, 0}); err == nil || !strings.Contains(err.Error(), "range") {
		t.Errorf("inconsistent b: error %v, want one about the range of A", err)
	}
	if _, err := NewLinearEquality(mat.NewDense(2, 3, nil), []float64{0, 0}); err == nil {
		t.Error("zero A: no error")
	}
	if _, err := NewLowerEquality(deficient, []float64{1, 0, 0, 0}, nil); err == nil {
		t.Error("NewLowerEquality with c outside Ran(A) and h = nil: no error")
	}
	// A coupled set whose c − h(x) leaves Ran(A) fails at projection time.
	bad, err := NewLowerEquality(deficient, make([]float64, 4), NewLinearCoupling(mat.NewDense(4, 1, []float64{1, 0, 0, 0})))
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Project(make([]float64, 4), []float64{1}, vec(4)); err == nil || !strings.Contains(err.Error(), "Assumption 4") {
		t.Errorf("Y(x) empty: error %v, want one citing Assumption 4", err)
	}
}

// aipodMetrics returns a Metrics hook giving ‖x − x*‖ ("err"), the
// violation of X ("vx") and of Y(x_k) by y_{k+1} ("vy"; x_k is the previous
// call's x, x0 at the first call).
func aipodMetrics(p *eqQuadratic, xs, x0 []float64) func(x, y []float64) map[string]float64 {
	prev := append([]float64(nil), x0...)
	return func(x, y []float64) map[string]float64 {
		m := map[string]float64{
			"err": floats.Distance(x, xs, 2),
			"vx":  p.upper.Violation(x),
			"vy":  p.lower.Violation(prev, y),
		}
		copy(prev, x)
		return m
	}
}

// aipodSolve runs m on p from x0 = (1, −1, 0.5) projected onto X and y0 = 0,
// with every iteration monitored, and returns the result and the records.
func aipodSolve(t *testing.T, p oracle.Problem, m Method, s Settings, metrics func(x, y []float64) map[string]float64) (*Result, []Record) {
	t.Helper()
	rec := &MemoryRecorder{}
	s.Recorder, s.Metrics = rec, metrics
	res, err := Solve(p, []float64{1, -1, 0.5}, make([]float64, p.DimY()), &s, m)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec.Records
}

// aipodCase is a run of TestAiPODFamilyDeterministic.
type aipodCase struct {
	name   string
	m      Method
	yEvery bool           // y_{k+1} ∈ Y(x_k) after every iteration
	xAt    func(int) bool // iterations after which x must be in X; nil: all
}

// TestAiPODFamilyDeterministic: on the constrained deterministic quadratic
// (dx = 3, dy = 5, eig A ∈ [1, 2], μ = 0.5; C of rank 2, D of rank 1;
// ‖x0 − x*‖ ≈ 1.6), with full batches, NeumannPartialSum, β = η = ρ = 1/2
// and α = 1/L_Φ (L_Φ the largest eigenvalue of MᵀM + μI), every method
// reaches ‖x − x*‖ ≤ 1e-8 within 150 iterations (measured: 105 for AiPOD,
// E-AiPOD p = 1 and E2-AiPOD; 69 for E-AiPOD with T = 2, δ = 1.5; 112 for
// the coupled AiPOD) and stays feasible: x_{k+1} ∈ X to 1e-10 at every
// iteration, and y_{k+1} ∈ Y(x_k) to 1e-10 at every iteration for the
// methods that project y at every step (AiPOD, E-AiPOD with p = 1).
// ProxSkip with p < 1 leaves y infeasible between projections by design;
// those runs check ‖y − y*(x*)‖ ≤ 1e-6 at the end, as all do. E2-AiPOD
// with T > 1 is TestE2AiPODPeriodicProjection.
func TestAiPODFamilyDeterministic(t *testing.T) {
	const budget, tol, feas = 150, 1e-8, 1e-10
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, testProblem(t), coupled)
		xs := p.solution()
		h, _ := p.phiHessian()
		var eig mat.EigenSym
		eig.Factorize(mat.NewSymDense(3, h.RawMatrix().Data), false)
		alpha := 1 / floats.Max(eig.Values(nil))
		cases := []aipodCase{
			{"AiPOD", AiPOD{Alpha: alpha, Beta: 0.5, S: 5, N: 40, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower}, true, nil},
			{"E-AiPOD p=1", EAiPOD{Alpha: alpha, Beta: 0.5, S: 5, N: 40, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 1}, true, nil},
			{"E-AiPOD p=0.5 T=2 δ=1.5", EAiPOD{Alpha: alpha / 2, Beta: 0.5, S: 5, N: 40, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 0.5, T: 2, Delta: 1.5}, false, nil},
		}
		if !coupled {
			cases = append(cases,
				aipodCase{"E2-AiPOD q=0.5", E2AiPOD{Alpha: alpha, Beta: 0.5, S: 5, P: 0.5, Rho: 0.5, Q: 0.5, N: 100, Lower: p.lower}, false, nil},
				aipodCase{"E2-AiPOD warm N=20", E2AiPOD{Alpha: alpha, Beta: 0.5, S: 5, P: 0.5, Rho: 0.5, Q: 0.5, N: 20, WarmStart: true, Lower: p.lower}, false, nil})
		}
		for _, c := range cases {
			t.Run(c.name+map[bool]string{false: "", true: " coupled"}[coupled], func(t *testing.T) {
				x0 := []float64{1, -1, 0.5}
				p.upper.Project(x0, x0)
				res, recs := aipodSolve(t, p, c.m, Settings{MaxIter: budget, Seed: 3, ProjectX: p.upper}, aipodMetrics(p, xs, x0))
				for _, r := range recs {
					if (c.xAt == nil || c.xAt(r.Iter)) && r.Metrics["vx"] > feas {
						t.Fatalf("iteration %d: ‖Dx − e‖∞ = %.3g", r.Iter, r.Metrics["vx"])
					}
					if c.yEvery && r.Metrics["vy"] > feas {
						t.Fatalf("iteration %d: ‖Cy + Hx − d‖∞ = %.3g", r.Iter, r.Metrics["vy"])
					}
				}
				k := firstBelow(recs, tol)
				if k < 0 {
					t.Fatalf("‖x − x*‖ = %.3g after %d iterations, want ≤ %g", floats.Distance(res.X, xs, 2), res.Iter, tol)
				}
				if v := p.lower.Violation(res.X, p.yStar(res.X)); v > 1e-12 {
					t.Fatal(v)
				}
				dy := floats.Distance(res.Y, p.yStar(xs), 2)
				if dy > 1e-6 {
					t.Errorf("‖y − y*(x*)‖ = %.3g, want ≤ 1e-6", dy)
				}
				rd := RoundsOf(res.State)
				t.Logf("‖x − x*‖ ≤ %g at iteration %d; final %.3g; ‖y − y*‖ = %.3g; rounds %+v", tol, k, floats.Distance(res.X, xs, 2), dy, rd)
			})
		}
	}
}

// TestE2AiPODPeriodicProjection: E2-AiPOD with T = 3 (projection of x at
// iterations k ≡ 0 mod 3, eq. 18b) keeps x_{k+1} ∈ X to 1e-10 after those
// iterations and converges to a neighbourhood of x* whose radius is
// proportional to α (the O(α²T²) term of Theorem 3's bound on ‖∇F‖²): the
// virtual iterate x̄ = Proj_X(x) after 600 iterations is at 0.104 from x*
// with α = 1/L_Φ and 0.025 with α/4 (measured). The test asserts
// ‖x̄ − x*‖ ≤ 0.15·α·T and a ratio between 3 and 5 for α/4.
func TestE2AiPODPeriodicProjection(t *testing.T) {
	p := newEqQuadratic(t, testProblem(t), false)
	xs := p.solution()
	h, _ := p.phiHessian()
	var eig mat.EigenSym
	eig.Factorize(mat.NewSymDense(3, h.RawMatrix().Data), false)
	alpha := 1 / floats.Max(eig.Values(nil))
	const T = 3
	var errs []float64
	for _, a := range []float64{alpha, alpha / 4} {
		m := E2AiPOD{Alpha: a, Beta: 0.5, S: 5, P: 0.5, Rho: 0.5, Q: 0.5, N: 20, T: T, WarmStart: true, Lower: p.lower}
		x0 := []float64{1, -1, 0.5}
		p.upper.Project(x0, x0)
		res, recs := aipodSolve(t, p, m, Settings{MaxIter: 600, Seed: 3, ProjectX: p.upper}, aipodMetrics(p, xs, x0))
		for _, r := range recs {
			if r.Iter%T == 0 && r.Metrics["vx"] > 1e-10 {
				t.Fatalf("α = %.3g, iteration %d: ‖Dx − e‖∞ = %.3g after a projection", a, r.Iter, r.Metrics["vx"])
			}
		}
		if v := recs[1].Metrics["vx"]; v < 1e-6 {
			t.Errorf("α = %.3g: x is in X (violation %.3g) after iteration 1, which does not project", a, v)
		}
		xb := make([]float64, 3)
		p.upper.Project(xb, res.X)
		d := floats.Distance(xb, xs, 2)
		if d > 0.15*a*T {
			t.Errorf("α = %.3g: ‖x̄ − x*‖ = %.3g, want ≤ 0.15·α·T = %.3g", a, d, 0.15*a*T)
		}
		errs = append(errs, d)
		r := RoundsOf(res.State)
		if r.Upper != 200 {
			t.Errorf("α = %.3g: %d upper projections in 600 iterations, want 200 (k mod 3 = 0)", a, r.Upper)
		}
		t.Logf("α = %.3g: ‖x̄ − x*‖ = %.3g, rounds %+v", a, d, r)
	}
	if ratio := errs[0] / errs[1]; ratio < 3 || ratio > 5 {
		t.Errorf("the neighbourhood shrank by %.3g when α was divided by 4, want a factor in [3, 5]", ratio)
	}
}

// aipodEstimate runs one AiPOD iteration from (x, y) with α = 1 and no
// upper set, and returns the hypergradient estimate h_f = x_0 − x_1.
func aipodEstimate(t *testing.T, p oracle.Problem, m AiPOD, x, y []float64, seed uint64) []float64 {
	t.Helper()
	m.Alpha = 1
	res, err := Solve(p, x, y, &Settings{MaxIter: 1, Seed: seed, EvalEvery: -1}, m)
	if err != nil {
		t.Fatal(err)
	}
	h := append([]float64(nil), x...)
	floats.Sub(h, res.X)
	return h
}

// TestAiPODHypergradient checks the projected implicit gradient of eqs. 8
// and 9b: from y = y*(x) with full batches and the partial sum of N = 60
// terms (bias (1 − η μ)^N ≈ 1e-18 with η = 1/2 and μ ≥ 1 the smallest
// eigenvalue of ZᵀAZ), AiPOD's estimate equals the closed-form ∇Φ(x) to
// 1e-10, for the uncoupled and the coupled (h(x) = Hx) lower set. With
// NeumannRandomTerm the estimate takes N values, one per N' ∈ {0..N−1}
// (bitwise distinct across 400 seeds), whose plain average is the
// partial-sum estimate (unbiasedness, to 1e-12).
func TestAiPODHypergradient(t *testing.T) {
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, testProblem(t), coupled)
		x := []float64{0.3, -1.2, 0.7}
		y := p.yStar(x)
		m := AiPOD{Beta: 0.5, S: 2, N: 60, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower}
		got := aipodEstimate(t, p, m, x, y, 0)
		want := p.hypergrad(x)
		if d := floats.Distance(got, want, 2); d > 1e-10 {
			t.Errorf("coupled=%v: ‖h_f − ∇Φ‖ = %.3g (h_f = %v, ∇Φ = %v)", coupled, d, got, want)
		}

		const n = 5
		m.N = n
		sum := aipodEstimate(t, p, m, x, y, 0)
		m.Series = NeumannRandomTerm
		seen := map[[3]uint64][]float64{}
		for seed := range uint64(400) {
			h := aipodEstimate(t, p, m, x, y, seed)
			seen[[3]uint64{math.Float64bits(h[0]), math.Float64bits(h[1]), math.Float64bits(h[2])}] = h
		}
		if len(seen) != n {
			t.Fatalf("coupled=%v: %d distinct random-term estimates, want N = %d", coupled, len(seen), n)
		}
		avg := make([]float64, 3)
		for _, h := range seen {
			floats.AddScaled(avg, 1.0/n, h)
		}
		if d := floats.Distance(avg, sum, 2); d > 1e-12 {
			t.Errorf("coupled=%v: average of the N random-term estimates differs from the partial sum by %.3g", coupled, d)
		}
	}
}

// aipodStepStat is one iteration's oracle calls and rounds.
type aipodStepStat struct {
	calls  oracle.Calls
	rounds Rounds
}

// aipodStepwise runs k iterations of m one at a time (Solve, then Resume
// on the same State) and returns each iteration's calls and rounds. Init
// costs (the default-step curvature) are excluded.
func aipodStepwise(t *testing.T, p oracle.Problem, m Method, s Settings, x0, y0 []float64, k int) []aipodStepStat {
	t.Helper()
	s.MaxIter, s.EvalEvery = 1, -1
	res, err := Solve(p, x0, y0, &s, m)
	if err != nil {
		t.Fatal(err)
	}
	st := res.State
	out := make([]aipodStepStat, 0, k)
	// Init's calls are those of a run of aipodInitOnly.
	init, err := Solve(p, x0, y0, &s, aipodInitOnly{m})
	if err != nil {
		t.Fatal(err)
	}
	prevCalls, prevRounds := init.Calls, Rounds{}
	for i := range k {
		if i > 0 {
			s.MaxIter = i + 1
			if _, err := Resume(p, st, &s, m); err != nil {
				t.Fatal(err)
			}
		}
		r := RoundsOf(st)
		out = append(out, aipodStepStat{
			calls:  st.Calls.Sub(prevCalls),
			rounds: Rounds{Lower: r.Lower - prevRounds.Lower, Upper: r.Upper - prevRounds.Upper, Implicit: r.Implicit - prevRounds.Implicit},
		})
		prevCalls, prevRounds = st.Calls, r
	}
	return out
}

// aipodInitOnly runs a Method's Init and no-op iterations.
type aipodInitOnly struct{ m Method }

func (o aipodInitOnly) Init(p oracle.Problem, st *State) error            { return o.m.Init(p, st) }
func (o aipodInitOnly) Iterate(oracle.Problem, *State) (Iteration, error) { return Iteration{}, nil }

// TestAiPODCountsPerIteration checks each iteration's oracle calls and
// projections (Rounds) against Algorithms 1–5 of paper 004, on the
// stochastic constrained quadratic with minibatches:
//
//	AiPOD (S = 3, N = 4, partial sum): 3 GradG, 1 GradF, 3 HVP (+1 coupled),
//	  1 MixedXY; projections: lower 3, upper 1, implicit 4 (P_y ∇y f and 3 P_y H z).
//	AiPOD (random term): HVP J ∈ [0, N−1] (+1 coupled), implicit J + 1.
//	E-AiPOD (p = 1, T = 3): as AiPOD with 3 GradF (t = 0 shares ξ^k).
//	E2-AiPOD (p = q = 1, N = 4, T = 2, UpperBatch > 0, cold): 3 GradG,
//	  1 + 3 GradF, 3 HVP, 1 MixedXY; lower 3, implicit 4, upper 1 at even k.
//	E2-AiPOD (warm, UpperBatch = 0): 1 GradF, 4 HVP.
//
// and that the projection frequencies match p and q: over 400 iterations
// of E-AiPOD (S = 5, p = 0.3) the 2000 coins give 600 ± 5σ (σ ≈ 20.5)
// lower projections, and E2-AiPOD's medium level (N = 5, q = 0.4) 800 ± 5σ.
func TestAiPODCountsPerIteration(t *testing.T) {
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, stochasticProblem(t), coupled)
		one := int64(0)
		if coupled {
			one = 1
		}
		x0, y0 := []float64{0.2, 0.1, 0.3}, make([]float64, 5)
		p.upper.Project(x0, x0)
		s := Settings{Seed: 4, ProjectX: p.upper}
		b := [3]int{8, 8, 8}
		cases := []struct {
			name  string
			m     Method
			check func(k int, c aipodStepStat) bool
		}{
			{"AiPOD sum", AiPOD{Alpha: 0.1, Beta: 0.5, S: 3, N: 4, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, InnerBatch: b[0], HessianBatch: b[1], UpperBatch: b[2]},
				func(k int, c aipodStepStat) bool {
					return c.calls == oracle.Calls{GradG: 3, GradF: 1, HVP: 3 + one, MixedXY: 1} && c.rounds == Rounds{Lower: 3, Upper: 1, Implicit: 4}
				}},
			{"AiPOD random", AiPOD{Alpha: 0.1, Beta: 0.5, S: 3, N: 4, Eta: 0.5, Lower: p.lower, InnerBatch: b[0], HessianBatch: b[1], UpperBatch: b[2]},
				func(k int, c aipodStepStat) bool {
					j := c.calls.HVP - one
					return j >= 0 && j <= 3 && c.calls == oracle.Calls{GradG: 3, GradF: 1, HVP: j + one, MixedXY: 1} && c.rounds == Rounds{Lower: 3, Upper: 1, Implicit: j + 1}
				}},
			{"E-AiPOD p=1 T=3", EAiPOD{Alpha: 0.05, Beta: 0.5, S: 3, N: 4, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 1, T: 3, InnerBatch: b[0], HessianBatch: b[1], UpperBatch: b[2]},
				func(k int, c aipodStepStat) bool {
					return c.calls == oracle.Calls{GradG: 3, GradF: 3, HVP: 3 + one, MixedXY: 1} && c.rounds == Rounds{Lower: 3, Upper: 1, Implicit: 4}
				}},
		}
		if !coupled {
			cases = append(cases, []struct {
				name  string
				m     Method
				check func(k int, c aipodStepStat) bool
			}{
				{"E2-AiPOD cold", E2AiPOD{Alpha: 0.1, Beta: 0.5, S: 3, P: 1, Rho: 0.5, Q: 1, N: 4, T: 2, Lower: p.lower, InnerBatch: b[0], HessianBatch: b[1], UpperBatch: b[2]},
					func(k int, c aipodStepStat) bool {
						up := int64(1 - k%2)
						return c.calls == oracle.Calls{GradG: 3, GradF: 4, HVP: 3, MixedXY: 1} && c.rounds == Rounds{Lower: 3, Upper: up, Implicit: 4}
					}},
				{"E2-AiPOD warm full upper batch", E2AiPOD{Alpha: 0.1, Beta: 0.5, S: 3, P: 1, Rho: 0.5, Q: 1, N: 4, T: 2, WarmStart: true, Lower: p.lower, InnerBatch: b[0], HessianBatch: b[1]},
					func(k int, c aipodStepStat) bool {
						up := int64(1 - k%2)
						return c.calls == oracle.Calls{GradG: 3, GradF: 1, HVP: 4, MixedXY: 1} && c.rounds == Rounds{Lower: 3, Upper: up, Implicit: 4}
					}},
			}...)
		}
		for _, c := range cases {
			for k, st := range aipodStepwise(t, p, c.m, s, x0, y0, 6) {
				if !c.check(k, st) {
					t.Errorf("coupled=%v %s, iteration %d: calls %+v, rounds %+v", coupled, c.name, k, st.calls, st.rounds)
				}
			}
		}
	}

	p := newEqQuadratic(t, stochasticProblem(t), false)
	x0 := []float64{0.2, 0.1, 0.3}
	p.upper.Project(x0, x0)
	for _, c := range []struct {
		name       string
		m          Method
		lower, imp float64 // expected totals over 400 iterations
		sdL, sdI   float64
	}{
		{"E-AiPOD p=0.3", EAiPOD{Alpha: 0.05, Beta: 0.5, S: 5, N: 3, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 0.3, InnerBatch: 8, HessianBatch: 8, UpperBatch: 8},
			600, 1200, math.Sqrt(2000 * 0.3 * 0.7), 0},
		{"E2-AiPOD p=0.3 q=0.4", E2AiPOD{Alpha: 0.05, Beta: 0.5, S: 5, P: 0.3, Rho: 0.5, Q: 0.4, N: 5, Lower: p.lower, InnerBatch: 8, HessianBatch: 8, UpperBatch: 8},
			600, 800, math.Sqrt(2000 * 0.3 * 0.7), math.Sqrt(2000 * 0.4 * 0.6)},
	} {
		res, err := Solve(p, x0, make([]float64, 5), &Settings{MaxIter: 400, Seed: 8, EvalEvery: -1, ProjectX: p.upper}, c.m)
		if err != nil {
			t.Fatal(err)
		}
		r := RoundsOf(res.State)
		if math.Abs(float64(r.Lower)-c.lower) > 5*c.sdL || math.Abs(float64(r.Implicit)-c.imp) > 5*c.sdI {
			t.Errorf("%s: rounds %+v over 400 iterations, want lower %v ± %.0f, implicit %v ± %.0f", c.name, r, c.lower, 5*c.sdL, c.imp, 5*c.sdI)
		}
		t.Logf("%s: rounds over 400 iterations %+v (expected lower %v, implicit %v)", c.name, r, c.lower, c.imp)
	}
}

// TestAiPODFamilyStochastic: on the stochastic constrained quadratic (200
// lower and 100 upper samples, relative noise 0.1, the means of the
// deterministic one), with batches 32 (lower) and 25 (upper), β = η = ρ =
// 1/2 and α = 1/(8 L_Φ) (E-AiPOD with T = 2: α/2), after 1000 iterations
// from ‖x0 − x*‖ ≈ 1.6, for seeds 1, 2, 3:
//
//	AiPOD, E-AiPOD (p = 0.3, T = 2), partial sum N = 10; E2-AiPOD (p = 0.3,
//	q = 0.5, N = 20):                      ‖x − x*‖ ≤ 3e-2 (worst of seeds 0..19: 1.8e-2)
//	AiPOD with the paper's random-term estimator (N = 5, α/2):
//	                                      ‖x − x*‖ ≤ 0.4  (worst of seeds 0..19: 0.21)
//
// The random-term estimator of eq. 9b is unbiased for the partial sum but
// its variance grows with N (paper 004, line 920): N·z_{N'} is N times the
// first term with probability 1/N. x_K ∈ X to 1e-10 in all runs.
func TestAiPODFamilyStochastic(t *testing.T) {
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, newQuadratic(t, 3, 5, 200, 100, 0.1, 1, 2, 0.5, 1), coupled)
		xs := p.solution()
		h, _ := p.phiHessian()
		var eig mat.EigenSym
		eig.Factorize(mat.NewSymDense(3, h.RawMatrix().Data), false)
		alpha := 1 / floats.Max(eig.Values(nil)) / 8
		cases := []struct {
			name string
			m    Method
			tol  float64
		}{
			{"AiPOD", AiPOD{Alpha: alpha, Beta: 0.5, S: 5, N: 10, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, InnerBatch: 32, HessianBatch: 32, UpperBatch: 25}, 3e-2},
			{"AiPOD random term", AiPOD{Alpha: alpha / 2, Beta: 0.5, S: 5, N: 5, Eta: 0.5, Lower: p.lower, InnerBatch: 32, HessianBatch: 32, UpperBatch: 25}, 0.4},
			{"E-AiPOD", EAiPOD{Alpha: alpha / 2, Beta: 0.5, S: 5, N: 10, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 0.3, T: 2, InnerBatch: 32, HessianBatch: 32, UpperBatch: 25}, 3e-2},
		}
		if !coupled {
			cases = append(cases, struct {
				name string
				m    Method
				tol  float64
			}{"E2-AiPOD", E2AiPOD{Alpha: alpha, Beta: 0.5, S: 5, P: 0.3, Rho: 0.5, Q: 0.5, N: 20, Lower: p.lower, InnerBatch: 32, HessianBatch: 32, UpperBatch: 25}, 3e-2})
		}
		for _, c := range cases {
			for _, seed := range []uint64{1, 2, 3} {
				x0 := []float64{1, -1, 0.5}
				p.upper.Project(x0, x0)
				res, err := Solve(p, x0, make([]float64, 5), &Settings{MaxIter: 1000, Seed: seed, EvalEvery: -1, ProjectX: p.upper}, c.m)
				if err != nil {
					t.Fatal(err)
				}
				d := floats.Distance(res.X, xs, 2)
				if d > c.tol {
					t.Errorf("coupled=%v %s seed %d: ‖x − x*‖ = %.3g after 1000 iterations, want ≤ %g", coupled, c.name, seed, d, c.tol)
				}
				if v := p.upper.Violation(res.X); v > 1e-10 {
					t.Errorf("coupled=%v %s seed %d: ‖Dx − e‖∞ = %.3g", coupled, c.name, seed, v)
				}
				t.Logf("coupled=%v %s seed %d: ‖x − x*‖ = %.3g", coupled, c.name, seed, d)
			}
		}
	}
}

// TestAiPODWithAffine: the upper set may be the package's Affine (full row
// rank) instead of a LinearEquality: AiPOD with X = {x : D₁ x = e₁} (the
// independent row of D, the same set) reaches the same x* to 1e-8 within
// 150 iterations, and E-AiPOD accepts δ > 1 with it.
func TestAiPODWithAffine(t *testing.T) {
	p := newEqQuadratic(t, testProblem(t), true)
	xs := p.solution()
	af, err := NewAffine(p.dm.Slice(0, 1, 0, 3), p.e[:1])
	if err != nil {
		t.Fatal(err)
	}
	h, _ := p.phiHessian()
	var eig mat.EigenSym
	eig.Factorize(mat.NewSymDense(3, h.RawMatrix().Data), false)
	alpha := 1 / floats.Max(eig.Values(nil))
	for _, m := range []Method{
		AiPOD{Alpha: alpha, Beta: 0.5, S: 5, N: 40, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower},
		EAiPOD{Alpha: alpha / 2, Beta: 0.5, S: 5, N: 40, Eta: 0.5, Series: NeumannPartialSum, Lower: p.lower, P: 0.5, T: 2, Delta: 1.5},
	} {
		res, _ := aipodSolve(t, p, m, Settings{MaxIter: 150, Seed: 1, ProjectX: af}, nil)
		if d := floats.Distance(res.X, xs, 2); d > 1e-8 {
			t.Errorf("%T with Affine X: ‖x − x*‖ = %.3g after 150 iterations", m, d)
		}
		if v := p.upper.Violation(res.X); v > 1e-10 {
			t.Errorf("%T with Affine X: ‖Dx − e‖∞ = %.3g", m, v)
		}
	}
}
