package implicit

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// Neumann approximates A⁻¹·b by the truncated Neumann series
// η·Σ_{i=0}^{Q} (I − ηA)^i·b, computed exactly as Algorithm 3 of Ji, Yang
// and Liang (2021):
//
//	r_Q = b
//	for i = Q, …, 1:  r_{i−1} = r_i − η·A_i·r_i
//	v_Q = η·Σ_{i=0}^{Q} r_i
//
// where A_i is Term(i), an independent stochastic estimate of A (the HVP on
// a fresh mini-batch B_i), or A itself when Term is nil. For deterministic A
// with 0 < η·λ ≤ 1 on the spectrum the error is (I − ηA)^{Q+1}·A⁻¹b, so it
// shrinks by the factor 1 − ημ per term, μ = λmin(A).
//
// A nonzero initial dst v0 is a warm start: the series is applied to the
// residual, v = v0 + η·Σ (I − ηA)^i·(b − A·v0), which equals Q+1 fixed-point
// steps from v0. A zero dst gives Algorithm 3 exactly.
//
// Before summing, Solve checks η against λmax(A) (estimated by power
// iteration on op unless LambdaMax is given) and refuses with a
// *StepSizeError when η·λmax > MaxEtaLambda, and while summing it stops with
// a *DivergenceError when ‖r_i‖ grows beyond MaxGrowth·‖r_Q‖.
type Neumann struct {
	// Eta is the step η. Zero means 1/λmax with λmax from LambdaMax or
	// power iteration (the paper's η ≤ 1/L).
	Eta float64
	// Terms is Q, the number of operator applications in the series.
	// Zero means 20.
	Terms int
	// Term, when non-nil, returns the operator A_i used for term i; Solve
	// calls it for i = Q, Q−1, …, 1 in that order, once each. Use it for
	// stocBiO's independent batches B_i (see HVPOperator and
	// NeumannBatchSizes). When nil, every term uses the op passed to Solve.
	// The step-size check and a warm start's residual always use op.
	Term func(i int) Operator
	// LambdaMax, when positive, is a known upper bound on λmax(A) and
	// replaces the power-iteration estimate.
	LambdaMax float64
	// PowerIters is the maximum number of power-iteration steps (operator
	// applications) for estimating λmax; the estimate stops early once it
	// changes by less than 0.1%. Zero means 30. A negative value skips the
	// estimate and the η check; Eta must then be set. The estimate is
	// repeated on every Solve: when the operator changes little between
	// calls, estimate once (LargestEigenvalue) and set LambdaMax instead.
	PowerIters int
	// MaxEtaLambda is the largest admitted η·λmax. Zero means 1, the
	// paper's condition η ≤ 1/L. The series converges for any value below 2
	// in exact arithmetic, but power iteration approaches λmax from below
	// and mini-batch Hessians have larger eigenvalues than the full one, so
	// the default keeps a factor 2 of margin.
	MaxEtaLambda float64
	// MaxGrowth is the divergence threshold on ‖r_i‖/‖r_Q‖. Zero means 10.
	// With 0 < η·λ < 2 the deterministic terms never grow.
	MaxGrowth float64

	r, ar []float64 // scratch, reused across calls
}

// Solve computes the Neumann approximation of A⁻¹·b into dst; see Neumann.
// On a *DivergenceError or *BreakdownError dst holds the partial sum of the
// terms accepted so far (plus the warm start).
func (s *Neumann) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	checkLen("Neumann", dst, b)
	n := len(b)
	q := s.Terms
	if q == 0 {
		q = 20
	}
	if q < 0 {
		return Stats{}, fmt.Errorf("implicit: neumann: Terms = %d < 0", q)
	}
	growth := s.MaxGrowth
	if growth == 0 {
		growth = defaultMaxGrowth
	}
	s.r, s.ar = grow(s.r, n), grow(s.ar, n)
	r, ar := s.r, s.ar

	var st Stats
	eta, calls, err := checkedStep("neumann", s.Eta, s.LambdaMax, s.PowerIters, s.MaxEtaLambda, 0, op, r, ar)
	st.OpCalls += calls
	if err != nil {
		return st, err
	}

	// r_Q = b − A·v0 (= b on a cold start); dst accumulates v0 + η·Σ r_i.
	if isZero(dst) {
		copy(r, b)
	} else {
		op(ar, dst)
		st.OpCalls++
		floats.SubTo(r, b, ar)
	}
	r0 := floats.Norm(r, 2)
	if !finite(r0) {
		return st, &BreakdownError{Solver: "neumann", Iter: 0, Quantity: "‖r_Q‖", Value: r0}
	}
	floats.AddScaled(dst, eta, r)
	st.Residual = r0
	for i := q; i >= 1; i-- {
		ai := op
		if s.Term != nil {
			ai = s.Term(i)
		}
		ai(ar, r)
		st.OpCalls++
		floats.AddScaled(r, -eta, ar)
		rn := floats.Norm(r, 2)
		it := q - i + 1
		if !finite(rn) {
			return st, &BreakdownError{Solver: "neumann", Iter: it, Quantity: "‖r_i‖", Value: rn}
		}
		if rn > growth*r0 {
			return st, &DivergenceError{Solver: "neumann", Iter: it, Norm: rn, Initial: r0, Eta: eta}
		}
		floats.AddScaled(dst, eta, r)
		st.Iterations = it
		st.Residual = rn
	}
	st.Converged = true
	return st, nil
}

