package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The two problems of paper 001 (Huang 2023, Sec. 5), written as gorgonia
// graphs (compiled by package graph, which derives every oracle) and, for
// matrix sensing, also in closed form: assembling the d×d lower Hessian
// from d Hessian-vector products of the graph costs d passes over the
// data, while the closed form needs two, which is what makes MGBiO at
// d = 200 affordable. The tests check the graphs with graph.Check and the
// closed form against the graph.

// plGame is the bilevel PL game of paper 001, eq. (33):
//
//	min_x ½ xᵀPx + xᵀR1 y   s.t.  y ∈ argmin_y ½ yᵀQy + xᵀR2 y,
//
// P = mean p_i p_iᵀ, Q = mean q_i q_iᵀ with p_i ~ N(0, U1 D1 U1ᵀ), q_i ~
// N(0, U2 D2 U2ᵀ), U1, U2 column-orthogonal d×l and D1, D2 diagonal with
// Uniform[mu, L] entries; R1 = mean 0.01 r1_i r1_iᵀ, R2 = mean 0.01 r2_i
// s2_iᵀ with r_i ~ N(0, 0.001 V Vᵀ), V Gaussian. As printed, s2_i = r2_i,
// and then R2ᵀx has a component outside range(Q) = range(U2) for almost
// every x, so g(x, ·) is unbounded below and argmin is empty (digest
// papers-001_002.md, pitfall 4). The well-posedness fix takes s2_i =
// U2U2ᵀ r2_i, which puts R2ᵀx in range(Q): g(x, ·) is then PL (Q is
// singular, so not strongly convex) with minimizers −Q⁺R2ᵀx + null(Q), and
// gradient descent from y = 0 stays in range(Q) and finds the minimum-norm
// one, y*(x) = −Q⁺R2ᵀx. With it
//
//	Φ(x) = ½ xᵀPx − xᵀR1Q⁺R2ᵀx,   ∇Φ(x) = (P − R1Q⁺R2ᵀ − R2Q⁺R1ᵀ) x.
type plGame struct {
	d, l, n int
	// Per-sample data, n×d row-major: upper (p, r1), lower (q, r2, s2).
	p, r1, q, r2, s2 []float64
	// The exact matrices and M = P − R1Q⁺R2ᵀ − R2Q⁺R1ᵀ, ∇Φ(x) = M x.
	P, Q, R1, R2, M *mat.Dense
}

// newPLGame draws the PL game with the given dimensions, spectrum bounds
// and seed; fix selects the well-posedness fix.
func newPLGame(d, l, n int, mu, L float64, fix bool, seed uint64) *plGame {
	rng := rand.New(rand.NewPCG(seed, 0x91))
	gauss := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := range r {
			for j := range c {
				m.Set(i, j, rng.NormFloat64())
			}
		}
		return m
	}
	orth := func() *mat.Dense { // d×l with orthonormal columns
		var qr mat.QR
		qr.Factorize(gauss(d, l))
		var q mat.Dense
		qr.QTo(&q)
		return mat.DenseCopyOf(q.Slice(0, d, 0, l))
	}
	// samples returns n rows U diag(√D) z, z ~ N(0, I_l), D ~ U[mu, L].
	samples := func(u *mat.Dense) []float64 {
		sd := make([]float64, l)
		for k := range sd {
			sd[k] = math.Sqrt(mu + (L-mu)*rng.Float64())
		}
		out := make([]float64, n*d)
		z := make([]float64, l)
		for i := range n {
			for k := range z {
				z[k] = sd[k] * rng.NormFloat64()
			}
			row := mat.NewVecDense(d, out[i*d:(i+1)*d])
			row.MulVec(u, mat.NewVecDense(l, z))
		}
		return out
	}
	coupling := func() []float64 { // rows √0.001 V z, z ~ N(0, I_d)
		v := gauss(d, d)
		out := make([]float64, n*d)
		z := make([]float64, d)
		for i := range n {
			for k := range z {
				z[k] = math.Sqrt(0.001) * rng.NormFloat64()
			}
			row := mat.NewVecDense(d, out[i*d:(i+1)*d])
			row.MulVec(v, mat.NewVecDense(d, z))
		}
		return out
	}
	g := &plGame{d: d, l: l, n: n}
	u1, u2 := orth(), orth()
	g.p, g.q = samples(u1), samples(u2)
	g.r1, g.r2 = coupling(), coupling()
	g.s2 = append([]float64(nil), g.r2...)
	if fix {
		var proj mat.Dense
		proj.Mul(u2, u2.T())
		for i := range n {
			row := mat.NewVecDense(d, g.s2[i*d:(i+1)*d])
			row.MulVec(&proj, mat.NewVecDense(d, append([]float64(nil), g.r2[i*d:(i+1)*d]...)))
		}
	}
	// Exact matrices: means of the per-sample terms.
	outer := func(a, b []float64, scale float64) *mat.Dense {
		am, bm := mat.NewDense(n, d, a), mat.NewDense(n, d, b)
		var m mat.Dense
		m.Mul(am.T(), bm)
		m.Scale(scale/float64(n), &m)
		return &m
	}
	g.P, g.Q = outer(g.p, g.p, 1), outer(g.q, g.q, 1)
	g.R1, g.R2 = outer(g.r1, g.r1, 0.01), outer(g.r2, g.s2, 0.01)
	var qinv, a, b mat.Dense
	pinv(&qinv, g.Q, 1e-9)
	a.Mul(g.R1, &qinv)
	a.Mul(&a, g.R2.T())
	b.Add(&a, a.T())
	g.M = mat.NewDense(d, d, nil)
	g.M.Sub(g.P, &b)
	return g
}

