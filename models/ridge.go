package models

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/graph"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
)

// RidgeModel is ridge regression with one learned penalty per feature:
//
//	g(λ, w) = ½ mean_i (x_iᵀw − t_i)² + ½ Σ_j e^{λ_j} w_j²,
//	f(λ, w) = ½ mean_val (x_iᵀw − t_i)²,
//
// on the training and validation data. λ starts at 0 and w at 0.
type RidgeModel struct {
	Model
	Lambda, W *G.Node

	train, val Data
	gram       *mat.SymDense // XᵀX/n
	xt         []float64     // Xᵀt/n
}

// RidgeRegression returns the ridge model on train (lower level) and val
// (upper level), which need Targets.
func RidgeRegression(train, val Data) (*RidgeModel, error) {
	if err := train.checkTargets("training data"); err != nil {
		return nil, err
	}
	if err := val.checkTargets("validation data"); err != nil {
		return nil, err
	}
	if err := checkPair(train, val); err != nil {
		return nil, err
	}
	r := &RidgeModel{train: train, val: val}
	n, d := train.N, train.D
	x := mat.NewDense(n, d, train.X)
	r.gram = mat.NewSymDense(d, nil)
	r.gram.SymOuterK(1/float64(n), x.T())
	xt := mat.NewVecDense(d, nil)
	xt.MulVec(x.T(), mat.NewVecDense(n, train.Targets))
	xt.ScaleVec(1/float64(n), xt)
	r.xt = xt.RawVector().Data
	if err := building("ridge regression", r.build); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RidgeModel) build() {
	d := r.train.D
	g := G.NewGraph()
	lambda := input(g, "lambda", make([]float64, d), d)
	w := input(g, "w", make([]float64, d), d)
	x := input(g, "X", r.train.X, r.train.N, d)
	t := input(g, "t", r.train.Targets, r.train.N)
	xv := input(g, "Xval", r.val.X, r.val.N, d)
	tv := input(g, "tval", r.val.Targets, r.val.N)

	// ½ mean (Xw − t)²
	mse := func(x, t *G.Node) *G.Node {
		res := G.Must(G.Sub(G.Must(G.Mul(x, w)), t))
		return scale(0.5, G.Must(G.Mean(G.Must(G.Square(res)))))
	}
	penalty := scale(0.5, G.Must(G.Mul(G.Must(G.Exp(lambda)), G.Must(G.Square(w))))) // ½ Σ e^λ_j w_j²
	r.Objective = graph.Objective{
		Upper: mse(xv, tv), Lower: G.Must(G.Add(mse(x, t), penalty)),
		Outer: []*G.Node{lambda}, Inner: []*G.Node{w},
		UpperData: []*G.Node{xv, tv}, LowerData: []*G.Node{x, t},
	}
	r.Graph, r.Lambda, r.W = g, lambda, w
}

// hessian returns the Cholesky factor of H = XᵀX/n + diag(e^λ).
func (r *RidgeModel) hessian(lambda []float64) *mat.Cholesky {
	d := r.train.D
	checkVec(lambda, d, "λ")
	h := mat.NewSymDense(d, nil)
	h.CopySym(r.gram)
	for j, l := range lambda {
		h.SetSym(j, j, h.At(j, j)+math.Exp(l))
	}
	var c mat.Cholesky
	if !c.Factorize(h) {
		panic(fmt.Sprintf("models: ridge: XᵀX/n + diag(e^λ) is not positive definite at λ = %v", lambda))
	}
	return &c
}

// WStar computes w*(λ) = (XᵀX/n + diag(e^λ))⁻¹ Xᵀt/n into dst (allocated
// when nil) and returns it.
func (r *RidgeModel) WStar(dst, lambda []float64) []float64 {
	dst = vecOrAlloc(dst, r.train.D, "WStar")
	c := r.hessian(lambda)
	if err := c.SolveVecTo(mat.NewVecDense(len(dst), dst), mat.NewVecDense(len(r.xt), r.xt)); err != nil {
		panic(fmt.Sprintf("models: ridge: %v", err))
	}
	return dst
}

// valGrad returns f(w) and ∇_w f(w) on the validation data.
func (r *RidgeModel) valGrad(w []float64) (float64, []float64) {
	xv := mat.NewDense(r.val.N, r.val.D, r.val.X)
	res := mat.NewVecDense(r.val.N, nil)
	res.MulVec(xv, mat.NewVecDense(len(w), w))
	res.SubVec(res, mat.NewVecDense(r.val.N, r.val.Targets))
	n := float64(r.val.N)
	grad := mat.NewVecDense(r.val.D, nil)
	grad.MulVec(xv.T(), res)
	grad.ScaleVec(1/n, grad)
	return mat.Dot(res, res) / (2 * n), grad.RawVector().Data
}

// Phi returns Φ(λ) = f(λ, w*(λ)).
func (r *RidgeModel) Phi(lambda []float64) float64 {
	f, _ := r.valGrad(r.WStar(nil, lambda))
	return f
}

// HyperGrad computes ∇Φ(λ) = −e^λ ⊙ w* ⊙ H⁻¹∇_w f(w*) into dst (allocated
// when nil) and returns it, with H = XᵀX/n + diag(e^λ): ∇λ∇w g is the
// diagonal matrix of e^λ ⊙ w.
func (r *RidgeModel) HyperGrad(dst, lambda []float64) []float64 {
	d := r.train.D
	dst = vecOrAlloc(dst, d, "HyperGrad")
	c := r.hessian(lambda)
	w := make([]float64, d)
	if err := c.SolveVecTo(mat.NewVecDense(d, w), mat.NewVecDense(d, r.xt)); err != nil {
		panic(fmt.Sprintf("models: ridge: %v", err))
	}
	_, gf := r.valGrad(w)
	if err := c.SolveVecTo(mat.NewVecDense(d, dst), mat.NewVecDense(d, gf)); err != nil {
		panic(fmt.Sprintf("models: ridge: %v", err))
	}
	for j := range dst {
		dst[j] *= -math.Exp(lambda[j]) * w[j]
	}
	return dst
}
