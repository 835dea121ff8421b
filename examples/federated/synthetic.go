package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gobilevel/bilevel/graph"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// synthetic is the equality-constrained problem of paper 004, Sec. 6.1:
//
//	min_{x ∈ X} F(x) = sin(cᵀx + dᵀy*(x)) + ln(‖x + y*(x)‖² + 1),
//	y*(x) = argmin_{y ∈ Y(x)} ½‖x − y‖²,
//	X = {x : Bx = 0} ⊂ R^n,  Y(x) = {y : Ay + Hx = 0} ⊂ R^n,
//
// with A and B rank-deficient and range(H) ⊆ range(A) (Assumption 4). Then
// y*(x) = Jx, J = (I − A⁺A) − A⁺H, and
//
//	∇F(x) = cos(cᵀx + dᵀJx)(c + Jᵀd) + 2(I + J)ᵀ(I + J)x / (‖(I + J)x‖² + 1).
//
// The paper adds N(0, 0.1²) noise to the gradients. Oracles here must be
// deterministic functions of their batch, so the noise is built into the
// data: sample i adds a_iᵀx + b_iᵀy to f and e_iᵀy to g, with a_i, b_i, e_i
// of N(0, σ²) entries, centered over the samples; a single-sample gradient
// is the exact gradient plus N(0, σ²) noise, and the full-data objectives
// are exactly those above.
type synthetic struct {
	n       int
	a, b, h *mat.Dense // A (rank-deficient), B (rank-deficient), H = A K
	c, d    []float64
	j, ij   *mat.Dense // J and I + J
	px      *mat.Dense // P_x = I − B⁺B
	samples int
	noiseF  []float64 // samples × 2n: a_i then b_i
	noiseG  []float64 // samples × n: e_i
}

func newSynthetic(n, samples int, sigma float64, seed uint64) *synthetic {
	rng := rand.New(rand.NewPCG(seed, 0xa1))
	gauss := func(r, c int, s float64) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := range r {
			for j := range c {
				m.Set(i, j, s*rng.NormFloat64())
			}
		}
		return m
	}
	lowRank := func(r, c, k int) *mat.Dense {
		var m mat.Dense
		m.Mul(gauss(r, k, 1/math.Sqrt(float64(k))), gauss(k, c, 1/math.Sqrt(float64(c))))
		return &m
	}
	s := &synthetic{n: n, samples: samples}
	s.a = lowRank(3*n/5, n, n/2) // 60×100 of rank 50 for n = 100
	s.b = lowRank(n, n, 4*n/5)   // rank 80: X has dimension 20
	var h mat.Dense
	h.Mul(s.a, gauss(n, n, 0.1/math.Sqrt(float64(n))))
	s.h = &h
	s.c, s.d = make([]float64, n), make([]float64, n)
	for i := range s.c {
		s.c[i], s.d[i] = rng.NormFloat64()/math.Sqrt(float64(n)), rng.NormFloat64()/math.Sqrt(float64(n))
	}
	ap, bp := pseudoInverse(s.a), pseudoInverse(s.b)
	var apa, aph, bpb mat.Dense
	apa.Mul(ap, s.a)
	aph.Mul(ap, s.h)
	bpb.Mul(bp, s.b)
	id := eye(n)
	s.j = mat.NewDense(n, n, nil)
	s.j.Sub(id, &apa)
	s.j.Sub(s.j, &aph)
	s.ij = mat.NewDense(n, n, nil)
	s.ij.Add(id, s.j)
	s.px = mat.NewDense(n, n, nil)
	s.px.Sub(id, &bpb)
	center := func(v []float64, width int) {
		for k := range width {
			var m float64
			for i := range samples {
				m += v[i*width+k]
			}
			m /= float64(samples)
			for i := range samples {
				v[i*width+k] -= m
			}
		}
	}
	s.noiseF, s.noiseG = make([]float64, samples*2*n), make([]float64, samples*n)
	for i := range s.noiseF {
		s.noiseF[i] = sigma * rng.NormFloat64()
	}
	for i := range s.noiseG {
		s.noiseG[i] = sigma * rng.NormFloat64()
	}
	center(s.noiseF, 2*n)
	center(s.noiseG, n)
	return s
}

