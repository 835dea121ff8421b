package implicit

import (
	"errors"
	"fmt"
	"math"
)

// Operator applies a linear map A to v and writes the product to dst:
// dst = A·v. An Operator must not modify v, must not retain dst or v, and
// is never called with dst and v sharing memory. The solvers in this package
// assume A is symmetric; CG, Neumann and Dense also assume it is positive
// definite and report an error when they find evidence that it is not.
//
// The Hessian-vector product ∇yy g(x, y)·v at a fixed (x, y) is the operator
// of AID; HVPOperator builds it from an oracle.
type Operator func(dst, v []float64)

// Operators is a per-step operator source: it gives the operator A_k of
// each step k = 1, 2, … of an iterative solve, for solvers whose steps may
// each use an independent estimate of A (a Hessian-vector product on a new
// mini-batch, as stochastic bilevel methods draw one per step). A
// StepSolver calls it once per step, in increasing order of k, and applies
// the returned operator before it asks for the next one, so a source can
// draw a new batch at each call; it may call it with k = 0 first for the
// operator of a step-size check or a warm start's residual. A source may
// also refresh the right-hand side b in place when it is called for a step
// (a stochastic right-hand side b_k): FixedPoint reads b at every step,
// Neumann only before its first.
type Operators func(step int) Operator

// Fixed returns the source whose every step applies op.
func Fixed(op Operator) Operators { return func(int) Operator { return op } }

// Solver approximately solves the linear system A·v = b for v.
//
// Solve reads the initial guess from dst (all zeros means a cold start; the
// previous solution is a warm start) and overwrites dst with the solution.
// len(dst) must equal len(b); a mismatch is a programmer error and panics.
// Numerical trouble (a non-positive-definite operator, divergence, NaN) is
// reported as an error; dst then holds the last iterate that passed every
// check, never NaN produced by the failing step.
//
// Implementations keep scratch space in the receiver to avoid allocating in
// steady state, so one Solver value must not be used by several goroutines
// at once.
type Solver interface {
	Solve(dst []float64, op Operator, b []float64) (Stats, error)
}

// StepSolver is a Solver whose iteration is valid with a different
// operator at each step (a stationary iteration: Neumann, FixedPoint), so
// that it can run on a per-step source of stochastic estimates A_k with
// E[A_k] = A. SolveSteps is Solve on such a source; Solve(dst, op, b) is
// SolveSteps(dst, Fixed(op), b). CG and Dense need one fixed operator and
// are not StepSolvers.
type StepSolver interface {
	Solver
	SolveSteps(dst []float64, ops Operators, b []float64) (Stats, error)
}

// Compile-time checks that the solvers of this package satisfy Solver.
var (
	_ Solver     = (*CG)(nil)
	_ StepSolver = (*Neumann)(nil)
	_ StepSolver = (*FixedPoint)(nil)
	_ Solver     = (*Dense)(nil)
)

// Stats reports the work of a linear solve and the quality of its answer.
type Stats struct {
	// Iterations is the number of solver iterations: CG steps, Neumann
	// terms, fixed-point steps. Dense reports 0.
	Iterations int
	// HVP is the number of operator applications in total (Hessian-vector
	// products when the operator is ∇yy g), including the residual of a warm
	// start and the Lanczos steps of a step-size estimate.
	HVP int
	// Residual is ‖b − A·dst‖₂ as tracked by the solver: the recurrence
	// residual for CG, the exact residual for Dense and for FixedPoint (of
	// the iterate before its last step when the cap stopped it), and for
	// Neumann the norm of the last series term ‖r_0‖, which bounds the
	// residual (I − ηA)·r_0 from above when 0 < η·λ(A) ≤ 2.
	Residual float64
	// Converged reports whether the solver met its stopping rule: the
	// relative tolerance for CG and FixedPoint (false when the iteration cap
	// stopped them first), all Q terms for Neumann, a successful
	// factorization for Dense.
	Converged bool
}

// ErrNotPositiveDefinite is matched (with errors.Is) by every error that
// reports an operator that is not symmetric positive definite, including
// *CurvatureError.
var ErrNotPositiveDefinite = errors.New("implicit: operator is not symmetric positive definite")

// CurvatureError reports that CG met a search direction p with non-positive
// curvature pᵀAp ≤ 0, which proves that A is not positive definite. The
// destination of Solve then holds the iterate of step Iter−1.
type CurvatureError struct {
	Iter      int     // CG step (1-based) at which pᵀAp ≤ 0 was found
	Curvature float64 // pᵀAp
	PNormSq   float64 // pᵀp, to judge the scale of Curvature
}

