package implicit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

// quadratic is the bilevel problem
//
//	g(x, y) = ½ yᵀAy − yᵀ(Bx + a) + ½ xᵀCx
//	f(x, y) = ½‖y − c‖² + ½ xᵀDx + xᵀEy
//
// with A symmetric positive definite, so y*(x) = A⁻¹(Bx + a) and
//
//	∇Φ(x) = Dx + Ey* + BᵀA⁻¹(y* − c + Eᵀx).
type quadratic struct {
	A, B, C, D, E *mat.Dense
	a, c          []float64
	eig           []float64 // eigenvalues of A, ascending
}

// newQuadratic draws a problem with A = Q·diag(eig)·Qᵀ for a random
// orthogonal Q, so that the spectrum of the Hessian is known exactly.
func newQuadratic(t testing.TB, dx int, eig []float64, seed uint64) *quadratic {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	dy := len(eig)
	randDense := func(r, c int, scale float64) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				m.Set(i, j, scale*rng.NormFloat64())
			}
		}
		return m
	}
	randVec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	var qr mat.QR
	qr.Factorize(randDense(dy, dy, 1))
	var q mat.Dense
	qr.QTo(&q)
	var a mat.Dense
	a.Mul(&q, mat.NewDiagDense(dy, eig))
	a.Mul(&a, q.T())
	// Exact symmetry, so that the operator is symmetric to the last bit.
	for i := 0; i < dy; i++ {
		for j := 0; j < i; j++ {
			s := (a.At(i, j) + a.At(j, i)) / 2
			a.Set(i, j, s)
			a.Set(j, i, s)
		}
	}
	sym := func(m *mat.Dense) *mat.Dense {
		var s mat.Dense
		s.Mul(m.T(), m)
		return &s
	}
	return &quadratic{
		A: &a, B: randDense(dy, dx, 1), C: sym(randDense(dx, dx, 0.5)),
		D: sym(randDense(dx, dx, 0.5)), E: randDense(dx, dy, 0.3),
		a: randVec(dy), c: randVec(dy), eig: eig,
	}
}

func mulVec(dst []float64, m mat.Matrix, v []float64) {
	r, _ := m.Dims()
	mat.NewVecDense(r, dst).MulVec(m, mat.NewVecDense(len(v), v))
}

func (p *quadratic) dims() (dx, dy int) { dy, dx = p.B.Dims(); return dx, dy }

func (p *quadratic) GradF(dx, dy, x, y []float64, _ []int) {
	nx, ny := p.dims()
	if dx != nil {
		t := make([]float64, nx)
		mulVec(dx, p.D, x)
		mulVec(t, p.E, y)
		for i := range dx {
			dx[i] += t[i]
		}
	}
	if dy != nil {
		t := make([]float64, ny)
		mulVec(t, p.E.T(), x)
		for i := range dy {
			dy[i] = y[i] - p.c[i] + t[i]
		}
	}
}

func (p *quadratic) GradG(dx, dy, x, y []float64, _ []int) {
	nx, ny := p.dims()
	if dx != nil {
		t := make([]float64, nx)
		mulVec(dx, p.C, x)
		mulVec(t, p.B.T(), y)
		for i := range dx {
			dx[i] -= t[i]
		}
	}
	if dy != nil {
		t := make([]float64, ny)
		mulVec(dy, p.A, y)
		mulVec(t, p.B, x)
		for i := range dy {
			dy[i] -= t[i] + p.a[i]
		}
	}
}

func (p *quadratic) HVP(dst, _, _, v []float64, _ []int) { mulVec(dst, p.A, v) }

// Capabilities declares no optional oracle.
func (p *quadratic) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// MixedXY is ∇x⟨∇y g, v⟩ = −Bᵀv.
func (p *quadratic) MixedXY(dst, _, _, v []float64, _ []int) {
	mulVec(dst, p.B.T(), v)
	for i := range dst {
		dst[i] = -dst[i]
	}
}

