package optim

// The pieces the methods compose: the inner loop on y (innerSteps, over
// unroll.Descend), the curvature estimate behind default step sizes
// (implicit.LargestEigenvalue), and the parts of an implicit.System on the
// state's (x, y) with the batches drawn from the run's stream when a part
// is called, so that the draws keep the order of the papers' algorithms.

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// innerSteps runs steps steps of gradient descent y ← y − α∇y g(x, y; S_t)
// on the state's y, each on a fresh lower batch S_t of the given size (0:
// the whole data set): the inner loop of the AID methods.
func innerSteps(p oracle.Problem, st *State, steps int, alpha float64, batch int) error {
	draw := func(int) []int { return st.Batch(p, Lower, batch) }
	return unroll.Descend(p, st.X, st.Y, steps, alpha, draw, st.Work("optim.gy", p.DimY()))
}

// curvatureSteps bounds the HVPs spent estimating L.
const curvatureSteps = 30

// keyCurvature is the State.Scalars entry caching the estimate of L.
const keyCurvature = "optim.curvature"

// curvature returns an estimate of L, the largest eigenvalue of ∇yy g at the
// state's (x, y) on the whole lower data set: the largest Ritz value of
// min(30, DimY) Lanczos steps (implicit.LargestEigenvalue) from a fixed
// pseudo-random start (one HVP each; fewer if the Krylov space is
// exhausted). Ritz values never exceed L and converge to it much faster
// than a power iteration. The estimate is cached in st.Scalars, so it is
// computed once per run (by Init, at (x0, y0)) and a resumed run reuses it.
// Every method's default step sizes come from it, except those of the
// first-order methods (F2SA, BOME), which apply the same Lanczos to
// gradient differences (gradientCurvature).
func curvature(p oracle.Problem, st *State) (float64, error) {
	return curvatureOf(st, func(dst, v []float64) { p.HVP(dst, st.X, st.Y, v, nil) }, p.DimY())
}

// curvatureOf is curvature with the operator op standing for ∇yy g.
func curvatureOf(st *State, op implicit.Operator, dim int) (float64, error) {
	if l, ok := st.Scalars[keyCurvature]; ok {
		return l, nil
	}
	l, err := implicit.LargestEigenvalue(op, dim, curvatureSteps, 1)
	if err != nil {
		return 0, fmt.Errorf("estimating the curvature L of ∇yy g at (x0, y0) for the default step size: %w: set the step size explicitly", err)
	}
	if !(l > 0) || math.IsInf(l, 1) {
		return 0, fmt.Errorf("estimating the curvature L of ∇yy g at (x0, y0) for the default step size gave %v: set the step size explicitly", l)
	}
	st.Scalars[keyCurvature] = l
	return l, nil
}

// stepOrDefault returns step if it is set, else 1/L from curvature.
func stepOrDefault(step float64, st *State) float64 {
	if step > 0 {
		return step
	}
	return 1 / st.Scalars[keyCurvature]
}

// upperGradient is the Gradient part of a System: ∇x f and ∇y f at the
// state's (x, y) on a fresh upper batch of the given size.
func upperGradient(p oracle.Problem, st *State, size int) func(gx, gy []float64) {
	return func(gx, gy []float64) { p.GradF(gx, gy, st.X, st.Y, st.Batch(p, Upper, size)) }
}

// mixedOn is the Cross part of a System: ∇xy g·v at the state's (x, y) on
// the lower-level batch b.
func mixedOn(p oracle.Problem, st *State, b []int) func(dst, v []float64) {
	return func(dst, v []float64) { p.MixedXY(dst, st.X, st.Y, v, b) }
}

// mixedFresh is mixedOn on a fresh lower batch of the given size, drawn
// when the part is called.
func mixedFresh(p oracle.Problem, st *State, size int) func(dst, v []float64) {
	return func(dst, v []float64) { p.MixedXY(dst, st.X, st.Y, v, st.Batch(p, Lower, size)) }
}

// hessianSteps is a per-step source of ∇yy g at the state's (x, y), each
// step on a fresh lower batch of the given size: the independent batches
// B_i of the stochastic linear-system loops.
func hessianSteps(p oracle.Problem, st *State, size int) implicit.Operators {
	return func(int) implicit.Operator {
		b := st.Batch(p, Lower, size)
		return func(dst, v []float64) { p.HVP(dst, st.X, st.Y, v, b) }
	}
}

// solveWith is the Solve part of a System: s on the per-step source ops.
func solveWith(s implicit.StepSolver, ops implicit.Operators) func(v, b []float64) (implicit.Stats, error) {
	return func(v, b []float64) (implicit.Stats, error) { return s.SolveSteps(v, ops, b) }
}