func (e *CurvatureError) Error() string {
	return fmt.Sprintf("implicit: CG step %d found non-positive curvature pᵀAp = %.3g (pᵀp = %.3g): the operator is not positive definite; the destination holds the iterate of step %d",
		e.Iter, e.Curvature, e.PNormSq, e.Iter-1)
}

// Is makes errors.Is(err, ErrNotPositiveDefinite) true.
func (e *CurvatureError) Is(target error) bool { return target == ErrNotPositiveDefinite }

// BreakdownError reports a NaN or infinity met by a solver, for example
// because the operator returned NaN. The destination holds the last finite
// iterate.
type BreakdownError struct {
	Solver   string  // "cg", "neumann", "fixed-point", "lanczos", "dense"
	Iter     int     // iteration (1-based) that produced the value
	Quantity string  // what was not finite, e.g. "pᵀAp", "‖r‖"
	Value    float64 // the offending value
}

func (e *BreakdownError) Error() string {
	return fmt.Sprintf("implicit: %s breakdown at iteration %d: %s = %v", e.Solver, e.Iter, e.Quantity, e.Value)
}

// DivergenceError reports that a stationary iteration (Neumann series,
// fixed point) grew its residual beyond the allowed factor of its initial
// size, which means η·λmax(A) ≥ 2 or that A has a negative eigenvalue.
type DivergenceError struct {
	Solver  string  // "neumann" or "fixed-point"
	Iter    int     // iteration (1-based) at which growth was detected
	Norm    float64 // the residual (or series term) norm at Iter
	Initial float64 // its norm at the start
	Eta     float64 // the step size in use
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("implicit: %s diverged at iteration %d: residual norm %.3g grew from %.3g; the step η = %.3g is too large for the operator (need η·λmax < 2) or the operator is not positive definite",
		e.Solver, e.Iter, e.Norm, e.Initial, e.Eta)
}

// StepSizeError reports that a Neumann step size is too large for the
// operator: η·λmax exceeds the configured bound, so the series
// Σ (I − ηA)^i would converge slowly, oscillate or diverge.
type StepSizeError struct {
	Solver    string
	Eta       float64 // the requested step size η
	LambdaMax float64 // the largest eigenvalue used for the check
	Estimated bool    // whether LambdaMax came from Lanczos steps
	Bound     float64 // the largest admitted η·λmax
}

func (e *StepSizeError) Error() string {
	src := "given"
	if e.Estimated {
		src = "estimated by Lanczos steps"
	}
	return fmt.Sprintf("implicit: %s step η = %.4g with λmax ≈ %.4g (%s) gives η·λmax = %.4g > %.4g, so the Neumann series cannot be trusted to converge; use η ≤ %.4g, or leave Eta zero to get η = 1/λmax",
		e.Solver, e.Eta, e.LambdaMax, src, e.Eta*e.LambdaMax, e.Bound, e.Bound/e.LambdaMax)
}

// relTolerance and growth defaults shared by the iterative solvers.
const (
	defaultTol       = 1e-10
	defaultMaxGrowth = 10
)

// source is the operator source of a solve: ops, or op at every step when
// ops is nil (Solve's fixed operator, without a closure to allocate).
type source struct {
	op  Operator
	ops Operators
}

func (s source) at(k int) Operator {
	if s.ops == nil {
		return s.op
	}
	return s.ops(k)
}

// orFloat returns v, or def when v is 0.
func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// isZero reports whether every element of v is zero.
func isZero(v []float64) bool {
	for _, e := range v {
		if e != 0 {
			return false
		}
	}
	return true
}

// finite reports whether f is neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// grow returns buf resized to n, reusing its storage when large enough.
func grow(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float64, n)
}

func checkLen(solver string, dst, b []float64) {
	if len(dst) != len(b) {
		panic(fmt.Sprintf("implicit: %s: len(dst) = %d, len(b) = %d", solver, len(dst), len(b)))
	}
}

// checkIters validates an iteration count whose zero value means a default.
func checkIters(solver, field string, n int) error {
	if n < 0 {
		return fmt.Errorf("implicit: %s: %s = %d < 0: set a count ≥ 1, or 0 for the default", solver, field, n)
	}
	return nil
}
