package bilevel

import (
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/optimize"
)

// newtonCG is the truncated Newton method (Newton-CG, Nocedal and Wright,
// Numerical Optimization, Algorithm 7.1) on y ↦ g(x, y), as a
// gonum/optimize Method: each direction solves ∇yy g(x, y)·d = −∇y g by
// implicit.CG on the problem's Hessian-vector products (the linearized
// operator where the problem declares one, implicit.HVPOperator) to the
// relative residual min(½, √‖∇y g‖), so that the steps converge
// superlinearly, and the step along it comes from gonum's
// LinesearchMethod with wolfeSearch, starting at the Newton step 1. A
// direction of non-positive curvature ends the CG solve: its iterate so
// far is the direction, or −∇y g when it is found at the first step, whose
// length the line search then finds. Gradient, value and limits are
// gonum's: Minimize evaluates g and ∇y g, applies the Converger and counts.
type newtonCG struct {
	c *call

	ls     optimize.LinesearchMethod
	cg     implicit.CG
	y      []float64 // the point of the current Hessian operator
	status optimize.Status
	err    error
}

var (
	_ optimize.Method          = (*newtonCG)(nil)
	_ optimize.NextDirectioner = (*newtonCG)(nil)
	_ optimize.Statuser        = (*newtonCG)(nil)
)

// Uses requires the gradient.
func (*newtonCG) Uses(has optimize.Available) (optimize.Available, error) {
	if !has.Grad {
		return optimize.Available{}, optimize.ErrMissingGrad
	}
	return optimize.Available{Grad: true}, nil
}

// Init prepares a run; the method evaluates one location at a time.
func (m *newtonCG) Init(dim, tasks int) int {
	m.status, m.err = optimize.NotTerminated, nil
	m.ls = optimize.LinesearchMethod{NextDirectioner: m, Linesearcher: &wolfeSearch{}}
	return 1
}

// Status reports why the method stopped a run itself.
func (m *newtonCG) Status() (optimize.Status, error) { return m.status, m.err }

// Run follows the protocol of optimize.Method: evaluate the starting
// location, announce it as the first major iteration, then hand each
// location to the line search until Minimize ends the run (PostIteration)
// or the line search fails (MethodDone, with the error in Status).
func (m *newtonCG) Run(operation chan<- optimize.Task, result <-chan optimize.Task, tasks []optimize.Task) {
	defer close(operation)
	task := tasks[0]
	for _, op := range []optimize.Operation{optimize.FuncEvaluation | optimize.GradEvaluation, optimize.MajorIteration} {
		task.Op = op
		operation <- task
		if task = <-result; task.Op == optimize.PostIteration {
			drain(result)
			return
		}
	}
	op, err := startError(task.Location)
	if err == nil {
		op, err = m.ls.Init(task.Location)
	}
	for err == nil {
		task.Op = op
		operation <- task
		if task = <-result; task.Op == optimize.PostIteration {
			drain(result)
			return
		}
		op, err = m.ls.Iterate(task.Location)
	}
	m.status, m.err = optimize.Failure, err
	task.Op = optimize.MethodDone
	operation <- task
	drain(result)
}

// startError refuses a starting location with a value or gradient that
// is not finite, with gonum's errors, as gonum's own methods do.
func startError(loc *optimize.Location) (optimize.Operation, error) {
	if math.IsNaN(loc.F) || math.IsInf(loc.F, 1) {
		return optimize.NoOperation, optimize.ErrFunc(loc.F)
	}
	for i, v := range loc.Gradient {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return optimize.NoOperation, optimize.ErrGrad{Grad: v, Index: i}
		}
	}
	return optimize.NoOperation, nil
}

// drain reads result until Minimize closes it, as Method's contract asks.
func drain(result <-chan optimize.Task) {
	for range result {
	}
}

// InitDirection is NextDirection at the starting location.
func (m *newtonCG) InitDirection(loc *optimize.Location, dir []float64) float64 {
	return m.NextDirection(loc, dir)
}

// NextDirection stores the truncated Newton direction at loc in dir and
// returns the first trial step, 1.
func (m *newtonCG) NextDirection(loc *optimize.Location, dir []float64) float64 {
	c := m.c
	m.y = append(m.y[:0], loc.X...)
	gn := floats.Norm(loc.Gradient, 2)
	m.cg.Tol = math.Min(0.5, math.Sqrt(gn))
	clear(dir)
	// An error leaves the last iterate that passed CG's checks in dir: the
	// direction so far, or zero when the first step failed.
	st, _ := m.cg.Solve(dir, implicit.HVPOperator(c.p, c.x, m.y, nil), loc.Gradient)
	c.calls.HVP += int64(st.HVP)
	if floats.Norm(dir, 2) == 0 {
		floats.ScaleTo(dir, 1/gn, loc.Gradient)
	}
	floats.Scale(-1, dir)
	return 1
}