func eye(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := range n {
		m.Set(i, i, 1)
	}
	return m
}

// pseudoInverse returns the Moore–Penrose pseudo-inverse of a by SVD.
func pseudoInverse(a *mat.Dense) *mat.Dense {
	r, c := a.Dims()
	var svd mat.SVD
	svd.Factorize(a, mat.SVDThin)
	vals := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	tol := 1e-10 * vals[0]
	out := mat.NewDense(c, r, nil)
	for k, sv := range vals {
		if sv <= tol {
			continue
		}
		for i := range c {
			for j := range r {
				out.Set(i, j, out.At(i, j)+v.At(i, k)*u.At(j, k)/sv)
			}
		}
	}
	return out
}

// yStar returns y*(x) = J x.
func (s *synthetic) yStar(x []float64) []float64 {
	var y mat.VecDense
	y.MulVec(s.j, mat.NewVecDense(s.n, x))
	return y.RawVector().Data
}

// gradF returns ∇F(x).
func (s *synthetic) gradF(x []float64) []float64 {
	xv := mat.NewVecDense(s.n, x)
	var jx, z, jd, out mat.VecDense
	jx.MulVec(s.j, xv)
	arg := mat.Dot(mat.NewVecDense(s.n, s.c), xv) + mat.Dot(mat.NewVecDense(s.n, s.d), &jx)
	z.MulVec(s.ij, xv)
	q := mat.Dot(&z, &z) + 1
	jd.MulVec(s.j.T(), mat.NewVecDense(s.n, s.d))
	jd.AddVec(&jd, mat.NewVecDense(s.n, s.c))
	out.MulVec(s.ij.T(), &z)
	out.ScaleVec(2/q, &out)
	out.AddScaledVec(&out, math.Cos(arg), &jd)
	return out.RawVector().Data
}

// stationarity returns ‖P_x ∇F(x)‖², the measure of eq. 4.
func (s *synthetic) stationarity(x []float64) float64 {
	var v mat.VecDense
	v.MulVec(s.px, mat.NewVecDense(s.n, s.gradF(x)))
	return mat.Dot(&v, &v)
}

// objective writes f and g with their noise samples as a gorgonia graph.
func (s *synthetic) objective() (graph.Objective, error) {
	var obj graph.Objective
	n := s.n
	err := building(func() {
		eg := G.NewGraph()
		x := vecNode(eg, "x", make([]float64, n))
		y := vecNode(eg, "y", make([]float64, n))
		c, d := G.NewConstant(tensor.New(tensor.WithShape(n), tensor.WithBacking(s.c))), G.NewConstant(tensor.New(tensor.WithShape(n), tensor.WithBacking(s.d)))
		an := matNode(eg, "noise_f", s.noiseF, s.samples, 2*n)
		en := matNode(eg, "noise_g", s.noiseG, s.samples, n)
		xy := G.Must(G.Concat(0, x, y))
		arg := G.Must(G.Add(G.Must(G.Mul(c, x)), G.Must(G.Mul(d, y))))
		sum := G.Must(G.Add(x, y))
		logTerm := G.Must(G.Log(G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(sum)))), G.NewConstant(1.0)))))
		upper := G.Must(G.Add(G.Must(G.Add(G.Must(G.Sin(arg)), logTerm)), G.Must(G.Mean(G.Must(G.Mul(an, xy))))))
		diff := G.Must(G.Sub(x, y))
		lower := G.Must(G.Add(G.Must(G.Mul(G.NewConstant(0.5), G.Must(G.Sum(G.Must(G.Square(diff)))))), G.Must(G.Mean(G.Must(G.Mul(en, y))))))
		obj = graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{x}, Inner: []*G.Node{y},
			UpperData: []*G.Node{an}, LowerData: []*G.Node{en}}
	})
	return obj, err
}

func vecNode(g *G.ExprGraph, name string, v []float64) *G.Node {
	return G.NewVector(g, G.Float64, G.WithShape(len(v)), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))))
}

func matNode(g *G.ExprGraph, name string, v []float64, r, c int) *G.Node {
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
