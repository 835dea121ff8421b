package bilevel

import "fmt"

// ToleranceError reports a solve that stopped before it reached its
// tolerance: the lower level (‖∇y g(x, y)‖₂ > Settings.Tol) or AID's
// linear system ∇yy g·v = ∇y f (residual above Settings.LinearTol·‖∇y f‖).
// Err says why it stopped, when something other than the iteration limit
// stopped it: gonum/optimize's line-search errors, implicit's typed errors
// (errors.As finds an *implicit.CurvatureError through it), or a note.
type ToleranceError struct {
	Solve      string  // "lower level" or "linear system"
	Solver     string  // "L-BFGS", "Newton-CG", "gradient descent" or "CG"
	Iterations int     // the solver's iterations
	Residual   float64 // the residual reached: ‖∇y g‖₂, or ‖∇y f − ∇yy g·v‖₂
	Tol        float64 // the residual asked for
	Err        error   // why it stopped; nil when the iteration limit did
}

func (e *ToleranceError) Error() string {
	what := "‖∇y g‖"
	if e.Solve == "linear system" {
		what = "residual ‖∇y f − ∇yy g·v‖"
	}
	why := "the iteration limit"
	if e.Err != nil {
		why = e.Err.Error()
	}
	return fmt.Sprintf("bilevel: the %s stopped at %s = %.3g after %d %s iterations, %.3g times the tolerance %.3g: %s",
		e.Solve, what, e.Residual, e.Iterations, e.Solver, e.Residual/e.Tol, e.Tol, why)
}

// Unwrap returns Err.
func (e *ToleranceError) Unwrap() error { return e.Err }
