package meta

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
)

// Oracles are the oracles of one task's bilevel problem at a fixed outer
// point x, for many inner points y; *graph.FixedX satisfies it. Methods
// write to their first arguments: dx has the length of x, dy, dst and v
// that of y (dst of MixedXY: that of x); dx or dy may be nil to skip it.
type Oracles interface {
	// F returns f(x, y).
	F(y []float64) float64
	// GradG computes ∇x g and ∇y g.
	GradG(dx, dy, y []float64)
	// GradF computes ∇x f and ∇y f.
	GradF(dx, dy, y []float64)
	// HVP computes ∇yy g·v.
	HVP(dst, y, v []float64)
	// MixedXY computes ∇xy g·v = ∇x⟨∇y g, v⟩.
	MixedXY(dst, y, v []float64)
}

var _ Oracles = (*graph.FixedX)(nil)

// Inner runs one task's inner loop, Steps steps of gradient descent
//
//	y_{t+1} = y_t − Alpha·∇y g(x, y_t),  t = 0, …, Steps−1,
//
// from y_0, and differentiates f(x, y_T) with respect to x (and y_0). It
// keeps the iterates and scratch between calls, so an Inner must not be
// used by several goroutines at once.
type Inner struct {
	// Steps is T ≥ 0 and Alpha the step size α > 0.
	Steps int
	Alpha float64

	iters      []float64 // (T+1)·d_y: iterate t at [t·d_y, (t+1)·d_y)
	n          int
	a, b, hv   []float64
	mx, gy, cv []float64
}

// ErrNonFinite reports a NaN or infinity in the inner iterates or in a
// meta-gradient: the inner step size is too large for g, or the outer
// iteration diverged.
var ErrNonFinite = errors.New("meta: non-finite inner iterate or meta-gradient (step size too large?)")

func (in *Inner) check() error {
	if in.Steps < 0 {
		return fmt.Errorf("meta: Inner.Steps = %d < 0", in.Steps)
	}
	if !(in.Alpha > 0) || math.IsInf(in.Alpha, 1) {
		return fmt.Errorf("meta: Inner.Alpha = %v; want a finite step size > 0", in.Alpha)
	}
	return nil
}

func (in *Inner) iterate(t int) []float64 { return in.iters[t*in.n : (t+1)*in.n] }

// Solve runs the Steps steps from y0 and returns y_T, which aliases the
// Inner's storage until its next call. It returns ErrNonFinite if an
// iterate is not finite.
func (in *Inner) Solve(o Oracles, y0 []float64) ([]float64, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	n := len(y0)
	in.n = n
	in.iters = grow(in.iters, (in.Steps+1)*n)
	in.gy = grow(in.gy, n)
	copy(in.iterate(0), y0)
	for t := 0; t < in.Steps; t++ {
		y, next := in.iterate(t), in.iterate(t+1)
		o.GradG(nil, in.gy, y)
		var sum float64
		for i := range next {
			next[i] = y[i] - in.Alpha*in.gy[i]
			sum += next[i]
		}
		if math.IsNaN(sum) || math.IsInf(sum, 0) {
			return nil, ErrNonFinite
		}
	}
	return in.iterate(in.Steps), nil
}

// ITD runs the inner loop from y0 and writes the derivative of f(x, y_T)
// along the unrolled steps to dx (d/dx) and, when dy0 is not nil, to dy0
// (d/dy_0, ANIL's gradient for the head initialization). The reverse sweep
// (paper 003, Prop. 2) costs T Hessian-vector and T mixed products at the
// stored iterates:
//
//	a_T = ∇y f(y_T),  dx = ∇x f(y_T) − α Σ_{t<T} ∇xy g(y_t)·a_{t+1},
//	a_t = a_{t+1} − α ∇yy g(y_t)·a_{t+1},  dy0 = a_0.
//
// It returns y_T (aliasing the Inner's storage).
func (in *Inner) ITD(dx, dy0 []float64, o Oracles, y0 []float64) ([]float64, error) {
	yT, err := in.Solve(o, y0)
	if err != nil {
		return nil, err
	}
	n := in.n
	in.a, in.b, in.hv = grow(in.a, n), grow(in.b, n), grow(in.hv, n)
	in.mx = grow(in.mx, len(dx))
	a, next := in.a, in.b
	o.GradF(dx, a, yT)
	for t := in.Steps - 1; t >= 0; t-- {
		y := in.iterate(t)
		o.MixedXY(in.mx, y, a)
		for i := range dx {
			dx[i] -= in.Alpha * in.mx[i]
		}
		if t == 0 && dy0 == nil {
			break
		}
		o.HVP(in.hv, y, a)
		for i := range next {
			next[i] = a[i] - in.Alpha*in.hv[i]
		}
		a, next = next, a
	}
	if dy0 != nil {
		copy(dy0, a)
	}
	if !finite(dx) || (dy0 != nil && !finite(dy0)) {
		return nil, ErrNonFinite
	}
	return yT, nil
}

