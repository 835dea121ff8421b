package bilevel

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/optimize"
)

// Constants of wolfeSearch: the sufficient decrease δ and curvature σ of
// the Wolfe conditions, the relative slack ε on the value under which
// values count as equal to rounding, and the evaluations one search may
// spend.
const (
	wolfeDecrease  = 1e-4
	wolfeCurvature = 0.9
	valueSlack     = 1e-10
	maxLineEvals   = 60
)

// wolfeSearch is the line search of the inner solvers, a gonum/optimize
// Linesearcher. It accepts a step t along the direction with
// φ(t) = g(x, y + t·d) when |φ'(t)| ≤ σ|φ'(0)| (the strong curvature
// condition, which keeps L-BFGS's updates positive definite) and either
// the sufficient decrease φ(t) ≤ φ(0) + δtφ'(0) holds or, where the
// decrease is lost in the rounding of φ, φ(t) ≤ φ(0) + ε|φ(0)| (the
// approximate Wolfe conditions of Hager and Zhang, SIAM J. Optim. 16,
// 2005, whose bound φ'(t) ≤ (1 − 2δ)|φ'(0)| the curvature condition
// implies for σ < 1 − 2δ). gonum's Bisection and MoreThuente compare
// values only, so near y* they fail once the decrease ‖∇y g‖²/λ falls
// below the rounding of g (measured in docs/design.md: at ‖∇y g‖ ≈ 1e-6 on
// a well-conditioned quadratic with d_y = 200); the derivative, which
// keeps its relative accuracy there, carries this search on. A step that
// is too long (a non-finite value, φ' ≥ 0, or a value above both bounds)
// becomes the upper end of the bracket and a short one its lower end; the
// next trial is the secant step on φ' inside the bracket (exact for a
// quadratic), bisection where the secant falls near an end, and four
// times the step until an upper end is found.
type wolfeSearch struct {
	f0, d0   float64 // φ(0) and φ'(0) < 0
	lo, hi   float64 // the bracket; hi is +Inf until a step too long is found
	dlo, dhi float64 // φ' at lo and hi (NaN at hi when not usable)
	step     float64 // the step under evaluation
	evals    int
}

var _ optimize.Linesearcher = (*wolfeSearch)(nil)

// Init starts a search from φ(0) = f and φ'(0) = d < 0 at the trial step.
func (w *wolfeSearch) Init(f, d, step float64) optimize.Operation {
	*w = wolfeSearch{f0: f, d0: d, dlo: d, hi: math.Inf(1), dhi: math.NaN(), step: step}
	return optimize.FuncEvaluation | optimize.GradEvaluation
}

// Iterate takes φ and φ' at the last trial step and returns the next
// operation: MajorIteration when the step is accepted, otherwise the
// evaluation of a new trial step. It fails with an error matching
// optimize.ErrLinesearcherFailure after maxLineEvals evaluations (saying
// so when φ was still falling) or when the bracket has shrunk to
// rounding.
func (w *wolfeSearch) Iterate(f, d float64) (optimize.Operation, float64, error) {
	t := w.step
	w.evals++
	finite := !math.IsNaN(f) && !math.IsInf(f, 0) && !math.IsNaN(d) && !math.IsInf(d, 0)
	slack := w.f0 + valueSlack*math.Abs(w.f0)
	armijo := f <= w.f0+wolfeDecrease*t*w.d0
	if finite && math.Abs(d) <= -wolfeCurvature*w.d0 && (armijo || f <= slack) {
		return optimize.MajorIteration, t, nil
	}
	if !finite || d >= 0 || (!armijo && f > slack) {
		w.hi, w.dhi = t, d
		if !finite || d < 0 {
			w.dhi = math.NaN() // no sign change of φ' to interpolate
		}
	} else {
		w.lo, w.dlo = t, d
	}
	switch {
	case w.evals >= maxLineEvals && math.IsInf(w.hi, 1):
		return optimize.NoOperation, 0, fmt.Errorf("%w: g fell to %.3g along a step grown to %.3g and still falls: g(x, ·) looks unbounded below", optimize.ErrLinesearcherFailure, f, t)
	case w.evals >= maxLineEvals || (!math.IsInf(w.hi, 1) && w.hi-w.lo <= 1e-15*w.hi):
		return optimize.NoOperation, 0, optimize.ErrLinesearcherFailure
	}
	switch width := w.hi - w.lo; {
	case math.IsInf(w.hi, 1):
		w.step = 4 * t
	case !math.IsNaN(w.dhi):
		s := w.lo - w.dlo*width/(w.dhi-w.dlo) // the zero of the secant of φ'
		if !(s > w.lo+0.1*width && s < w.hi-0.1*width) {
			s = w.lo + width/2
		}
		w.step = s
	default:
		w.step = w.lo + width/2
	}
	return optimize.FuncEvaluation | optimize.GradEvaluation, w.step, nil
}