// solveA returns A⁻¹·b by LU.
func (p *quadratic) solveA(b []float64) []float64 {
	_, ny := p.dims()
	var v mat.VecDense
	if err := v.SolveVec(p.A, mat.NewVecDense(ny, b)); err != nil {
		panic(err)
	}
	return v.RawVector().Data
}

func (p *quadratic) yStar(x []float64) []float64 {
	_, ny := p.dims()
	rhs := make([]float64, ny)
	mulVec(rhs, p.B, x)
	for i := range rhs {
		rhs[i] += p.a[i]
	}
	return p.solveA(rhs)
}

// gradPhi is the closed-form hypergradient Dx + Ey* + BᵀA⁻¹(y* − c + Eᵀx).
func (p *quadratic) gradPhi(x []float64) []float64 {
	nx, ny := p.dims()
	ys := p.yStar(x)
	gx := make([]float64, nx)
	gy := make([]float64, ny)
	p.GradF(gx, gy, x, ys, nil)
	v := p.solveA(gy)
	t := make([]float64, nx)
	mulVec(t, p.B.T(), v)
	for i := range gx {
		gx[i] += t[i]
	}
	return gx
}

// ridge is hyperparameter optimization for ridge regression: x = λ (one
// log-penalty per feature), y = w,
//
//	g(λ, w) = (1/2n) Σ_i (X_i·w − t_i)² + ½ Σ_j exp(λ_j) w_j²
//	f(λ, w) = (1/2m) Σ_k (V_k·w − s_k)²
//
// On a batch the data terms average over the batch's samples only.
// Then ∇ww g = XᵀX/n + diag(e^λ), ∇λ∇w g·v = e^λ ⊙ w ⊙ v, ∇λ f = 0, and
// ∇Φ(λ) = −e^λ ⊙ w* ⊙ v* with H·v* = ∇w f(w*).
type ridge struct {
	X, V [][]float64 // training and validation rows
	t, s []float64
}

func newRidge(n, m, p int, seed uint64) *ridge {
	rng := rand.New(rand.NewPCG(seed, 11))
	wTrue := make([]float64, p)
	for j := range wTrue {
		wTrue[j] = rng.NormFloat64()
	}
	rows := func(k int) ([][]float64, []float64) {
		xs := make([][]float64, k)
		ts := make([]float64, k)
		for i := range xs {
			xs[i] = make([]float64, p)
			for j := range xs[i] {
				xs[i][j] = rng.NormFloat64()
				ts[i] += xs[i][j] * wTrue[j]
			}
			ts[i] += 0.5 * rng.NormFloat64()
		}
		return xs, ts
	}
	r := &ridge{}
	r.X, r.t = rows(n)
	r.V, r.s = rows(m)
	return r
}

