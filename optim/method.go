package optim

import (
	"fmt"
	"math"
)

// Method is a bilevel solver. A Method value holds only settings, and its zero
// value is a documented default; everything that changes during a run lives
// in the State, so one value can drive many runs and a run can be saved and
// resumed.
//
// To add a method (for example STABLE or MGBiO), in a new file:
//
//  1. Declare a struct of settings. Give every field a zero value that means
//     a documented default (a step size 0 may mean 1/L, see AIDBiO.Alpha; a
//     batch size 0 means the whole data set) and cite the paper, algorithm
//     and equation in the doc comment.
//  2. Init(p, st): validate the settings against p with the check helpers
//     (checkStep, checkCount, checkBatch, Optimizer.Validate) so that a bad
//     value fails before any work, saying what to change; reject projections
//     the method cannot honour (st.Projections); then allocate what st lacks
//     (st.V, st.Vec(name, n)) without overwriting what is there, because
//     Resume calls Init on a restored State.
//  3. Iterate(p, st): one outer iteration k = st.Iter. Draw batches with
//     st.Batch, keep scratch in st.Work, keep anything that must survive to
//     the next iteration in st (X, Y, V, Vecs, Scalars, XOpt, YOpt), move x
//     with st.StepX(optimizer, hypergradient) (a y-update that may be
//     constrained ends with st.ProjectY) and return the hypergradient norm.
//     Call oracles only through p: Solve wraps it to count calls and catch
//     NaN. Add to st.Calls.Dense for each dense matrix the method forms
//     itself. Do not increment st.Iter: Solve does that.
//  4. Add `var _ Method = YourMethod{}` and a test on the quadratic problem in
//     quadratic_test.go: convergence, per-iteration oracle counts, resume.
type Method interface {
	// Init prepares st for the first iteration (or checks a resumed one):
	// it validates the settings against p and allocates the method's
	// buffers in st if they are missing. It may call oracles (counted).
	Init(p Problem, st *State) error
	// Iterate performs one outer iteration on st.
	Iterate(p Problem, st *State) (Iteration, error)
}

// Iteration is what one call of Method.Iterate reports.
type Iteration struct {
	// HypergradNorm is ‖ĥ∇Φ(x_k)‖₂, the norm of the hypergradient estimate
	// used for the x-update.
	HypergradNorm float64
}

// checkStep validates a step size whose zero value means a default.
func checkStep(name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%s = %v: set a finite step size > 0, or 0 for the default", name, v)
	}
	return nil
}

// checkCount validates an iteration count whose zero value means a default.
func checkCount(name string, v int) error {
	if v < 0 {
		return fmt.Errorf("%s = %d: set a count ≥ 1, or 0 for the default", name, v)
	}
	return nil
}

// checkBatch validates a batch size against the size of its data set and,
// when p is a BatchChecker, against what p's oracles can evaluate, so that
// a graph that cannot take the size fails here with an error instead of
// panicking in the first oracle call.
func checkBatch(p Problem, name string, size int, set DataSet) error {
	n, which := p.NumLower(), "NumLower"
	if set == Upper {
		n, which = p.NumUpper(), "NumUpper"
	}
	if size < 0 || size > n {
		return fmt.Errorf("%s = %d: set a batch size between 1 and %s() = %d, or 0 for the whole data set", name, size, which, n)
	}
	if b, ok := p.(BatchChecker); ok && size > 0 {
		if err := b.CheckBatch(set == Upper, size); err != nil {
			return fmt.Errorf("%s = %d: %w", name, size, err)
		}
	}
	return nil
}

// noProjectY returns an error if the run has a y-projection, for methods of
// unconstrained lower-level problems.
func noProjectY(method string, st *State) error {
	if _, py := st.Projections(); py != nil {
		return fmt.Errorf("%s has an unconstrained lower level: remove Settings.ProjectY", method)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
