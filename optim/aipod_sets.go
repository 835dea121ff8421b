package optim

// Equality-constraint sets of paper 004 (Xiao, Shen, Yin, Chen, "Alternating
// Implicit Projected SGD and Its Efficient Variants for Equality-constrained
// Bilevel Optimization", shared/papers/004_0b814357b1b03328.txt):
//
//	X = {x : B x = e},        Y(x) = {y : A y + h(x) = c}        (eq. 1)
//
// with A and B of any rank. Lemma 6 (line 671) gives the projection onto
// {z : A z = b} as (I − A⁺A) z + A⁺ b, A⁺ the Moore–Penrose pseudo-inverse.
// Affine (projection.go) needs A of full row rank, so the AiPOD family uses
// LinearEquality, which factorizes A once by a thin SVD A = U₁ S₁ V₁ᵀ
// (V₁ an orthonormal basis of Ran(Aᵀ)) and applies
//
//	P z = z − V₁ V₁ᵀ z                   (P = I − A⁺A, the projector onto Ker A)
//	Proj(z) = z + V₁ (S₁⁻¹ U₁ᵀ b − V₁ᵀ z)  (Lemma 6)
//
// in O(n r) per vector, r = rank A.

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// LinearEquality is the affine set {z : A z = b} for an m×n matrix A of any
// rank, with b in the range of A (paper 004, Assumption 4: A A⁺ b = b). It
// implements Projection, so it can also be Settings.ProjectX (the upper set X
// of paper 004) for any method.
type LinearEquality struct {
	m, n int
	a    *mat.Dense
	v1t  *mat.Dense // r×n: its rows are an orthonormal basis of Ran(Aᵀ) (V₁ᵀ)
	u1t  *mat.Dense // r×m: its rows are an orthonormal basis of Ran(A) (U₁ᵀ)
	s    []float64  // the r nonzero singular values
	b    []float64
	coef []float64 // S₁⁻¹ U₁ᵀ b: A⁺ b = V₁ coef
}

// NewLinearEquality returns the set {z : A z = b}, copying A and b. A may be
// rank-deficient (dependent rows are allowed) or have more rows than
// columns; singular values ≤ max(m, n)·ε·σ_max count as zero. It fails if b
// is not in the range of A (the set is empty) or A is zero.
func NewLinearEquality(a mat.Matrix, b []float64) (*LinearEquality, error) {
	l, err := newLinearEquality("NewLinearEquality", a, b)
	if err != nil {
		return nil, err
	}
	if r := l.rangeResidual(l.b); r > aipodRangeTol*(1+floats.Norm(l.b, 2)) {
		return nil, fmt.Errorf("optim: NewLinearEquality: b is not in the range of A (‖(I − A A⁺) b‖ = %.3g), so {z : A z = b} is empty", r)
	}
	return l, nil
}

// aipodRangeTol is the relative tolerance of the check that a right-hand side
// lies in Ran(A) (paper 004, Assumption 4).
const aipodRangeTol = 1e-9

func newLinearEquality(who string, a mat.Matrix, b []float64) (*LinearEquality, error) {
	m, n := a.Dims()
	if len(b) != m {
		return nil, fmt.Errorf("optim: %s: A is %d×%d but len(b) = %d", who, m, n, len(b))
	}
	l := &LinearEquality{m: m, n: n, a: mat.DenseCopyOf(a), b: append([]float64(nil), b...)}
	for i := range m {
		for j := range n {
			if v := l.a.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("optim: %s: A[%d][%d] = %v is not finite", who, i, j, v)
			}
		}
	}
	var svd mat.SVD
	if !svd.Factorize(l.a, mat.SVDThin) {
		return nil, fmt.Errorf("optim: %s: the SVD of A did not converge", who)
	}
	sv := svd.Values(nil)
	if len(sv) == 0 || sv[0] == 0 {
		return nil, fmt.Errorf("optim: %s: A is zero: leave the constraint out (nil) for an unconstrained variable", who)
	}
	tol := float64(max(m, n)) * 0x1p-52 * sv[0]
	r := 0
	for r < len(sv) && sv[r] > tol {
		r++
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	l.u1t = mat.DenseCopyOf(u.Slice(0, m, 0, r).T())
	l.v1t = mat.DenseCopyOf(v.Slice(0, n, 0, r).T())
	l.s = sv[:r]
	l.coef = l.pinvCoef(make([]float64, r), l.b)
	return l, nil
}

// Dim returns the dimension n of the space.
func (l *LinearEquality) Dim() int { return l.n }

// Rank returns the numerical rank r of A.
func (l *LinearEquality) Rank() int { return len(l.s) }

// Project implements Projection: dst = (I − A⁺A) x + A⁺ b (Lemma 6).
func (l *LinearEquality) Project(dst, x []float64) {
	checkProj("LinearEquality", l.n, dst, x)
	l.projectCoef(dst, x, l.coef)
}