// pinv stores the pseudo-inverse of the symmetric matrix a in dst,
// dropping eigenvalues below tol times the largest.
func pinv(dst *mat.Dense, a *mat.Dense, tol float64) {
	n, _ := a.Dims()
	s := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			s.SetSym(i, j, (a.At(i, j)+a.At(j, i))/2)
		}
	}
	var e mat.EigenSym
	e.Factorize(s, true)
	vals := e.Values(nil)
	var vecs mat.Dense
	e.VectorsTo(&vecs)
	top := 0.0
	for _, v := range vals {
		top = math.Max(top, math.Abs(v))
	}
	dst.ReuseAs(n, n)
	dst.Zero()
	for k, v := range vals {
		if math.Abs(v) <= tol*top {
			continue
		}
		col := mat.Col(nil, k, &vecs)
		for i := range n {
			for j := range n {
				dst.Set(i, j, dst.At(i, j)+col[i]*col[j]/v)
			}
		}
	}
}

// gradNorm returns ‖∇Φ(x)‖ = ‖M x‖.
func (g *plGame) gradNorm(x []float64) float64 {
	var v mat.VecDense
	v.MulVec(g.M, mat.NewVecDense(g.d, x))
	return mat.Norm(&v, 2)
}

// objective writes the PL game as a gorgonia graph: per-sample terms
// averaged with Mean, so minibatches are unbiased.
func (g *plGame) objective() (graph.Objective, error) {
	var obj graph.Objective
	err := building(func() {
		eg := G.NewGraph()
		x := vector(eg, "x", make([]float64, g.d))
		y := vector(eg, "y", make([]float64, g.d))
		p, r1 := matrix(eg, "p", g.p, g.n, g.d), matrix(eg, "r1", g.r1, g.n, g.d)
		q, r2, s2 := matrix(eg, "q", g.q, g.n, g.d), matrix(eg, "r2", g.r2, g.n, g.d), matrix(eg, "s2", g.s2, g.n, g.d)
		mv := func(m, v *G.Node) *G.Node { return G.Must(G.Mul(m, v)) }
		half := G.NewConstant(0.5)
		c := G.NewConstant(0.01)
		// f = mean ½ (p_iᵀx)² + 0.01 (r1_iᵀx)(r1_iᵀy)
		fTerms := G.Must(G.Add(G.Must(G.Mul(half, G.Must(G.Square(mv(p, x))))),
			G.Must(G.Mul(c, G.Must(G.HadamardProd(mv(r1, x), mv(r1, y)))))))
		// g = mean ½ (q_iᵀy)² + 0.01 (r2_iᵀx)(s2_iᵀy)
		gTerms := G.Must(G.Add(G.Must(G.Mul(half, G.Must(G.Square(mv(q, y))))),
			G.Must(G.Mul(c, G.Must(G.HadamardProd(mv(r2, x), mv(s2, y)))))))
		obj = graph.Objective{Upper: G.Must(G.Mean(fTerms)), Lower: G.Must(G.Mean(gTerms)),
			Outer: []*G.Node{x}, Inner: []*G.Node{y},
			UpperData: []*G.Node{p, r1}, LowerData: []*G.Node{q, r2, s2}}
	})
	return obj, err
}

