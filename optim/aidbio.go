package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// AIDBiO is AID-BiO, the approximate-implicit-differentiation method of
// paper 003 (Ji, Yang, Liang 2021, Algorithm 1, AID branch). Iteration k:
//
//	y_k^0 = y_{k−1}^D (warm start),   y_k^t = y_k^{t−1} − α ∇y g(x_k, y_k^{t−1}),  t = 1..D
//	v_k^N = N steps of CG on ∇yy g(x_k, y_k^D) v = ∇y f(x_k, y_k^D) from v_k^0 = v_{k−1}^N
//	ĥ∇Φ(x_k) = ∇x f(x_k, y_k^D) − ∇xy g(x_k, y_k^D) v_k^N          (eq. 3)
//	x_{k+1} = x_k − β ĥ∇Φ(x_k)   (or the step of the Outer optimizer)
//
// It composes the inner loop (unroll.Descend), the estimate
// implicit.Estimate with implicit.CG on the problem's HVP operator
// (implicit.HVPOperator, linearized where the problem declares it) and the
// outer optimizer. v_k^N is kept in State.V. Oracle calls per iteration:
// D GradG, 1 GradF, 1 MixedXY and N+1 HVPs: N for the CG steps and 1 for
// the initial residual ∇y f − ∇yy g v_k^0, which is skipped while v_k^0 = 0
// (at k = 0), so iteration 0 costs N. CG stops earlier only when the
// residual reaches CGTol (or exactly 0). If CG breaks down on a NaN or
// ±Inf, the iteration fails with the solver's *implicit.BreakdownError
// (v left at its last finite iterate) and Solve names the oracle.
//
// With the batch sizes left at 0 this is the deterministic algorithm of the
// paper; setting them gives a minibatch variant (the CG system and the mixed
// product share one batch per iteration, since CG needs a fixed operator).
type AIDBiO struct {
	// Alpha is the inner step size α. 0 means 1/L, with L the largest
	// eigenvalue of ∇yy g at (x0, y0) on the whole lower data set, estimated
	// in Init by min(30, DimY) Lanczos steps (as many HVPs, once per run).
	Alpha float64
	// D is the number of inner gradient steps; 0 means 10.
	D int
	// IncreasingD, if > 0, replaces D by D_k = ⌈c (k+1)^{1/4}⌉ with
	// c = IncreasingD ("AID-BiO-increasing", paper 003 Sec. 5).
	IncreasingD float64
	// N is the number of CG steps; 0 means 10.
	N int
	// CGTol stops CG once ‖∇y f − ∇yy g v‖ ≤ CGTol·‖∇y f‖; 0 runs all N steps.
	CGTol float64
	// InnerBatch is the lower-level batch size of each inner step (a fresh
	// batch per step); 0 means the whole data set.
	InnerBatch int
	// HessianBatch is the size of the lower-level batch drawn once per
	// iteration for the CG HVPs and the mixed product; 0: whole data set.
	HessianBatch int
	// UpperBatch is the upper-level batch size for ∇f; 0: whole data set.
	UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3).
	Outer Optimizer
}

var _ Method = AIDBiO{}

// Init implements Method. It allocates State.V (zeros) if missing.
func (m AIDBiO) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "AIDBiO", checks: []error{
		checkStep("AIDBiO.Alpha", m.Alpha),
		checkCount("AIDBiO.D", m.D),
		checkCount("AIDBiO.N", m.N),
		checkBatch(p, "AIDBiO.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "AIDBiO.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "AIDBiO.UpperBatch", m.UpperBatch, Upper),
		noProjectY("AIDBiO", st),
		checkIncreasing("AIDBiO.IncreasingD", m.IncreasingD),
		checkTol("AIDBiO.CGTol", m.CGTol),
	}, outer: m.Outer, hasOuter: true, steps: []float64{m.Alpha}, v: true}.run(p, st)
}

// InnerSteps returns D_k, the number of inner steps at iteration k, or an
// error when the increasing schedule exceeds MaxInnerSteps.
func (m AIDBiO) InnerSteps(k int) (int, error) {
	if m.IncreasingD > 0 {
		return IncreasingSteps(m.IncreasingD, k)
	}
	return count(m.D, 10), nil
}

// MaxInnerSteps bounds the number of inner steps of one iteration of an
// increasing schedule (D_k of AIDBiO.IncreasingD, meta's Growth): a larger
// D_k is an error, not an integer overflow.
const MaxInnerSteps = math.MaxInt32

// IncreasingSteps returns D_k = ⌈c (k+1)^{1/4}⌉, the inner steps of
// iteration k of AID-BiO-increasing (paper 003 Sec. 5), or an error when
// it exceeds MaxInnerSteps.
func IncreasingSteps(c float64, k int) (int, error) {
	d := math.Ceil(c * math.Pow(float64(k+1), 0.25))
	if !(d <= MaxInnerSteps) {
		return 0, fmt.Errorf("the increasing schedule ⌈c (k+1)^(1/4)⌉ with c = %v gives %v inner steps at iteration %d, more than %d: use a smaller c", c, d, k, MaxInnerSteps)
	}
	return int(d), nil
}

// checkIncreasing validates the constant c of an increasing schedule.
func checkIncreasing(name string, c float64) error {
	if !(c >= 0) || math.IsInf(c, 1) {
		return fmt.Errorf("%s = %v: set c > 0 for D_k = ⌈c (k+1)^(1/4)⌉, or 0 for constant D", name, c)
	}
	if _, err := IncreasingSteps(c, 0); err != nil {
		return fmt.Errorf("%s = %v: %w", name, c, err)
	}
	return nil
}

// checkTol validates a relative tolerance whose zero value runs all steps.
func checkTol(name string, tol float64) error {
	if !(tol >= 0) || math.IsInf(tol, 1) {
		return fmt.Errorf("%s = %v: set a finite tolerance ≥ 0 (0 runs all N steps)", name, tol)
	}
	return nil
}

// Iterate implements Method.
func (m AIDBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	d, err := m.InnerSteps(st.Iter)
	if err != nil {
		return Iteration{}, err
	}
	var hb []int // one lower batch for the CG system and the mixed product
	return aidStep{steps: d, alpha: stepOrDefault(m.Alpha, st), innerBatch: m.InnerBatch, upperBatch: m.UpperBatch,
		solve: func(v, b []float64) (implicit.Stats, error) {
			hb = st.Batch(p, Lower, m.HessianBatch)
			return cgOn(implicit.HVPOperator(p, st.X, st.Y, hb), count(m.N, 10), m.CGTol)(v, b)
		},
		cross: func(dst, v []float64) { p.MixedXY(dst, st.X, st.Y, v, hb) },
		scale: 1, outer: m.Outer,
	}.iterate(p, st)
}
