package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/oracle"
)

// Method is a bilevel solver. A Method value holds only settings, and its zero
// value is a documented default; everything that changes during a run lives
// in the State, so one value can drive many runs and a run can be saved and
// resumed.
//
// A method is a composition: an inner loop on y (innerSteps), a
// hypergradient estimate from package implicit (an implicit.System solved
// by one of its solvers) or package unroll, and an outer optimizer on x
// (State.StepX). To add a method (for example STABLE or MGBiO), in a new
// file:
//
//  1. Declare a struct of settings. Give every field a zero value that means
//     a documented default (a step size 0 may mean 1/L, see AIDBiO.Alpha; a
//     batch size 0 means the whole data set) and cite the paper, algorithm
//     and equation in the doc comment.
//  2. Init(p, st): list the checks of the settings (checkStep, checkCount,
//     checkBatch, ...) in a methodInit, which validates them against p so
//     that a bad value fails before any work, saying what to change, and
//     then validates the outer optimizer, estimates the curvature behind
//     default step sizes and allocates st.V; reject projections the method
//     cannot honour (noProjectY); allocate what else st lacks (st.Vec(name,
//     n)) without overwriting what is there, because Resume calls Init on
//     a restored State.
//  3. Iterate(p, st): one outer iteration k = st.Iter. Draw batches with
//     st.Batch, keep scratch in st.Work, keep anything that must survive to
//     the next iteration in st (X, Y, V, Vecs, Scalars, XOpt, YOpt), move x
//     with st.StepX(optimizer, hypergradient) (a y-update that may be
//     constrained ends with st.ProjectY) and return the hypergradient norm.
//     Call oracles only through p: Solve wraps it to count calls and catch
//     NaN. Add to st.Calls.Dense for each dense matrix the method forms
//     itself. Return a solver's error as it is: Solve names the iteration
//     and the oracle. Do not increment st.Iter: Solve does that.
//  4. Add `var _ Method = YourMethod{}`, a test on the quadratic problem in
//     quadratic_test.go (convergence, per-iteration oracle counts, resume)
//     and runs in trajectory_test.go.
type Method interface {
	// Init prepares st for the first iteration (or checks a resumed one):
	// it validates the settings against p and allocates the method's
	// buffers in st if they are missing. It may call oracles (counted).
	Init(p oracle.Problem, st *State) error
	// Iterate performs one outer iteration on st.
	Iterate(p oracle.Problem, st *State) (Iteration, error)
}

// Iteration is what one call of Method.Iterate reports.
type Iteration struct {
	// HypergradNorm is ‖ĥ∇Φ(x_k)‖₂, the norm of the hypergradient estimate
	// used for the x-update.
	HypergradNorm float64
}

// methodInit is the Init every method does, as data: its checks, then the
// outer optimizer, the curvature behind default step sizes and State.V.
type methodInit struct {
	name string
	// checks are the method's setting checks in order; the first error
	// wins.
	checks []error
	// outer is the method's outer optimizer setting (nil: the default
	// Adam), validated when hasOuter.
	outer    Optimizer
	hasOuter bool
	// steps are step sizes whose zero value means 1/L: if any is zero, Init
	// estimates L (curvature).
	steps []float64
	// v allocates State.V (zeros) when it is missing.
	v bool
}

// run validates and prepares st.
func (mi methodInit) run(p oracle.Problem, st *State) error {
	if err := firstErr(mi.checks...); err != nil {
		return err
	}
	if mi.hasOuter {
		if err := orDefault(mi.outer).Validate(); err != nil {
			return fmt.Errorf("%s.Outer: %w", mi.name, err)
		}
	}
	for _, s := range mi.steps {
		if s == 0 {
			if _, err := curvature(p, st); err != nil {
				return err
			}
			break
		}
	}
	if mi.v && st.V == nil {
		st.V = make([]float64, p.DimY())
	}
	return nil
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
// when p declares CheckBatch, against what p's oracles can evaluate, so
// that a graph that cannot take the size fails here with an error instead
// of panicking in the first oracle call.
func checkBatch(p oracle.Problem, name string, size int, set DataSet) error {
	n, which := p.NumLower(), "NumLower"
	if set == Upper {
		n, which = p.NumUpper(), "NumUpper"
	}
	if size < 0 || size > n {
		return fmt.Errorf("%s = %d: set a batch size between 1 and %s() = %d, or 0 for the whole data set", name, size, which, n)
	}
	if check := p.Capabilities().CheckBatch; check != nil && size > 0 {
		if err := check(set == Upper, size); err != nil {
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

// count returns v, or def when v is 0: a count whose zero value means a
// default.
func count(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