// sensing is the matrix-sensing hyper-representation problem of paper 001,
// eqs. (34)–(35): H* = U*U*ᵀ with U* ∈ R^{d×r} of N(0, 1/d) entries,
// measurements e_i = ⟨C_i, H*⟩ with C_i of N(0, 1) entries, n = 20d
// samples split 40% training (lower level), 60% validation (upper level),
// and U = [x, y] with x ∈ R^{d×(r−1)} the first r−1 columns (the
// representation) and y ∈ R^d the last:
//
//	l_i(U) = ½ (⟨C_i, UUᵀ⟩ − e_i)²,   f = mean_val l_i,   g = mean_train l_i.
//
// g is a quartic in y, symmetric under y ↦ −y, so it has several
// minimizers: a nonconvex lower level (local PL). It implements
// oracle.Problem, with the dense matrices HessYY and HessXY, in closed form with S_i = C_i + C_iᵀ,
// a_i = ½⟨S_i, UUᵀ⟩ − e_i:
//
//	∇U l_i = a_i S_i U,   ∇yy l_i = a_i S_i + (S_i y)(S_i y)ᵀ,   ∇xy l_i = vec(S_i x)(S_i y)ᵀ.
type sensing struct {
	d, r, n    int
	c          []float64 // n×d×d, the C_i (for the graph)
	s          []float64 // n×d×d, S_i = C_i + C_iᵀ
	e          []float64 // n
	train, val []int     // sample indices of the two levels
	hstar      []float64 // d×d
	dx         int       // d(r−1)
	buf        []float64 // scratch, d + d(r−1) per use
}

func newSensing(d, r int, seed uint64) *sensing {
	rng := rand.New(rand.NewPCG(seed, 0x5e))
	n := 20 * d
	p := &sensing{d: d, r: r, n: n, dx: d * (r - 1)}
	ustar := make([]float64, d*r)
	for i := range ustar {
		ustar[i] = rng.NormFloat64() / math.Sqrt(float64(d))
	}
	p.hstar = make([]float64, d*d)
	for a := range d {
		for b := range d {
			for k := range r {
				p.hstar[a*d+b] += ustar[a*r+k] * ustar[b*r+k]
			}
		}
	}
	p.c, p.s, p.e = make([]float64, n*d*d), make([]float64, n*d*d), make([]float64, n)
	for i := range n {
		ci := p.c[i*d*d : (i+1)*d*d]
		for k := range ci {
			ci[k] = rng.NormFloat64()
		}
		si := p.s[i*d*d : (i+1)*d*d]
		for a := range d {
			for b := range d {
				si[a*d+b] = ci[a*d+b] + ci[b*d+a]
			}
		}
		for k := range ci {
			p.e[i] += ci[k] * p.hstar[k]
		}
	}
	perm := rng.Perm(n)
	nt := 2 * n / 5
	p.train, p.val = perm[:nt], perm[nt:]
	return p
}

// start returns a random starting point U0 = [x0, y0] with N(0, 1/d)
// entries (U = 0 is a stationary point).
func (p *sensing) start(seed uint64) (x0, y0 []float64) {
	rng := rand.New(rand.NewPCG(seed, 0x57))
	x0, y0 = make([]float64, p.dx), make([]float64, p.d)
	for i := range x0 {
		x0[i] = rng.NormFloat64() / math.Sqrt(float64(p.d))
	}
	for i := range y0 {
		y0[i] = rng.NormFloat64() / math.Sqrt(float64(p.d))
	}
	return x0, y0
}

// uut returns U Uᵀ for U = [x, y] (x row-major d×(r−1)).
func (p *sensing) uut(x, y []float64) []float64 {
	d, k := p.d, p.r-1
	m := make([]float64, d*d)
	for a := range d {
		for b := range d {
			v := y[a] * y[b]
			for j := range k {
				v += x[a*k+j] * x[b*k+j]
			}
			m[a*d+b] = v
		}
	}
	return m
}

// relErr returns ‖UUᵀ − H*‖²_F / ‖H*‖²_F.
func (p *sensing) relErr(x, y []float64) float64 {
	m := p.uut(x, y)
	var num, den float64
	for i, h := range p.hstar {
		num += (m[i] - h) * (m[i] - h)
		den += h * h
	}
	return num / den
}

// loss returns (1/2n) Σ_i (⟨C_i, UUᵀ⟩ − e_i)² over all n samples.
func (p *sensing) loss(x, y []float64) float64 {
	var sum float64
	for i := range p.n {
		a := p.residual(i, x, y, nil, nil)
		sum += a * a
	}
	return sum / (2 * float64(p.n))
}

