package experiment

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// InnerSettings configures SolveInner. Zero values mean the defaults.
type InnerSettings struct {
	// Tol stops the solve once ‖∇y g‖ ≤ Tol (default 1e-8).
	Tol float64
	// MaxIter bounds the Newton steps (Newton) or L-BFGS iterations
	// (default 100 for Newton, 1000 for L-BFGS).
	MaxIter int
	// Newton selects Newton-CG (one Hessian-vector product per CG step, for
	// small or well-conditioned problems); the default is L-BFGS.
	Newton bool
}

// SolveInner minimizes y ↦ g(x, y) on the whole lower data set from y
// (overwritten with the result) and returns ‖∇y g‖ at the result. It is
// how the programs compute y*(x) for baselines and exact value functions
// Φ(x) = f(x, y*(x)). Reaching the iteration limit is not an error; the
// returned norm says how far it got.
func SolveInner(p oracle.Problem, x, y []float64, s InnerSettings) (float64, error) {
	tol := s.Tol
	if tol == 0 {
		tol = 1e-8
	}
	if s.Newton {
		return newtonCG(p, x, y, tol, s.MaxIter)
	}
	maxIter := s.MaxIter
	if maxIter == 0 {
		maxIter = 1000
	}
	return lbfgs(p, x, y, tol, maxIter, 10)
}

// lbfgs minimizes y ↦ g(x, y) by LBFGS.
func lbfgs(p oracle.Problem, x, y []float64, tol float64, maxIter, m int) (float64, error) {
	return LBFGS(func(w []float64) float64 { return p.G(x, w, nil) },
		func(dst, w []float64) { p.GradG(nil, dst, x, w, nil) }, y, tol, maxIter, m, 0)
}

// LBFGS minimizes fn from y (overwritten with the result) by limited-memory
// BFGS with memory m and an Armijo backtracking line search started at the
// unit step (shortened so that no coordinate moves by more than maxStep, if
// maxStep > 0), until ‖∇fn‖ ≤ tol or maxIter iterations, and returns the
// last gradient norm. The line search compares values of fn, so it cannot go
// below ‖∇fn‖² of the order of fn's rounding error; it returns an error
// only when it fails before that.
func LBFGS(fn func(y []float64) float64, grad func(dst, y []float64), y []float64, tol float64, maxIter, m int, maxStep float64) (float64, error) {
	n := len(y)
	g, d, trial, tg := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	var ss, ys [][]float64
	var rho []float64
	alpha := make([]float64, m)
	grad(g, y)
	fv := fn(y)
	for it := 0; it < maxIter; it++ {
		gn := floats.Norm(g, 2)
		if gn <= tol {
			return gn, nil
		}
		// Two-loop recursion: d = H g.
		copy(d, g)
		for i := len(ss) - 1; i >= 0; i-- {
			alpha[i] = rho[i] * floats.Dot(ss[i], d)
			floats.AddScaled(d, -alpha[i], ys[i])
		}
		if k := len(ss) - 1; k >= 0 {
			floats.Scale(floats.Dot(ss[k], ys[k])/floats.Dot(ys[k], ys[k]), d)
		} else {
			floats.Scale(1/math.Max(gn, 1), d)
		}
		for i := range ss {
			b := rho[i] * floats.Dot(ys[i], d)
			floats.AddScaled(d, alpha[i]-b, ss[i])
		}
		slope := -floats.Dot(g, d)
		if !(slope < 0) { // not a descent direction: restart along −g
			ss, ys, rho = ss[:0], ys[:0], rho[:0]
			floats.ScaleTo(d, 1/math.Max(gn, 1), g)
			slope = -floats.Dot(g, d)
		}
		t, ft := 1.0, 0.0
		if big := floats.Norm(d, math.Inf(1)); maxStep > 0 && big > maxStep {
			t = maxStep / big
		}
		for k := 0; ; k++ {
			floats.AddScaledTo(trial, y, -t, d)
			ft = fn(trial)
			if ft <= fv+1e-4*t*slope {
				break
			}
			if k == 50 {
				if ft <= fv || math.Abs(ft-fv) <= 1e-15*math.Abs(fv) {
					return gn, nil // at rounding level
				}
				return gn, fmt.Errorf("L-BFGS: the line search failed at iteration %d (gradient norm %.3g)", it, gn)
			}
			t /= 2
		}
		grad(tg, trial)
		sv, yv := make([]float64, n), make([]float64, n)
		floats.SubTo(sv, trial, y)
		floats.SubTo(yv, tg, g)
		if sy := floats.Dot(sv, yv); sy > 1e-12*floats.Norm(sv, 2)*floats.Norm(yv, 2) {
			if len(ss) == m {
				ss, ys, rho = ss[1:], ys[1:], rho[1:]
			}
			ss, ys, rho = append(ss, sv), append(ys, yv), append(rho, 1/sy)
		}
		copy(y, trial)
		copy(g, tg)
		fv = ft
	}
	return floats.Norm(g, 2), nil
}

// newtonCG is Newton's method with CG solves and Armijo backtracking.
func newtonCG(p oracle.Problem, x, y []float64, tol float64, maxIter int) (float64, error) {
	if maxIter == 0 {
		maxIter = 100
	}
	n := p.DimY()
	grad, step, trial, tgrad := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	p.GradG(nil, grad, x, y, nil)
	hvp := implicit.HVPOperator(p, x, y, nil)
	for it := 0; it < maxIter; it++ {
		gn := floats.Norm(grad, 2)
		if gn <= tol {
			return gn, nil
		}
		clear(step)
		cg := implicit.CG{Tol: math.Min(0.1, math.Sqrt(gn)), MaxIter: 10 * n}
		if _, err := cg.Solve(step, hvp, grad); err != nil && !errors.Is(err, implicit.ErrNotPositiveDefinite) {
			return gn, err
		}
		g0, slope := p.G(x, y, nil), -floats.Dot(grad, step)
		for t, k := 1.0, 0; ; t, k = t/2, k+1 {
			floats.AddScaledTo(trial, y, -t, step)
			p.GradG(nil, tgrad, x, trial, nil)
			if p.G(x, trial, nil) <= g0+1e-4*t*slope || floats.Norm(tgrad, 2) <= gn/2 || k == 40 {
				break
			}
		}
		copy(y, trial)
		copy(grad, tgrad)
	}
	return floats.Norm(grad, 2), nil
}