// Null stores in dst the projection P v = (I − A⁺A) v of v onto the null
// space of A (P_x or P_y of paper 004, Section 2.1). dst and v may be the
// same slice.
func (l *LinearEquality) Null(dst, v []float64) {
	checkProj("LinearEquality.Null", l.n, dst, v)
	r := len(l.s)
	t := make([]float64, r)
	l.v1T(t, v)
	copy(dst, v)
	for j := range r {
		l.addCol(dst, j, -t[j])
	}
}

// Violation returns ‖A z − b‖∞, the constraint violation of z.
func (l *LinearEquality) Violation(z []float64) float64 {
	if len(z) != l.n {
		panic(fmt.Sprintf("optim: LinearEquality.Violation: len(z) = %d, set has dimension %d", len(z), l.n))
	}
	return l.violation(z, l.b)
}

func (l *LinearEquality) violation(z, b []float64) float64 {
	worst := 0.0
	for i := range l.m {
		worst = math.Max(worst, math.Abs(floats.Dot(l.a.RawRowView(i), z)-b[i]))
	}
	return worst
}

// projectCoef stores in dst the projection of x onto the affine set
// {z : A z = b'} whose minimum-norm point is A⁺ b' = V₁ coef:
// dst = x + V₁ (coef − V₁ᵀ x). dst and x may be the same slice.
func (l *LinearEquality) projectCoef(dst, x, coef []float64) {
	r := len(l.s)
	t := make([]float64, r)
	l.v1T(t, x)
	copy(dst, x)
	for j := range r {
		l.addCol(dst, j, coef[j]-t[j])
	}
}

// v1T stores V₁ᵀ v in t.
func (l *LinearEquality) v1T(t, v []float64) {
	for j := range t {
		t[j] = floats.Dot(l.v1t.RawRowView(j), v)
	}
}

// addCol adds s times column j of V₁ to dst.
func (l *LinearEquality) addCol(dst []float64, j int, s float64) {
	floats.AddScaled(dst, s, l.v1t.RawRowView(j))
}

// pinvCoef stores S₁⁻¹ U₁ᵀ b in c (A⁺ b = V₁ c) and returns c.
func (l *LinearEquality) pinvCoef(c, b []float64) []float64 {
	for j, s := range l.s {
		c[j] = floats.Dot(l.u1t.RawRowView(j), b) / s
	}
	return c
}

// pinvT stores A⁺ᵀ v = U₁ S₁⁻¹ V₁ᵀ v in dst (length m).
func (l *LinearEquality) pinvT(dst, v []float64) {
	clear(dst)
	for j, s := range l.s {
		floats.AddScaled(dst, floats.Dot(l.v1t.RawRowView(j), v)/s, l.u1t.RawRowView(j))
	}
}

// rangeResidual returns ‖(I − U₁U₁ᵀ) b‖, the distance of b from Ran(A).
func (l *LinearEquality) rangeResidual(b []float64) float64 {
	res := append([]float64(nil), b...)
	for j := range l.s {
		u := l.u1t.RawRowView(j)
		floats.AddScaled(res, -floats.Dot(u, b), u)
	}
	return floats.Norm(res, 2)
}

// Coupling is the map h of the lower-level constraint A y + h(x) = c of
// paper 004 (eq. 1b): h(x) has one entry per row of A. AiPOD and E-AiPOD
// need h(x) for the projection onto Y(x) and the vector–Jacobian product
// ∇h(x)ᵀ z for the hypergradient (eqs. 8 and 9b). Its calls are not counted
// in Calls.
type Coupling interface {
	// Eval stores h(x) in dst.
	Eval(dst, x []float64)
	// VJP stores ∇h(x)ᵀ z in dst (x-space), where ∇h(x) is the Jacobian.
	VJP(dst, x, z []float64)
}

// LinearCoupling is h(x) = H x for a matrix H (the coupling of the
// synthetic experiment of paper 004, Section 6: Y(x) = {y : A y + H x = 0}).
type LinearCoupling struct {
	h *mat.Dense
}

// NewLinearCoupling returns h(x) = H x, copying H.
func NewLinearCoupling(h mat.Matrix) *LinearCoupling {
	return &LinearCoupling{h: mat.DenseCopyOf(h)}
}

// Eval implements Coupling.
func (c *LinearCoupling) Eval(dst, x []float64) {
	r, n := c.h.Dims()
	if len(dst) != r || len(x) != n {
		panic(fmt.Sprintf("optim: LinearCoupling.Eval: H is %d×%d, len(dst) = %d, len(x) = %d", r, n, len(dst), len(x)))
	}
	for i := range r {
		dst[i] = floats.Dot(c.h.RawRowView(i), x)
	}
}

