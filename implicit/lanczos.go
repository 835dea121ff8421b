package implicit

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Lanczos estimates the extreme eigenvalues of the symmetric operator op
// of dimension len(start) by at most steps Lanczos steps from start, which
// must be nonzero (it is normalized; its content is then unspecified).
// Step j applies op once and extends the tridiagonal matrix T_j of the
// Krylov space; lo and hi are the smallest and largest eigenvalues of the
// last T_j (the Ritz values). They lie in [λmin, λmax] and converge to the
// extremes much faster than a power iteration does, because the Krylov
// space holds every power iterate. Lanczos stops early when the Krylov
// space is exhausted (then the Ritz values are exact) or, when tol > 0, as
// soon as hi changes by at most tol relative from one step to the next
// (the Ritz values are then found by bisection, which allocates nothing;
// with tol ≤ 0 by an eigendecomposition of T). It returns the number of
// operator applications; a NaN or infinity from op is a *BreakdownError.
func Lanczos(op Operator, start []float64, steps int, tol float64) (lo, hi float64, applied int, err error) {
	var l lanczos
	return l.run(op, start, steps, tol)
}

// LargestEigenvalue estimates λmax of a symmetric operator of dimension dim
// by min(steps, dim) Lanczos steps (see Lanczos) from a pseudo-random
// Gaussian start determined by seed. The estimate never exceeds λmax.
func LargestEigenvalue(op Operator, dim, steps int, seed uint64) (float64, error) {
	start := make([]float64, dim)
	gaussianFill(start, seed)
	_, hi, _, err := Lanczos(op, start, steps, 0)
	return hi, err
}

// gaussianFill fills v with standard normal entries from the PCG stream
// (seed, 2).
func gaussianFill(v []float64, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 2))
	for i := range v {
		v[i] = rnd.NormFloat64()
	}
}

// randomFill fills v with deterministic pseudo-random values in [-1, 1)
// from the splitmix64 sequence started at seed. It does not allocate, so
// the step-size checks of the solvers start their Lanczos steps from it.
func randomFill(v []float64, seed uint64) {
	s := seed
	for i := range v {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		v[i] = float64(z>>11)/(1<<52) - 1
	}
}

// lanczos holds the scratch of Lanczos, reused across runs.
type lanczos struct {
	prev, w       []float64
	alphas, betas []float64
}

func (l *lanczos) run(op Operator, start []float64, steps int, tol float64) (lo, hi float64, applied int, err error) {
	n := len(start)
	norm := floats.Norm(start, 2)
	if norm == 0 || !finite(norm) {
		return 0, 0, 0, &BreakdownError{Solver: "lanczos", Iter: 0, Quantity: "‖start‖", Value: norm}
	}
	q := start
	l.prev, l.w = grow(l.prev, n), grow(l.w, n)
	prev, w := l.prev, l.w
	clear(prev)
	floats.Scale(1/norm, q)
	alphas, betas := l.alphas[:0], l.betas[:0]
	defer func() { l.alphas, l.betas = alphas, betas }()
	beta := 0.0
	hi = math.NaN()
	last := min(steps, n) - 1
	for j := 0; j <= last; j++ {
		op(w, q)
		applied++
		a := floats.Dot(q, w)
		if !finite(a) {
			return 0, 0, applied, &BreakdownError{Solver: "lanczos", Iter: j + 1, Quantity: "qᵀAq", Value: a}
		}
		alphas = append(alphas, a)
		if tol > 0 {
			prevHi := hi
			lo, hi = tridiagRange(alphas, betas)
			if math.Abs(hi-prevHi) <= tol*math.Abs(hi) {
				return lo, hi, applied, nil
			}
		}
		if j == last {
			break
		}
		floats.AddScaled(w, -a, q)
		floats.AddScaled(w, -beta, prev)
		beta = floats.Norm(w, 2)
		if beta <= 1e-12*math.Abs(a) { // invariant subspace found: the Ritz values are exact
			break
		}
		betas = append(betas, beta)
		copy(prev, q)
		floats.ScaleTo(q, 1/beta, w)
	}
	if tol > 0 {
		lo, hi = tridiagRange(alphas, betas)
		return lo, hi, applied, nil
	}
	lo, hi, err = ritzRange(alphas, betas)
	return lo, hi, applied, err
}

// ritzRange returns the extreme eigenvalues of the symmetric tridiagonal
// matrix with diagonal alphas and off-diagonal betas, by an
// eigendecomposition.
func ritzRange(alphas, betas []float64) (lo, hi float64, err error) {
	m := len(alphas)
	t := mat.NewSymDense(m, nil)
	for i, a := range alphas {
		t.SetSym(i, i, a)
		if i+1 < m {
			t.SetSym(i, i+1, betas[i])
		}
	}
	var e mat.EigenSym
	if !e.Factorize(t, false) {
		return 0, 0, fmt.Errorf("implicit: lanczos: eigendecomposition of the %d×%d tridiagonal matrix failed", m, m)
	}
	v := e.Values(nil)
	return v[0], v[m-1], nil
}

// tridiagRange returns the extreme eigenvalues of the symmetric tridiagonal
// matrix with diagonal alphas and off-diagonal betas by bisection on
// Sturm counts inside its Gershgorin interval, to about 1e-15 relative.
func tridiagRange(alphas, betas []float64) (lo, hi float64) {
	m := len(alphas)
	a, b := math.Inf(1), math.Inf(-1)
	for i, d := range alphas {
		r := 0.0
		if i > 0 {
			r += math.Abs(betas[i-1])
		}
		if i+1 < m {
			r += math.Abs(betas[i])
		}
		a, b = math.Min(a, d-r), math.Max(b, d+r)
	}
	// below counts the eigenvalues below x (Sturm sequence of the leading
	// minors' pivots).
	below := func(x float64) int {
		c, d := 0, 1.0
		for i, ai := range alphas {
			off := 0.0
			if i > 0 {
				off = betas[i-1] * betas[i-1] / d
			}
			d = ai - x - off
			if d == 0 {
				d = -1e-300
			}
			if d < 0 {
				c++
			}
		}
		return c
	}
	// bisect returns the smallest x with below(x) ≥ k.
	bisect := func(k int) float64 {
		l, h := a, b
		for range 200 {
			mid := l + (h-l)/2
			if mid <= l || mid >= h {
				break
			}
			if below(mid) >= k {
				h = mid
			} else {
				l = mid
			}
		}
		return h
	}
	return bisect(1), bisect(m)
}