// NeumannBatchSizes returns the batch sizes of the decaying schedule that
// Proposition 3 of Ji, Yang and Liang (2021) prescribes for the stochastic
// Neumann series: |B_{Q+1−j}| = B·Q·(1 − ημ)^{j−1} for j = 1, …, Q, with
// B = base and rate = 1 − ημ. The term applied first (B_Q, whose operator
// multiplies every later term) gets the largest batch B·Q, and each
// following one shrinks by the factor rate. sizes[i−1] is |B_i|, rounded up
// and clipped to [1, maxSize] (maxSize ≤ 0: no upper clip, otherwise
// typically the data set size). The paper takes B ≥ 1/(Q·rate^{Q−1}) so
// that no batch is empty before clipping.
func NeumannBatchSizes(q int, base, rate float64, maxSize int) []int {
	sizes := make([]int, q)
	for i := 1; i <= q; i++ {
		sz := math.Ceil(base * float64(q) * math.Pow(rate, float64(q-i)))
		switch {
		case !(sz >= 1):
			sz = 1
		case maxSize > 0 && sz > float64(maxSize):
			sz = float64(maxSize)
		}
		sizes[i-1] = int(sz)
	}
	return sizes
}

// powerTol is the relative change of the Rayleigh quotient at which the
// λmax estimate for a step-size check stops: the check keeps a factor 2 of
// margin, so 0.1% is plenty.
const powerTol = 1e-3

// checkedStep returns the step size to use for an iteration
// v ← v − η((A + shift·I)·v − b): the given eta checked against λmax, or
// 1/λmax when eta is zero, where λmax is lambdaMax when positive and
// otherwise shift plus the power-iteration estimate for op. v and av are
// scratch of length dim(A). It returns the number of operator applications
// it made.
func checkedStep(solver string, eta, lambdaMax float64, powerIters int, bound, shift float64, op Operator, v, av []float64) (float64, int, error) {
	if eta < 0 || math.IsNaN(eta) {
		return 0, 0, errors.New("implicit: " + solver + ": negative or NaN step size Eta")
	}
	if bound == 0 {
		bound = 1
	}
	estimated := false
	calls := 0
	if lambdaMax <= 0 {
		if powerIters < 0 {
			if eta == 0 {
				return 0, 0, errors.New("implicit: " + solver + ": Eta is zero and PowerIters < 0 disables the λmax estimate that would choose it")
			}
			return eta, 0, nil
		}
		if powerIters == 0 {
			powerIters = 30
		}
		randomFill(v, 1)
		lam, it, err := powerIteration(v, av, op, powerIters, powerTol)
		calls = it
		if err != nil {
			return 0, calls, err
		}
		if lam <= 0 {
			return 0, calls, fmt.Errorf("%w: %s: power iteration estimates the dominant eigenvalue as %.3g ≤ 0", ErrNotPositiveDefinite, solver, lam)
		}
		lambdaMax, estimated = lam+shift, true
	}
	if eta == 0 {
		return 1 / lambdaMax, calls, nil
	}
	if eta*lambdaMax > bound*(1+1e-12) {
		return 0, calls, &StepSizeError{Solver: solver, Eta: eta, LambdaMax: lambdaMax, Estimated: estimated, Bound: bound}
	}
	return eta, calls, nil
}