// VJP implements Coupling: dst = Hᵀ z.
func (c *LinearCoupling) VJP(dst, x, z []float64) {
	r, n := c.h.Dims()
	if len(dst) != n || len(z) != r {
		panic(fmt.Sprintf("optim: LinearCoupling.VJP: H is %d×%d, len(dst) = %d, len(z) = %d", r, n, len(dst), len(z)))
	}
	clear(dst)
	for i := range r {
		floats.AddScaled(dst, z[i], c.h.RawRowView(i))
	}
}

// LowerEquality is the lower-level constraint set Y(x) = {y : A y + h(x) = c}
// of paper 004 (eq. 1b), A of any rank. With h nil the set does not depend on
// x and c must lie in Ran(A); otherwise c − h(x) must lie in Ran(A) for
// every x (Assumption 4), which the methods check at each x_k.
type LowerEquality struct {
	set *LinearEquality // A and c
	h   Coupling
}

// NewLowerEquality returns Y(x) = {y : A y + h(x) = c}, copying A and c;
// h nil means h = 0. It fails if A is zero, or if h is nil and c is not in
// the range of A.
func NewLowerEquality(a mat.Matrix, c []float64, h Coupling) (*LowerEquality, error) {
	set, err := newLinearEquality("NewLowerEquality", a, c)
	if err != nil {
		return nil, err
	}
	if h == nil {
		if r := set.rangeResidual(c); r > aipodRangeTol*(1+floats.Norm(c, 2)) {
			return nil, fmt.Errorf("optim: NewLowerEquality: c is not in the range of A (‖(I − A A⁺) c‖ = %.3g), so Y is empty", r)
		}
	}
	return &LowerEquality{set: set, h: h}, nil
}

// Dim returns the dimension of y.
func (l *LowerEquality) Dim() int { return l.set.n }

// Rows returns the number of rows of A (the length of h(x) and c).
func (l *LowerEquality) Rows() int { return l.set.m }

// Coupled reports whether the set depends on x (h ≠ 0).
func (l *LowerEquality) Coupled() bool { return l.h != nil }

// Violation returns ‖A y + h(x) − c‖∞; x is ignored when h is nil.
func (l *LowerEquality) Violation(x, y []float64) float64 {
	if len(y) != l.set.n {
		panic(fmt.Sprintf("optim: LowerEquality.Violation: len(y) = %d, set has dimension %d", len(y), l.set.n))
	}
	return l.set.violation(y, l.rhs(make([]float64, l.set.m), x))
}

// Project stores in dst the projection of y onto Y(x) (Lemma 6):
// (I − A⁺A) y + A⁺ (c − h(x)). It returns an error if c − h(x) is not in the
// range of A (Assumption 4 fails at x, Y(x) is empty).
func (l *LowerEquality) Project(dst, x, y []float64) error {
	checkProj("LowerEquality", l.set.n, dst, y)
	coef, err := l.coefAt(x)
	if err != nil {
		return err
	}
	l.set.projectCoef(dst, y, coef)
	return nil
}

// Null stores in dst P_y v = (I − A⁺A) v, the projection onto Ker A.
func (l *LowerEquality) Null(dst, v []float64) { l.set.Null(dst, v) }

// rhs stores c − h(x) in dst and returns it.
func (l *LowerEquality) rhs(dst, x []float64) []float64 {
	if l.h == nil {
		copy(dst, l.set.b)
		return dst
	}
	l.h.Eval(dst, x)
	for i, c := range l.set.b {
		dst[i] = c - dst[i]
	}
	return dst
}

// coefAt returns S₁⁻¹ U₁ᵀ (c − h(x)), the coordinates of the minimum-norm
// point of Y(x) in V₁, after checking Assumption 4 at x.
func (l *LowerEquality) coefAt(x []float64) ([]float64, error) {
	if l.h == nil {
		return l.set.coef, nil
	}
	b := l.rhs(make([]float64, l.set.m), x)
	if r := l.set.rangeResidual(b); r > aipodRangeTol*(1+floats.Norm(b, 2)) {
		return nil, fmt.Errorf("Y(x) = {y : A y + h(x) = c} is empty at this x: ‖(I − A A⁺)(c − h(x))‖ = %.3g (paper 004, Assumption 4 needs c − h(x) in Ran(A) for every x)", r)
	}
	return l.set.pinvCoef(make([]float64, len(l.set.s)), b), nil
}

// hTerm stores in dst ∇h(x)ᵀ A⁺ᵀ v, the coupling term of the constrained
// hypergradient (eq. 8 and 9b); h must be non-nil.
func (l *LowerEquality) hTerm(dst, x, v []float64) {
	z := make([]float64, l.set.m)
	l.set.pinvT(z, v)
	l.h.VJP(dst, x, z)
}

var (
	_ Projection = (*LinearEquality)(nil)
	_ Coupling   = (*LinearCoupling)(nil)
)
