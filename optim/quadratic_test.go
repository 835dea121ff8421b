package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// quadratic is a strongly convex quadratic bilevel problem with a known
// solution, averaged over samples:
//
//	g(x, y) = mean_i ½ yᵀA_i y − yᵀB_i x        (lower data set, i < n)
//	f(x, y) = mean_j ½‖y − c_j‖² + ½ μ‖x‖²       (upper data set, j < m)
//
// With A, B, c the sample means, y*(x) = A⁻¹Bx, and with M = A⁻¹B the
// minimizer of Φ(x) = ½‖Mx − c‖² + ½μ‖x‖² + const solves
// (MᵀM + μI) x* = Mᵀc. The per-sample A_i, B_i, c_j are the means plus
// centred noise, so batches give unbiased noisy oracles.
type quadratic struct {
	dx, dy int
	as, bs [][]float64 // per lower sample: A_i (dy×dy), B_i (dy×dx), row-major
	cs     [][]float64 // per upper sample: c_j (dy)
	mu     float64
	a, b   *mat.Dense // means
	c      []float64
}

// newQuadratic returns a problem with n lower and m upper samples whose
// per-sample terms deviate from the means with relative noise sigma
// (n = m = 1, sigma = 0: deterministic). The means are fixed by seed; the
// eigenvalues of A lie in [lo, hi].
func newQuadratic(t testing.TB, dx, dy, n, m int, sigma, lo, hi, mu float64, seed uint64) *quadratic {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 7))
	// A = Q diag(λ) Qᵀ with λ spread over [lo, hi] and Q from a QR factorization.
	g := mat.NewDense(dy, dy, nil)
	for i := range dy {
		for j := range dy {
			g.Set(i, j, rnd.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	lam := mat.NewDiagDense(dy, nil)
	for i := range dy {
		lam.SetDiag(i, lo+(hi-lo)*float64(i)/float64(max(dy-1, 1)))
	}
	var a mat.Dense
	a.Product(&q, lam, q.T())
	for i := range dy { // exact symmetry
		for j := range i {
			v := (a.At(i, j) + a.At(j, i)) / 2
			a.Set(i, j, v)
			a.Set(j, i, v)
		}
	}
	b := mat.NewDense(dy, dx, nil)
	for i := range dy {
		for j := range dx {
			b.Set(i, j, rnd.NormFloat64()/math.Sqrt(float64(dx)))
		}
	}
	c := make([]float64, dy)
	for i := range c {
		c[i] = rnd.NormFloat64()
	}
	p := &quadratic{dx: dx, dy: dy, mu: mu, a: &a, b: b, c: c}
	p.as = noisy(rnd, n, dy*dy, a.RawMatrix().Data, sigma, dy)
	p.bs = noisy(rnd, n, dy*dx, b.RawMatrix().Data, sigma, 0)
	p.cs = noisy(rnd, m, dy, c, sigma, 0)
	return p
}

// noisy returns n copies of mean plus centred Gaussian noise of scale sigma;
// if sym > 0 the vectors are sym×sym matrices and the noise is symmetric.
func noisy(rnd *rand.Rand, n, size int, mean []float64, sigma float64, sym int) [][]float64 {
	out := make([][]float64, n)
	avg := make([]float64, size)
	for i := range out {
		e := make([]float64, size)
		for k := range e {
			e[k] = sigma * rnd.NormFloat64()
		}
		if sym > 0 {
			for r := range sym {
				for s := range r {
					e[s*sym+r] = e[r*sym+s]
				}
			}
		}
		floats.AddScaled(avg, 1/float64(n), e)
		out[i] = e
	}
	for _, e := range out {
		floats.Sub(e, avg)
		floats.Add(e, mean)
	}
	return out
}

// solution returns x* and y*(x*).
func (p *quadratic) solution() (x, y []float64) {
	var mm mat.Dense
	if err := mm.Solve(p.a, p.b); err != nil {
		panic(err)
	}
	var h mat.Dense
	h.Mul(mm.T(), &mm)
	for i := range p.dx {
		h.Set(i, i, h.At(i, i)+p.mu)
	}
	var rhs, xs mat.VecDense
	rhs.MulVec(mm.T(), mat.NewVecDense(p.dy, p.c))
	if err := xs.SolveVec(&h, &rhs); err != nil {
		panic(err)
	}
	var ys mat.VecDense
	ys.MulVec(&mm, &xs)
	return mat.Col(nil, 0, &xs), mat.Col(nil, 0, &ys)
}

// hypergrad returns the exact ∇Φ(x) = (MᵀM + μI)x − Mᵀc.
func (p *quadratic) hypergrad(x []float64) []float64 {
	var mm mat.Dense
	if err := mm.Solve(p.a, p.b); err != nil {
		panic(err)
	}
	var r, g mat.VecDense
	r.MulVec(&mm, mat.NewVecDense(p.dx, append([]float64(nil), x...)))
	r.SubVec(&r, mat.NewVecDense(p.dy, p.c))
	g.MulVec(mm.T(), &r)
	out := mat.Col(nil, 0, &g)
	floats.AddScaled(out, p.mu, x)
	return out
}

// phiLipschitz returns the largest eigenvalue of ∇²Φ = MᵀM + μI.
func (p *quadratic) phiLipschitz() float64 {
	var mm mat.Dense
	if err := mm.Solve(p.a, p.b); err != nil {
		panic(err)
	}
	var h mat.SymDense
	h.SymOuterK(1, mm.T())
	var e mat.EigenSym
	e.Factorize(&h, false)
	v := e.Values(nil)
	return v[len(v)-1] + p.mu
}

func (p *quadratic) DimX() int     { return p.dx }
func (p *quadratic) DimY() int     { return p.dy }
func (p *quadratic) NumLower() int { return len(p.as) }
func (p *quadratic) NumUpper() int { return len(p.cs) }

// each calls fn for every index of batch (nil: all n) and returns the weight
// 1/|batch| of one sample.
func each(batch []int, n int, fn func(i int)) float64 {
	if batch == nil {
		for i := range n {
			fn(i)
		}
		return 1 / float64(n)
	}
	for _, i := range batch {
		fn(i)
	}
	return 1 / float64(len(batch))
}

// matVec adds s·M v to dst for the r×c row-major M.
func matVec(dst []float64, s float64, m []float64, r, c int, v []float64) {
	for i := range r {
		dst[i] += s * floats.Dot(m[i*c:(i+1)*c], v)
	}
}

// matTVec adds s·Mᵀ v to dst for the r×c row-major M.
func matTVec(dst []float64, s float64, m []float64, r, c int, v []float64) {
	for i := range r {
		floats.AddScaled(dst, s*v[i], m[i*c:(i+1)*c])
	}
}

func (p *quadratic) F(x, y []float64, batch []int) float64 {
	sum := 0.0
	w := each(batch, len(p.cs), func(j int) {
		d := floats.Distance(y, p.cs[j], 2)
		sum += 0.5 * d * d
	})
	return w*sum + 0.5*p.mu*floats.Dot(x, x)
}

func (p *quadratic) G(x, y []float64, batch []int) float64 {
	sum := 0.0
	ay, bx := make([]float64, p.dy), make([]float64, p.dy)
	w := each(batch, len(p.as), func(i int) {
		clear(ay)
		clear(bx)
		matVec(ay, 1, p.as[i], p.dy, p.dy, y)
		matVec(bx, 1, p.bs[i], p.dy, p.dx, x)
		sum += 0.5*floats.Dot(y, ay) - floats.Dot(y, bx)
	})
	return w * sum
}

func (p *quadratic) GradF(dx, dy, x, y []float64, batch []int) {
	if dx != nil {
		for i := range dx {
			dx[i] = p.mu * x[i]
		}
	}
	if dy != nil {
		clear(dy)
		w := each(batch, len(p.cs), func(j int) { floats.Add(dy, p.cs[j]) })
		for i := range dy {
			dy[i] = y[i] - w*dy[i]
		}
	}
}

func (p *quadratic) GradG(dx, dy, x, y []float64, batch []int) {
	if dx != nil {
		clear(dx)
		w := each(batch, len(p.as), func(i int) { matTVec(dx, -1, p.bs[i], p.dy, p.dx, y) })
		floats.Scale(w, dx)
	}
	if dy != nil {
		clear(dy)
		w := each(batch, len(p.as), func(i int) {
			matVec(dy, 1, p.as[i], p.dy, p.dy, y)
			matVec(dy, -1, p.bs[i], p.dy, p.dx, x)
		})
		floats.Scale(w, dy)
	}
}

func (p *quadratic) HVP(dst, x, y, v []float64, batch []int) {
	clear(dst)
	w := each(batch, len(p.as), func(i int) { matVec(dst, 1, p.as[i], p.dy, p.dy, v) })
	floats.Scale(w, dst)
}

func (p *quadratic) MixedXY(dst, x, y, v []float64, batch []int) {
	clear(dst)
	w := each(batch, len(p.as), func(i int) { matTVec(dst, -1, p.bs[i], p.dy, p.dx, v) })
	floats.Scale(w, dst)
}

func (p *quadratic) MixedYX(dst, x, y, u []float64, batch []int) {
	clear(dst)
	w := each(batch, len(p.as), func(i int) { matVec(dst, -1, p.bs[i], p.dy, p.dx, u) })
	floats.Scale(w, dst)
}

// Capabilities declares no optional oracle.
func (p *quadratic) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

var _ oracle.Problem = (*quadratic)(nil)

// testProblem is the deterministic problem of the convergence tests:
// dx = 3, dy = 5, eigenvalues of A in [1, 2], μ = 0.5.
func testProblem(t testing.TB) *quadratic {
	return newQuadratic(t, 3, 5, 1, 1, 0, 1, 2, 0.5, 1)
}

// stochasticProblem has the same means as testProblem, 200 lower and 100
// upper samples, and noise 0.3.
func stochasticProblem(t testing.TB) *quadratic {
	return newQuadratic(t, 3, 5, 200, 100, 0.3, 1, 2, 0.5, 1)
}

// TestQuadraticOracles checks the test problem's oracles against central
// finite differences of F and G, so the method tests rest on correct
// derivatives.
func TestQuadraticOracles(t *testing.T) {
	p := stochasticProblem(t)
	rnd := rand.New(rand.NewPCG(3, 3))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rnd.NormFloat64()
		}
		return v
	}
	x, y, v, u := vec(3), vec(5), vec(5), vec(3)
	batch := []int{3, 7, 7, 150}
	const h = 1e-5
	// fd returns the directional derivative of fn along (ex, ey).
	fd := func(fn func(x, y []float64) float64, ex, ey []float64) float64 {
		xp, yp, xm, ym := append([]float64(nil), x...), append([]float64(nil), y...), append([]float64(nil), x...), append([]float64(nil), y...)
		floats.AddScaled(xp, h, ex)
		floats.AddScaled(yp, h, ey)
		floats.AddScaled(xm, -h, ex)
		floats.AddScaled(ym, -h, ey)
		return (fn(xp, yp) - fn(xm, ym)) / (2 * h)
	}
	zx, zy := make([]float64, 3), make([]float64, 5)
	g := func(x, y []float64) float64 { return p.G(x, y, batch) }
	f := func(x, y []float64) float64 { return p.F(x, y, batch[:2]) }
	gx, gy, fx, fy := make([]float64, 3), make([]float64, 5), make([]float64, 3), make([]float64, 5)
	p.GradG(gx, gy, x, y, batch)
	p.GradF(fx, fy, x, y, batch[:2])
	hv, mxy, myx := make([]float64, 5), make([]float64, 3), make([]float64, 5)
	p.HVP(hv, x, y, v, batch)
	p.MixedXY(mxy, x, y, v, batch)
	p.MixedYX(myx, x, y, u, batch)
	// ⟨∇y g, v⟩ as a function, for the second-order checks.
	gyv := func(x, y []float64) float64 {
		d := make([]float64, 5)
		p.GradG(nil, d, x, y, batch)
		return floats.Dot(d, v)
	}
	gxu := func(x, y []float64) float64 {
		d := make([]float64, 3)
		p.GradG(d, nil, x, y, batch)
		return floats.Dot(d, u)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"∇x g·u", floats.Dot(gx, u), fd(g, u, zy)},
		{"∇y g·v", floats.Dot(gy, v), fd(g, zx, v)},
		{"∇x f·u", floats.Dot(fx, u), fd(f, u, zy)},
		{"∇y f·v", floats.Dot(fy, v), fd(f, zx, v)},
		{"HVP", floats.Dot(hv, y), fd(gyv, zx, y)},
		{"MixedXY", floats.Dot(mxy, u), fd(gyv, u, zy)},
		{"MixedYX", floats.Dot(myx, v), fd(gxu, zx, v)},
	} {
		if math.Abs(c.got-c.want) > 1e-7*(1+math.Abs(c.want)) {
			t.Errorf("%s: oracle %v, finite difference %v", c.name, c.got, c.want)
		}
	}
}