// residual returns a_i and stores S_i y in sy and S_i x in sx (d×(r−1)),
// when not nil (they are needed for a_i anyway; nil ones use scratch).
func (p *sensing) residual(i int, x, y, sy, sx []float64) float64 {
	d, k := p.d, p.r-1
	if sy == nil || sx == nil {
		if len(p.buf) < d+d*k {
			p.buf = make([]float64, d+d*k)
		}
		sy, sx = p.buf[:d], p.buf[d:d+d*k]
	}
	si := p.s[i*d*d : (i+1)*d*d]
	clear(sx)
	for a := range d {
		row := si[a*d : (a+1)*d]
		var v float64
		for b, sab := range row {
			v += sab * y[b]
		}
		sy[a] = v
		sxa := sx[a*k : (a+1)*k]
		for b, sab := range row {
			xb := x[b*k : (b+1)*k]
			for j := range k {
				sxa[j] += sab * xb[j]
			}
		}
	}
	quad := 0.0
	for a := range d {
		quad += y[a] * sy[a]
		for j := range k {
			quad += x[a*k+j] * sx[a*k+j]
		}
	}
	return quad/2 - p.e[i]
}

// The oracle.Problem methods. Batches index the level's samples.

func (p *sensing) DimX() int     { return p.dx }
func (p *sensing) DimY() int     { return p.d }
func (p *sensing) NumLower() int { return len(p.train) }
func (p *sensing) NumUpper() int { return len(p.val) }

// each calls fn(i, a_i, S_i y, S_i x) for the samples i of batch in set
// and returns 1/|batch|.
func (p *sensing) each(set, batch []int, x, y []float64, fn func(i int, a float64, sy, sx []float64)) float64 {
	sy, sx := make([]float64, p.d), make([]float64, p.dx)
	count := 0
	visit := func(j int) {
		a := p.residual(set[j], x, y, sy, sx)
		fn(set[j], a, sy, sx)
		count++
	}
	if batch == nil {
		for j := range set {
			visit(j)
		}
	} else {
		for _, j := range batch {
			visit(j)
		}
	}
	return 1 / float64(count)
}

func (p *sensing) value(set, batch []int, x, y []float64) float64 {
	var sum float64
	w := p.each(set, batch, x, y, func(_ int, a float64, _, _ []float64) { sum += a * a / 2 })
	return sum * w
}

func (p *sensing) grad(set, batch []int, dx, dy, x, y []float64) {
	if dx != nil {
		clear(dx)
	}
	if dy != nil {
		clear(dy)
	}
	w := p.each(set, batch, x, y, func(_ int, a float64, sy, sx []float64) {
		if dx != nil {
			for j, v := range sx {
				dx[j] += a * v
			}
		}
		if dy != nil {
			for j, v := range sy {
				dy[j] += a * v
			}
		}
	})
	for _, s := range [][]float64{dx, dy} {
		for j := range s {
			s[j] *= w
		}
	}
}

func (p *sensing) F(x, y []float64, batch []int) float64 { return p.value(p.val, batch, x, y) }
func (p *sensing) G(x, y []float64, batch []int) float64 { return p.value(p.train, batch, x, y) }
func (p *sensing) GradF(dx, dy, x, y []float64, batch []int) {
	p.grad(p.val, batch, dx, dy, x, y)
}
func (p *sensing) GradG(dx, dy, x, y []float64, batch []int) {
	p.grad(p.train, batch, dx, dy, x, y)
}

func (p *sensing) HVP(dst, x, y, v []float64, batch []int) {
	clear(dst)
	d := p.d
	sv := make([]float64, d)
	w := p.each(p.train, batch, x, y, func(i int, a float64, sy, _ []float64) {
		var dot float64
		for j := range d {
			dot += sy[j] * v[j]
		}
		for j := range d {
			dst[j] += dot * sy[j]
		}
		p.applyS(i, v, sv)
		for j := range d {
			dst[j] += a * sv[j]
		}
	})
	for j := range dst {
		dst[j] *= w
	}
}

func (p *sensing) MixedXY(dst, x, y, v []float64, batch []int) {
	clear(dst)
	w := p.each(p.train, batch, x, y, func(_ int, _ float64, sy, sx []float64) {
		var dot float64
		for j := range sy {
			dot += sy[j] * v[j]
		}
		for j := range sx {
			dst[j] += dot * sx[j]
		}
	})
	for j := range dst {
		dst[j] *= w
	}
}

func (p *sensing) MixedYX(dst, x, y, u []float64, batch []int) {
	clear(dst)
	w := p.each(p.train, batch, x, y, func(_ int, _ float64, sy, sx []float64) {
		var dot float64
		for j := range sx {
			dot += sx[j] * u[j]
		}
		for j := range sy {
			dst[j] += dot * sy[j]
		}
	})
	for j := range dst {
		dst[j] *= w
	}
}