// samples calls fn for each sample of batch (all n when batch is nil) and
// returns the batch size.
func samples(n int, batch []int, fn func(i int)) int {
	if batch == nil {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return n
	}
	for _, i := range batch {
		fn(i)
	}
	return len(batch)
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Capabilities declares no optional oracle.
func (r *ridge) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

func (r *ridge) G(lam, w []float64, batch []int) float64 {
	var loss float64
	k := samples(len(r.X), batch, func(i int) {
		e := dot(r.X[i], w) - r.t[i]
		loss += e * e
	})
	loss /= 2 * float64(k)
	for j := range w {
		loss += 0.5 * math.Exp(lam[j]) * w[j] * w[j]
	}
	return loss
}

func (r *ridge) F(_, w []float64, batch []int) float64 {
	var loss float64
	k := samples(len(r.V), batch, func(i int) {
		e := dot(r.V[i], w) - r.s[i]
		loss += e * e
	})
	return loss / (2 * float64(k))
}

func (r *ridge) GradF(dx, dy, _, w []float64, batch []int) {
	if dx != nil {
		clear(dx)
	}
	if dy != nil {
		clear(dy)
		k := samples(len(r.V), batch, func(i int) {
			e := dot(r.V[i], w) - r.s[i]
			for j := range dy {
				dy[j] += e * r.V[i][j]
			}
		})
		for j := range dy {
			dy[j] /= float64(k)
		}
	}
}

func (r *ridge) GradG(dx, dy, lam, w []float64, batch []int) {
	if dx != nil {
		for j := range dx {
			dx[j] = 0.5 * math.Exp(lam[j]) * w[j] * w[j]
		}
	}
	if dy != nil {
		clear(dy)
		k := samples(len(r.X), batch, func(i int) {
			e := dot(r.X[i], w) - r.t[i]
			for j := range dy {
				dy[j] += e * r.X[i][j]
			}
		})
		for j := range dy {
			dy[j] = dy[j]/float64(k) + math.Exp(lam[j])*w[j]
		}
	}
}

func (r *ridge) HVP(dst, lam, _, v []float64, batch []int) {
	clear(dst)
	k := samples(len(r.X), batch, func(i int) {
		e := dot(r.X[i], v)
		for j := range dst {
			dst[j] += e * r.X[i][j]
		}
	})
	for j := range dst {
		dst[j] = dst[j]/float64(k) + math.Exp(lam[j])*v[j]
	}
}

func (r *ridge) MixedXY(dst, lam, w, v []float64, _ []int) {
	for j := range dst {
		dst[j] = math.Exp(lam[j]) * w[j] * v[j]
	}
}

// hessian returns the full ∇ww g as a dense matrix.
func (r *ridge) hessian(lam []float64) *mat.Dense {
	p := len(lam)
	h := mat.NewDense(p, p, nil)
	e := make([]float64, p)
	col := make([]float64, p)
	for j := 0; j < p; j++ {
		e[j] = 1
		r.HVP(col, lam, nil, e, nil)
		e[j] = 0
		h.SetCol(j, col)
	}
	return h
}

func (r *ridge) solveH(lam, b []float64) []float64 {
	var v mat.VecDense
	if err := v.SolveVec(r.hessian(lam), mat.NewVecDense(len(b), b)); err != nil {
		panic(err)
	}
	return v.RawVector().Data
}

// wStar solves the normal equations (XᵀX/n + diag e^λ) w = Xᵀt/n.
func (r *ridge) wStar(lam []float64) []float64 {
	p := len(lam)
	rhs := make([]float64, p)
	for i := range r.X {
		for j := range rhs {
			rhs[j] += r.t[i] * r.X[i][j] / float64(len(r.X))
		}
	}
	return r.solveH(lam, rhs)
}

// gradPhi is the closed form −e^λ ⊙ w* ⊙ H⁻¹∇w f(w*).
func (r *ridge) gradPhi(lam []float64) []float64 {
	w := r.wStar(lam)
	gw := make([]float64, len(w))
	r.GradF(nil, gw, lam, w, nil)
	v := r.solveH(lam, gw)
	g := make([]float64, len(lam))
	r.MixedXY(g, lam, w, v, nil)
	for j := range g {
		g[j] = -g[j]
	}
	return g
}

// relErr returns ‖got − want‖/‖want‖.
func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range got {
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

// diagOp returns the operator of diag(d).
func diagOp(d []float64) Operator {
	return func(dst, v []float64) {
		for i := range dst {
			dst[i] = d[i] * v[i]
		}
	}
}

// denseOp returns the operator of a row-major n×n matrix without allocating.
func denseOp(a []float64, n int) Operator {
	return func(dst, v []float64) {
		for i := 0; i < n; i++ {
			row := a[i*n : (i+1)*n]
			var s float64
			for j, rij := range row {
				s += rij * v[j]
			}
			dst[i] = s
		}
	}
}

func linspace(lo, hi float64, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		if n == 1 {
			v[i] = lo
			continue
		}
		v[i] = lo + (hi-lo)*float64(i)/float64(n-1)
	}
	return v
}
