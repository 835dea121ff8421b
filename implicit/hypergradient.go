package implicit

import "fmt"

// Hessian is the lower-level Hessian-vector product oracle:
// HVP writes ∇yy g(x, y)·v on the lower-level samples batch (nil: all) to dst.
type Hessian interface {
	HVP(dst, x, y, v []float64, batch []int)
}

// Problem is the oracle set that Hypergradient needs from a bilevel problem
// min_x f(x, y*(x)), y*(x) = argmin_y g(x, y). Methods write to their first
// argument; batch selects samples (upper-level ones for GradF, lower-level
// ones for HVP and MixedXY) and nil means the full data set.
type Problem interface {
	Hessian
	// GradF writes ∇x f(x, y) to dx and ∇y f(x, y) to dy.
	GradF(dx, dy, x, y []float64, batch []int)
	// MixedXY writes ∇x∇y g(x, y)·v = ∇x ⟨∇y g(x, y), v⟩ to dst (length d_x).
	MixedXY(dst, x, y, v []float64, batch []int)
}

// Linearizer is implemented by Hessians that can fix (x, y) and a batch so
// that repeated products share the work that does not depend on the vector
// (graph.Problem does): HVPAt returns that operator.
type Linearizer interface {
	HVPAt(x, y []float64, batch []int) func(dst, v []float64)
}

// HVPOperator returns the operator v ↦ ∇yy g(x, y)·v on the given batch:
// h's HVPAt when h is a Linearizer, h.HVP otherwise. The operator keeps x, y
// and batch; they must not change while it is in use.
func HVPOperator(h Hessian, x, y []float64, batch []int) Operator {
	if l, ok := h.(Linearizer); ok {
		return l.HVPAt(x, y, batch)
	}
	return func(dst, v []float64) { h.HVP(dst, x, y, v, batch) }
}

// Settings configures Hypergradient. The zero value (or nil) solves with
// CG's defaults on full batches from a cold start.
type Settings struct {
	// Solver solves ∇yy g·v = ∇y f. Nil means &CG{} with its defaults.
	Solver Solver
	// FBatch are the upper-level samples for ∇x f and ∇y f; nil means all.
	FBatch []int
	// HessianBatch are the lower-level samples of the HVP operator given to
	// the solver; nil means all. (Neumann.Term can override it per term.)
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
	// Stats is the linear solve's report; Stats.OpCalls counts the HVP
	// calls. Hypergradient adds one GradF and one MixedXY call.
	Stats
	// V is the solution v of ∇yy g(x, y)·v = ∇y f(x, y).
	V []float64
}

// Hypergradient writes to dst (length d_x) the AID estimate of the
// hypergradient at (x, y),
//
//	∇Φ(x) ≈ ∇x f(x, y) − ∇x∇y g(x, y)·v,   ∇yy g(x, y)·v = ∇y f(x, y),
//
// where y should approximate y*(x) and v is computed by s.Solver. It is
// exact (Proposition 1 of Ji, Yang and Liang 2021) at y = y*(x) with an
// exact solve. s may be nil.
//
// If the solve fails, Hypergradient returns its error without the mixed
// product: dst then holds ∇x f(x, y) and Result.V the solver's last good
// iterate, so a caller that accepts a truncated solve can finish the
// estimate with MixedXY itself.
func Hypergradient(dst []float64, p Problem, x, y []float64, s *Settings) (Result, error) {
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
	// One buffer serves ∇y f and, once the solve has consumed it, ∇x∇y g·v.
	buf := make([]float64, max(len(x), len(y)))
	gy := buf[:len(y)]
	p.GradF(dst, gy, x, y, s.FBatch)
	st, err := solver.Solve(v, HVPOperator(p, x, y, s.HessianBatch), gy)
	res := Result{Stats: st, V: v}
	if err != nil {
		return res, err
	}
	mixed := buf[:len(x)]
	p.MixedXY(mixed, x, y, v, s.MixedBatch)
	for i := range dst {
		dst[i] -= mixed[i]
	}
	return res, nil
}