// AID runs the inner loop from y0 and writes to dx the AID estimate at
// y = y_T,
//
//	dx = ∇x f(y) − ∇xy g(y)·v,   ∇yy g(y)·v = ∇y f(y) solved by cg from v = 0,
//
// (paper 003, eq. 3). It returns y_T (aliasing the Inner's storage) and the
// solve's statistics; a solve that stops at its step cap is not an error.
func (in *Inner) AID(dx []float64, o Oracles, y0 []float64, cg *implicit.CG) ([]float64, implicit.Stats, error) {
	yT, err := in.Solve(o, y0)
	if err != nil {
		return nil, implicit.Stats{}, err
	}
	n := in.n
	in.cv, in.a = grow(in.cv, n), grow(in.a, n)
	in.mx = grow(in.mx, len(dx))
	o.GradF(dx, in.a, yT)
	clear(in.cv)
	st, err := cg.Solve(in.cv, func(dst, v []float64) { o.HVP(dst, yT, v) }, in.a)
	if err != nil {
		return nil, st, err
	}
	o.MixedXY(in.mx, yT, in.cv)
	for i := range dx {
		dx[i] -= in.mx[i]
	}
	if !finite(dx) {
		return nil, st, ErrNonFinite
	}
	return yT, st, nil
}

// FirstOrder runs the inner loop from y0 and writes ∇x f(y_T) to dx and,
// when dy0 is not nil, ∇y f(y_T) to dy0: first-order ANIL, which treats
// y_T as if it did not depend on x and y_0 beyond the identity.
func (in *Inner) FirstOrder(dx, dy0 []float64, o Oracles, y0 []float64) ([]float64, error) {
	yT, err := in.Solve(o, y0)
	if err != nil {
		return nil, err
	}
	o.GradF(dx, dy0, yT)
	if !finite(dx) || (dy0 != nil && !finite(dy0)) {
		return nil, ErrNonFinite
	}
	return yT, nil
}

// Fixed adapts Oracles (a *graph.FixedX) to the interfaces of packages
// unroll and implicit, whose methods take x and a batch: Fixed ignores
// both, so the outer point and the batches are those the oracles were
// fixed at (graph.Problem.FixX) whatever the caller passes. Use it to run
// an unroll.Unroller or implicit.Hypergradient on one task at a fixed φ,
// with x = FixedX.X().
type Fixed struct{ Oracles }

// F implements unroll.Problem.
func (f Fixed) F(_, y []float64, _ []int) float64 { return f.Oracles.F(y) }

// GradF implements unroll.Problem and implicit.Problem.
func (f Fixed) GradF(dx, dy, _, y []float64, _ []int) { f.Oracles.GradF(dx, dy, y) }

// GradG implements unroll.Lower.
func (f Fixed) GradG(dx, dy, _, y []float64, _ []int) { f.Oracles.GradG(dx, dy, y) }

// HVP implements unroll.Problem and implicit.Hessian.
func (f Fixed) HVP(dst, _, y, v []float64, _ []int) { f.Oracles.HVP(dst, y, v) }

// MixedXY implements unroll.Problem and implicit.Problem.
func (f Fixed) MixedXY(dst, _, y, v []float64, _ []int) { f.Oracles.MixedXY(dst, y, v) }

func grow(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float64, n)
}

func finite(v []float64) bool {
	var s float64
	for _, x := range v {
		s += x
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}
