package experiment

import (
	"math"
	"slices"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// Value evaluates the value function Φ(x) = f(x, y*(x)) of a problem whose
// lower level is strongly convex and small enough for Newton-CG on the
// whole data set, warm-starting each inner solve from the previous one.
type Value struct {
	P   oracle.Problem
	Tol float64 // ‖∇y g‖ tolerance of the inner solves (default 1e-9)
	y   []float64
}

// NewValue returns the value function of p with inner solves started at y0.
func NewValue(p oracle.Problem, y0 []float64) *Value {
	return &Value{P: p, y: slices.Clone(y0)}
}

func (v *Value) tol() float64 {
	if v.Tol == 0 {
		return 1e-9
	}
	return v.Tol
}

// At returns Φ(x) and y*(x) (a copy).
func (v *Value) At(x []float64) (float64, []float64, error) {
	if _, err := SolveInner(v.P, x, v.y, InnerSettings{Tol: v.tol(), Newton: true}); err != nil {
		return math.NaN(), nil, err
	}
	return v.P.F(x, v.y, nil), slices.Clone(v.y), nil
}

// Grad stores ∇Φ(x) in dst, computed at y*(x) with an exact (CG to 1e-12)
// implicit-differentiation solve, and returns Φ(x).
func (v *Value) Grad(dst, x []float64) (float64, error) {
	phi, y, err := v.At(x)
	if err != nil {
		return phi, err
	}
	_, err = implicit.Hypergradient(dst, v.P, x, y, &implicit.Settings{Solver: &implicit.CG{Tol: 1e-12, MaxIter: 10 * len(y)}})
	return phi, err
}

// Minimize runs projected gradient descent on Φ from x0 with a
// backtracking (Armijo) step, for iters iterations, and returns the best x
// and Φ there. It is how the programs compute a reference Φ* for
// suboptimality plots. proj may be nil.
func (v *Value) Minimize(x0 []float64, proj optim.Projection, iters int) ([]float64, float64, error) {
	x := slices.Clone(x0)
	if proj != nil {
		proj.Project(x, x)
	}
	g, trial := make([]float64, len(x)), make([]float64, len(x))
	phi, err := v.Grad(g, x)
	if err != nil {
		return nil, math.NaN(), err
	}
	t := 1.0
	for range iters {
		accepted := false
		for k := 0; k < 40; k++ {
			floats.AddScaledTo(trial, x, -t, g)
			if proj != nil {
				proj.Project(trial, trial)
			}
			pt, _, err := v.At(trial)
			if err != nil {
				return nil, math.NaN(), err
			}
			var dec float64
			for i := range x {
				dec += g[i] * (x[i] - trial[i])
			}
			if pt <= phi-1e-4*dec && dec > 0 {
				accepted = true
				break
			}
			t /= 2
		}
		if !accepted {
			break // no decrease at any step: stationary to rounding
		}
		copy(x, trial)
		if phi, err = v.Grad(g, x); err != nil {
			return nil, math.NaN(), err
		}
		t *= 2
	}
	return x, phi, nil
}