// cgOn is the Solve part of a System: at most n steps of implicit.CG on the
// fixed operator op, from the warm start in v; it stops early when
// ‖r‖ ≤ tol·‖b‖ (tol 0: only on an exactly zero residual). The initial
// residual b − H v costs one extra HVP unless v is exactly zero, so a warm
// start costs n+1 HVPs and a cold start n. A direction of non-positive
// curvature is reported with advice (wrapping *implicit.CurvatureError);
// a NaN or ±Inf is the solver's *implicit.BreakdownError, with v at the
// last finite iterate.
func cgOn(op implicit.Operator, n int, tol float64) func(v, b []float64) (implicit.Stats, error) {
	if tol == 0 {
		tol = -1 // implicit.CG: a negative tolerance runs all n steps
	}
	cg := implicit.CG{Tol: tol, MaxIter: n}
	return func(v, b []float64) (implicit.Stats, error) {
		stats, err := cg.Solve(v, op, b)
		var ce *implicit.CurvatureError
		if errors.As(err, &ce) {
			return stats, fmt.Errorf("conjugate gradient step %d: dᵀ ∇yy g d = %v ≤ 0, so ∇yy g is not positive definite at this (x, y) and batch: use larger Hessian batches, more inner steps, or a Neumann solver: %w", ce.Iter, ce.Curvature, err)
		}
		return stats, err
	}
}

// aidStep is one iteration of the methods that compose an inner loop, an
// AID estimate and an outer optimizer (AIDBiO, StocBiO, AmIGO, BSA, TTSA):
// steps inner steps of size alpha on fresh lower batches of innerBatch
// samples, then implicit.Estimate with ∇f on a fresh upper batch of
// upperBatch samples, the given Solve and Cross parts and State.V as v (set
// to zero first when cold), then the outer step along scale times the
// estimate (the reported norm is the estimate's).
type aidStep struct {
	steps      int
	alpha      float64
	innerBatch int
	upperBatch int
	solve      func(v, b []float64) (implicit.Stats, error)
	cross      func(dst, v []float64)
	cold       bool
	scale      float64
	outer      Optimizer
}

// iterate performs the iteration on st.
func (a aidStep) iterate(p oracle.Problem, st *State) (Iteration, error) {
	if err := innerSteps(p, st, a.steps, a.alpha, a.innerBatch); err != nil {
		return Iteration{}, err
	}
	if a.cold {
		clear(st.V)
	}
	h, err := estimate(st, st.V, implicit.System{Gradient: upperGradient(p, st, a.upperBatch), Solve: a.solve, Cross: a.cross})
	if err != nil {
		return Iteration{}, err
	}
	norm := floats.Norm(h, 2)
	if a.scale != 1 {
		floats.Scale(a.scale, h)
	}
	st.StepX(orDefault(a.outer), h)
	return Iteration{HypergradNorm: norm}, nil
}

// estimate runs implicit.Estimate of sys with v as the solve's warm start
// and destination, into a scratch vector of the state that it returns.
func estimate(st *State, v []float64, sys implicit.System) ([]float64, error) {
	dx, dy := len(st.X), len(st.Y)
	h := st.Work("optim.hypergradient", dx)
	_, err := implicit.Estimate(h, v, sys, st.Work("optim.fy", dy), st.Work("optim.cross", dx))
	return h, err
}

// neumannSeries is the Solve part of the N-term Neumann estimate of
// A⁻¹·b, η·Σ_{j=0}^{N−1} (I − ηA_j)^j·b, on the per-step source ops
// (implicit.Neumann with Q = N−1 products): the whole partial sum, or, with
// truncate (a uniform draw from {0, …, N−1}), the randomized truncation of
// Ghadimi and Wang. growth is the Neumann divergence threshold (+Inf: the
// methods that had none). With N = 1 the estimate is η·b, which
// implicit.Neumann cannot express (its Terms = 0 means its default); the
// draw is still made, so the run's stream does not depend on N.
func neumannSeries(n int, eta, growth float64, truncate func(int) int, ops implicit.Operators) func(v, b []float64) (implicit.Stats, error) {
	if n == 1 {
		return func(v, b []float64) (implicit.Stats, error) {
			if truncate != nil {
				truncate(1)
			}
			floats.ScaleTo(v, eta, b)
			return implicit.Stats{Converged: true}, nil
		}
	}
	return solveWith(&implicit.Neumann{Eta: eta, Terms: n - 1, Truncate: truncate, LanczosSteps: -1, MaxGrowth: growth}, ops)
}