// Capabilities declares the dense matrices HessYY and HessXY.
func (p *sensing) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HessYY: p.HessYY, HessXY: p.HessXY}
}

// HessYY stores ∇yy g in dst.
func (p *sensing) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	d := p.d
	if dst.IsEmpty() {
		dst.ReuseAsSym(d)
	}
	acc := make([]float64, d*d)
	w := p.each(p.train, batch, x, y, func(i int, a float64, sy, _ []float64) {
		si := p.s[i*d*d : (i+1)*d*d]
		for i := range d {
			for j := i; j < d; j++ {
				acc[i*d+j] += a*si[i*d+j] + sy[i]*sy[j]
			}
		}
	})
	for i := range d {
		for j := i; j < d; j++ {
			dst.SetSym(i, j, acc[i*d+j]*w)
		}
	}
}

// HessXY stores ∇xy g in dst: entry (i, j) is ∂²g/∂x_i∂y_j.
func (p *sensing) HessXY(dst *mat.Dense, x, y []float64, batch []int) {
	if dst.IsEmpty() {
		dst.ReuseAs(p.dx, p.d)
	}
	acc := make([]float64, p.dx*p.d)
	w := p.each(p.train, batch, x, y, func(_ int, _ float64, sy, sx []float64) {
		for i, a := range sx {
			row := acc[i*p.d : (i+1)*p.d]
			for j, b := range sy {
				row[j] += a * b
			}
		}
	})
	for i := range p.dx {
		for j := range p.d {
			dst.Set(i, j, acc[i*p.d+j]*w)
		}
	}
}

// applyS stores S_i v in dst.
func (p *sensing) applyS(i int, v, dst []float64) {
	d := p.d
	si := p.s[i*d*d : (i+1)*d*d]
	for a := range d {
		var s float64
		for b, sab := range si[a*d : (a+1)*d] {
			s += sab * v[b]
		}
		dst[a] = s
	}
}

var _ oracle.Problem = (*sensing)(nil)

// objective writes matrix sensing as a gorgonia graph: ⟨C_i, UUᵀ⟩ is row i
// of the n×d² matrix of the C_i times vec(xxᵀ + yyᵀ).
func (p *sensing) objective() (graph.Objective, error) {
	var obj graph.Objective
	d, k := p.d, p.r-1
	rows := func(idx []int) ([]float64, []float64) {
		c, e := make([]float64, len(idx)*d*d), make([]float64, len(idx))
		for j, i := range idx {
			copy(c[j*d*d:(j+1)*d*d], p.c[i*d*d:(i+1)*d*d])
			e[j] = p.e[i]
		}
		return c, e
	}
	ct, et := rows(p.train)
	cv, ev := rows(p.val)
	err := building(func() {
		eg := G.NewGraph()
		x := matrix(eg, "x", make([]float64, d*k), d, k)
		y := vector(eg, "y", make([]float64, d))
		ctn, etn := matrix(eg, "C", ct, len(p.train), d*d), vector(eg, "e", et)
		cvn, evn := matrix(eg, "Cval", cv, len(p.val), d*d), vector(eg, "eval", ev)
		m := G.Must(G.Add(G.Must(G.Mul(x, G.Must(G.Transpose(x)))), G.Must(G.OuterProd(y, y))))
		vec := G.Must(G.Reshape(m, tensor.Shape{d * d}))
		half := G.NewConstant(0.5)
		loss := func(c, e *G.Node) *G.Node {
			r := G.Must(G.Sub(G.Must(G.Mul(c, vec)), e))
			return G.Must(G.Mul(half, G.Must(G.Mean(G.Must(G.Square(r))))))
		}
		obj = graph.Objective{Upper: loss(cvn, evn), Lower: loss(ctn, etn),
			Outer: []*G.Node{x}, Inner: []*G.Node{y},
			UpperData: []*G.Node{cvn, evn}, LowerData: []*G.Node{ctn, etn}}
	})
	return obj, err
}

func vector(g *G.ExprGraph, name string, v []float64) *G.Node {
	return G.NewVector(g, G.Float64, G.WithShape(len(v)), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))))
}

func matrix(g *G.ExprGraph, name string, v []float64, r, c int) *G.Node {
	return G.NewMatrix(g, G.Float64, G.WithShape(r, c), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v))))
}

// building runs build, turning a panic of gorgonia.Must into an error.
func building(build func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building the graph: %v", r)
		}
	}()
	build()
	return nil
}
