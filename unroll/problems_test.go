package unroll

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// quadratic is the bilevel problem
//
//	g(x, y) = ½ yᵀAy − yᵀ(Bx + a) + ½ xᵀCx
//	f(x, y) = ½‖y − c‖² + ½ xᵀDx + xᵀEy
//
// A = Q·diag(eig)·Qᵀ is symmetric positive definite with a known spectrum,
// y*(x) = A⁻¹(Bx + a) and ∇Φ(x) = Dx + Ey* + BᵀA⁻¹(y* − c + Eᵀx).
type quadratic struct {
	A, B, C, D, E *mat.Dense
	a, c          []float64
}

func newQuadratic(t testing.TB, dx int, eig []float64, seed uint64) *quadratic {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	dy := len(eig)
	gauss := func(r, c int, s float64) *mat.Dense {
		d := make([]float64, r*c)
		for i := range d {
			d[i] = s * rng.NormFloat64()
		}
		return mat.NewDense(r, c, d)
	}
	gram := func(m *mat.Dense) *mat.Dense {
		var s mat.Dense
		s.Mul(m.T(), m)
		return &s
	}
	vec := func(n int) []float64 { return gauss(n, 1, 1).RawMatrix().Data }
	var qr mat.QR
	qr.Factorize(gauss(dy, dy, 1))
	var q, a mat.Dense
	qr.QTo(&q)
	a.Mul(&q, mat.NewDiagDense(dy, eig))
	a.Mul(&a, q.T())
	for i := 0; i < dy; i++ { // exact symmetry
		for j := 0; j < i; j++ {
			s := (a.At(i, j) + a.At(j, i)) / 2
			a.Set(i, j, s)
			a.Set(j, i, s)
		}
	}
	return &quadratic{A: &a, B: gauss(dy, dx, 1), C: gram(gauss(dx, dx, 0.5)),
		D: gram(gauss(dx, dx, 0.5)), E: gauss(dx, dy, 0.3), a: vec(dy), c: vec(dy)}
}

// mv sets dst = m·v (+ m·v when add).
func mv(dst []float64, m mat.Matrix, v []float64, add bool) {
	r, _ := m.Dims()
	t := mat.NewVecDense(r, nil)
	t.MulVec(m, mat.NewVecDense(len(v), v))
	for i := range dst {
		if add {
			dst[i] += t.AtVec(i)
		} else {
			dst[i] = t.AtVec(i)
		}
	}
}

func (p *quadratic) F(x, y []float64, _ []int) float64 {
	var s float64
	for i := range y {
		s += 0.5 * (y[i] - p.c[i]) * (y[i] - p.c[i])
	}
	dx, ey := make([]float64, len(x)), make([]float64, len(x))
	mv(dx, p.D, x, false)
	mv(ey, p.E, y, false)
	for i := range x {
		s += 0.5*x[i]*dx[i] + x[i]*ey[i]
	}
	return s
}

func (p *quadratic) GradF(dx, dy, x, y []float64, _ []int) {
	if dx != nil {
		mv(dx, p.D, x, false)
		mv(dx, p.E, y, true)
	}
	if dy != nil {
		mv(dy, p.E.T(), x, false)
		for i := range dy {
			dy[i] += y[i] - p.c[i]
		}
	}
}

func (p *quadratic) GradG(dx, dy, x, y []float64, _ []int) {
	if dx != nil {
		t := make([]float64, len(dx))
		mv(dx, p.C, x, false)
		mv(t, p.B.T(), y, false)
		for i := range dx {
			dx[i] -= t[i]
		}
	}
	if dy != nil {
		t := make([]float64, len(dy))
		mv(dy, p.A, y, false)
		mv(t, p.B, x, false)
		for i := range dy {
			dy[i] -= t[i] + p.a[i]
		}
	}
}

func (p *quadratic) HVP(dst, _, _, v []float64, _ []int) { mv(dst, p.A, v, false) }

func (p *quadratic) MixedXY(dst, _, _, v []float64, _ []int) {
	mv(dst, p.B.T(), v, false)
	for i := range dst {
		dst[i] = -dst[i]
	}
}

