package implicit

import (
	"fmt"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// HVPOperator returns the operator v ↦ ∇yy g(x, y)·v on the given batch:
// the problem's linearized operator when it declares one
// (oracle.Capabilities.HVPAt), h.HVP otherwise. The operator keeps x, y
// and batch; they must not change while it is in use.
func HVPOperator(h interface {
	oracle.Hessian
	oracle.Declarer
}, x, y []float64, batch []int) Operator {
	if at := h.Capabilities().HVPAt; at != nil {
		return at(x, y, batch)
	}
	return func(dst, v []float64) { h.HVP(dst, x, y, v, batch) }
}

// System is one AID hypergradient estimate written as its parts, plain
// functions in the manner of gonum/optimize's Problem, so that a method
// can draw a batch inside each, average clients' products, or use dense
// estimates of the second derivatives:
//
//	∇Φ ≈ g_x − C·v,   A·v = g_y,
//
// with g_x = ∇x f, g_y = ∇y f, A ≈ ∇yy g and C ≈ ∇xy g. Estimate calls the
// parts in the order Gradient, Solve, Cross, the order in which stochastic
// methods draw their batches.
type System struct {
	// Gradient writes g_x to gx (length d_x) and g_y to gy (length d_y).
	Gradient func(gx, gy []float64)
	// Solve overwrites v with an approximate solution of A·v = b, from the
	// initial guess in v (a warm start), and reports the solve; a Solver
	// on an operator, a StepSolver on a per-step source, or a factorized
	// dense estimate. Nil keeps v as given: the estimate of a method that
	// moves v after it (SOBA, NBO).
	Solve func(v, b []float64) (Stats, error)
	// Cross writes C·v (length d_x) to dst.
	Cross func(dst, v []float64)
}

// Estimate writes to dst (length d_x) the AID hypergradient estimate
// g_x − C·v of sys, with v (length d_y) as the solve's warm start and
// destination, and reports the solve. gy and cross are scratch of lengths
// d_y and d_x (nil: allocated). If the solve fails, Estimate returns its
// error without the cross term: dst then holds g_x and v the solver's last
// good iterate.
func Estimate(dst, v []float64, sys System, gy, cross []float64) (Stats, error) {
	if gy == nil {
		gy = make([]float64, len(v))
	}
	if cross == nil {
		cross = make([]float64, len(dst))
	}
	if len(gy) != len(v) || len(cross) != len(dst) {
		panic(fmt.Sprintf("implicit: Estimate: scratch of lengths %d and %d for d_y = %d, d_x = %d", len(gy), len(cross), len(v), len(dst)))
	}
	sys.Gradient(dst, gy)
	var st Stats
	if sys.Solve != nil {
		var err error
		if st, err = sys.Solve(v, gy); err != nil {
			return st, err
		}
	}
	sys.Cross(cross, v)
	floats.Sub(dst, cross)
	return st, nil
}

// Settings configures Hypergradient. The zero value (or nil) solves with
// CG's defaults on full batches from a cold start.
type Settings struct {
	// Solver solves ∇yy g·v = ∇y f. Nil means &CG{} with its defaults.
	Solver Solver
	// UpperBatch are the upper-level samples for ∇x f and ∇y f; nil means
	// all.
	UpperBatch []int
	// HessianBatch are the lower-level samples of the HVP operator given to
	// the solver; nil means all.
	HessianBatch []int
	// MixedBatch are the lower-level samples for ∇x∇y g·v; nil means all.
	MixedBatch []int
	// V, when non-nil, is the warm start for the solve (length d_y) and
	// receives the solution, which Result.V then aliases: pass the same
	// slice on the next outer iteration to warm-start as AID-BiO does.
	// When nil the solve starts from zero into a new slice.
	V []float64
}

// Result reports a hypergradient computation.
type Result struct {
	// Stats is the linear solve's report.
	Stats
	// Calls counts the oracle calls: 1 GradF, Stats.HVP HVPs and, unless
	// the solve failed, 1 MixedXY.
	Calls oracle.Calls
	// V is the solution v of ∇yy g(x, y)·v = ∇y f(x, y).
	V []float64
}

// Hypergradient writes to dst (length d_x) the AID estimate of the
// hypergradient at (x, y),
//
//	∇Φ(x) ≈ ∇x f(x, y) − ∇x∇y g(x, y)·v,   ∇yy g(x, y)·v = ∇y f(x, y),
//
// where y should approximate y*(x) and v is computed by s.Solver on the
// problem's HVP operator (HVPOperator). It is exact (Proposition 1 of Ji,
// Yang and Liang 2021) at y = y*(x) with an exact solve. s may be nil.
//
// If the solve fails, Hypergradient returns its error without the mixed
// product: dst then holds ∇x f(x, y) and Result.V the solver's last good
// iterate, so a caller that accepts a truncated solve can finish the
// estimate with MixedXY itself. The error wraps the problem's own cause
// (oracle.Capabilities.Err) when it reports one: a failed distributed call
// reaches the solver as NaN.
func Hypergradient(dst []float64, p oracle.Implicit, x, y []float64, s *Settings) (Result, error) {
	if s == nil {
		s = &Settings{}
	}
	solver := s.Solver
	if solver == nil {
		solver = &CG{}
	}
	v := s.V
	if v == nil {
		v = make([]float64, len(y))
	} else if len(v) != len(y) {
		panic(fmt.Sprintf("implicit: Hypergradient: len(Settings.V) = %d, len(y) = %d", len(v), len(y)))
	}
	if len(dst) != len(x) {
		panic(fmt.Sprintf("implicit: Hypergradient: len(dst) = %d, len(x) = %d", len(dst), len(x)))
	}
	op := HVPOperator(p, x, y, s.HessianBatch)
	res := Result{V: v, Calls: oracle.Calls{GradF: 1}}
	st, err := Estimate(dst, v, System{
		Gradient: func(gx, gy []float64) { p.GradF(gx, gy, x, y, s.UpperBatch) },
		Solve:    func(v, b []float64) (Stats, error) { return solver.Solve(v, op, b) },
		Cross:    func(dst, v []float64) { p.MixedXY(dst, x, y, v, s.MixedBatch) },
	}, nil, nil)
	res.Stats, res.Calls.HVP = st, int64(st.HVP)
	if err == nil {
		res.Calls.MixedXY = 1
	} else if cause := p.Capabilities().Err; cause != nil && cause() != nil {
		err = fmt.Errorf("%w, because the problem's oracles failed: %w", err, cause())
	}
	return res, err
}
