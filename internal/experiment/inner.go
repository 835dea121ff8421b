package experiment

import (
	"errors"
	"math"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/oracle"
)

// InnerSettings configures SolveInner. Zero values mean the defaults.
type InnerSettings struct {
	// Tol stops the solve once ‖∇y g‖ ≤ Tol (default 1e-8).
	Tol float64
	// MaxIter bounds the Newton steps (Newton) or L-BFGS iterations
	// (default 100 for Newton, 1000 for L-BFGS).
	MaxIter int
	// Newton selects Newton-CG (bilevel.NewtonCG: Hessian-vector products
	// in CG steps); the default is L-BFGS (bilevel.LBFGS).
	Newton bool
}

// SolveInner minimizes y ↦ g(x, y) on the whole lower data set from y
// (overwritten with the result) and returns ‖∇y g‖ at the result. It is
// how the programs compute y*(x) for baselines and exact value functions
// Φ(x) = f(x, y*(x)), by bilevel.SolveLower (gonum/optimize with our
// Wolfe line search; Newton-CG on the problem's linearized HVP, or
// L-BFGS). Reaching the iteration limit is not an error; the returned norm
// says how far it got.
func SolveInner(p oracle.Problem, x, y []float64, s InnerSettings) (float64, error) {
	tol := s.Tol
	if tol == 0 {
		tol = 1e-8
	}
	maxIter, inner := s.MaxIter, bilevel.LBFGS
	if s.Newton {
		inner = bilevel.NewtonCG
		if maxIter == 0 {
			maxIter = 100
		}
	} else if maxIter == 0 {
		maxIter = 1000
	}
	r, err := bilevel.SolveLower(p, x, &bilevel.Settings{Inner: inner, Tol: tol, MaxInner: maxIter, Y0: y})
	var te *bilevel.ToleranceError
	if errors.As(err, &te) && te.Err == nil {
		err = nil // the iteration limit
	}
	if r != nil {
		copy(y, r.Y)
		return r.InnerResidual, err
	}
	return math.Inf(1), err
}