func (p *quadratic) solveA(b []float64) []float64 {
	var v mat.VecDense
	if err := v.SolveVec(p.A, mat.NewVecDense(len(b), b)); err != nil {
		panic(err)
	}
	return v.RawVector().Data
}

func (p *quadratic) gradPhi(x []float64) []float64 {
	dy, _ := p.B.Dims()
	rhs := make([]float64, dy)
	mv(rhs, p.B, x, false)
	for i := range rhs {
		rhs[i] += p.a[i]
	}
	ys := p.solveA(rhs)
	gx, gy := make([]float64, len(x)), make([]float64, dy)
	p.GradF(gx, gy, x, ys, nil)
	mv(gx, p.B.T(), p.solveA(gy), true)
	return gx
}

// unrolledDerivative is the closed-form derivative of x ↦ f(x, y_T(x)) for
// heavy ball on the quadratic, by the forward matrix recursion
//
//	y_{t+1} = (1+β)y_t − βy_{t−1} − α(Ay_t − Bx − a)
//	J_{t+1} = ((1+β)I − αA)·J_t − β·J_{t−1} + αB,
//
// with J = dy/dx zero for the iterates before step T−K (all of them when
// K = 0): d f/dx = ∇x f(x, y_T) + J_Tᵀ∇y f(x, y_T). It also returns y_T.
func (p *quadratic) unrolledDerivative(x, y0 []float64, alpha, beta float64, T, K int) ([]float64, []float64) {
	dy, dx := p.B.Dims()
	if K == 0 || K > T {
		K = T
	}
	var m mat.Dense // (1+β)I − αA
	m.Scale(-alpha, p.A)
	for i := 0; i < dy; i++ {
		m.Set(i, i, m.At(i, i)+1+beta)
	}
	var aB mat.Dense
	aB.Scale(alpha, p.B)
	y, yPrev := append([]float64(nil), y0...), append([]float64(nil), y0...)
	j, jPrev := mat.NewDense(dy, dx, nil), mat.NewDense(dy, dx, nil)
	g := make([]float64, dy)
	for t := 0; t < T; t++ {
		if t >= T-K {
			var next mat.Dense
			next.Mul(&m, j)
			var bj mat.Dense
			bj.Scale(beta, jPrev)
			next.Sub(&next, &bj)
			next.Add(&next, &aB)
			jPrev, j = j, &next
		}
		p.GradG(nil, g, x, y, nil)
		next := make([]float64, dy)
		for i := range next {
			next[i] = y[i] - alpha*g[i] + beta*(y[i]-yPrev[i])
		}
		yPrev, y = y, next
	}
	gx, gy := make([]float64, dx), make([]float64, dy)
	p.GradF(gx, gy, x, y, nil)
	mv(gx, j.T(), gy, true)
	return gx, y
}

// nonquadratic has state-dependent curvature and mixed derivatives, and a
// lower level that is a sum over d_y samples:
//
//	g(x, y; B) = ½ yᵀAy − yᵀBx + (d_y/|B|)·Σ_{i∈B} [γ·log cosh y_i + δ·sin(u_i)·y_i²],  u = Cx
//	f(x, y)    = ½‖y − c‖² + ½ρ‖x‖² + Σ_j sin(x_j)·y_j
//
// with A ⪰ I and 2δ·d_y/|B| < 1, so g is strongly convex in y.
type nonquadratic struct {
	quad         *quadratic // supplies A, B, C (d_y×d_x here) and c
	cy           *mat.Dense // d_y × d_x
	gamma, delta float64
	rho          float64
}

func newNonquadratic(t testing.TB, dx, dy int, seed uint64) *nonquadratic {
	q := newQuadratic(t, dx, linspaceEig(1, 4, dy), seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	c := mat.NewDense(dy, dx, nil)
	for i := 0; i < dy; i++ {
		for j := 0; j < dx; j++ {
			c.Set(i, j, rng.NormFloat64())
		}
	}
	return &nonquadratic{quad: q, cy: c, gamma: 0.8, delta: 0.1, rho: 0.3}
}

func linspaceEig(lo, hi float64, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo
		if n > 1 {
			v[i] += (hi - lo) * float64(i) / float64(n-1)
		}
	}
	return v
}

// each calls fn(i) for the samples of batch and returns the scale d_y/|B|.
func (p *nonquadratic) each(n int, batch []int, fn func(i int)) float64 {
	if batch == nil {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return 1
	}
	for _, i := range batch {
		fn(i)
	}
	return float64(n) / float64(len(batch))
}

func (p *nonquadratic) u(x []float64) []float64 {
	dy, _ := p.cy.Dims()
	u := make([]float64, dy)
	mv(u, p.cy, x, false)
	return u
}

func (p *nonquadratic) F(x, y []float64, _ []int) float64 {
	var s float64
	for i := range y {
		s += 0.5 * (y[i] - p.quad.c[i]) * (y[i] - p.quad.c[i])
	}
	for j := range x {
		s += 0.5*p.rho*x[j]*x[j] + math.Sin(x[j])*y[j]
	}
	return s
}

func (p *nonquadratic) GradF(dx, dy, x, y []float64, _ []int) {
	if dx != nil {
		for j := range dx {
			dx[j] = p.rho*x[j] + math.Cos(x[j])*y[j]
		}
	}
	if dy != nil {
		for i := range dy {
			dy[i] = y[i] - p.quad.c[i]
			if i < len(x) {
				dy[i] += math.Sin(x[i])
			}
		}
	}
}

func (p *nonquadratic) GradG(dx, dy, x, y []float64, batch []int) {
	u := p.u(x)
	if dy != nil {
		mv(dy, p.quad.A, y, false)
		t := make([]float64, len(dy))
		mv(t, p.quad.B, x, false)
		extra := make([]float64, len(dy))
		s := p.each(len(y), batch, func(i int) {
			extra[i] += p.gamma*math.Tanh(y[i]) + 2*p.delta*math.Sin(u[i])*y[i]
		})
		for i := range dy {
			dy[i] += s*extra[i] - t[i]
		}
	}
	if dx != nil {
		mv(dx, p.quad.B.T(), y, false)
		w := make([]float64, len(y))
		s := p.each(len(y), batch, func(i int) { w[i] += p.delta * math.Cos(u[i]) * y[i] * y[i] })
		t := make([]float64, len(dx))
		mv(t, p.cy.T(), w, false)
		for j := range dx {
			dx[j] = s*t[j] - dx[j]
		}
	}
}

func (p *nonquadratic) HVP(dst, x, y, v []float64, batch []int) {
	u := p.u(x)
	mv(dst, p.quad.A, v, false)
	extra := make([]float64, len(v))
	s := p.each(len(y), batch, func(i int) {
		sech := 1 / math.Cosh(y[i])
		extra[i] += (p.gamma*sech*sech + 2*p.delta*math.Sin(u[i])) * v[i]
	})
	for i := range dst {
		dst[i] += s * extra[i]
	}
}

// MixedXY is ∇x⟨∇y g, v⟩ = −Bᵀv + s·Cᵀ(2δ·cos(u) ⊙ y ⊙ v) over the batch.
func (p *nonquadratic) MixedXY(dst, x, y, v []float64, batch []int) {
	u := p.u(x)
	w := make([]float64, len(y))
	s := p.each(len(y), batch, func(i int) { w[i] += 2 * p.delta * math.Cos(u[i]) * y[i] * v[i] })
	t := make([]float64, len(dst))
	mv(t, p.cy.T(), w, false)
	mv(dst, p.quad.B.T(), v, false)
	for j := range dst {
		dst[j] = s*t[j] - dst[j]
	}
}

func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range got {
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

func (p *nonquadratic) G(x, y []float64, batch []int) float64 {
	u := p.u(x)
	ay, bx := make([]float64, len(y)), make([]float64, len(y))
	mv(ay, p.quad.A, y, false)
	mv(bx, p.quad.B, x, false)
	var quad, sum float64
	for i := range y {
		quad += 0.5*y[i]*ay[i] - y[i]*bx[i]
	}
	s := p.each(len(y), batch, func(i int) {
		sum += p.gamma*math.Log(math.Cosh(y[i])) + p.delta*math.Sin(u[i])*y[i]*y[i]
	})
	return quad + s*sum
}

// RelErr is relErr for the external tests.
var RelErr = relErr
