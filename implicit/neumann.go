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
// where A_i is the operator of step Q − i + 1 of the source given to
// SolveSteps (an independent stochastic estimate of A, the HVP on a fresh
// mini-batch B_i, for stocBiO), or A itself for Solve. For deterministic A
// with 0 < η·λ ≤ 1 on the spectrum the error is (I − ηA)^{Q+1}·A⁻¹b, so it
// shrinks by the factor 1 − ημ per term, μ = λmin(A).
//
// With Truncate set, Solve instead returns the randomized-truncation
// estimate of Ghadimi and Wang (2018, Algorithm 3), paper 004's eq. 9b:
// it draws J = Truncate(Q+1), uniform on {0, …, Q}, and returns
// (Q+1)·η·Π_{j=1}^{J} (I − ηA_j)·b, whose mean over J and independent A_j
// is the series above at a cost of J products (Q/2 on average).
//
// A nonzero initial dst v0 is a warm start: the series is applied to the
// residual, v = v0 + η·Σ (I − ηA)^i·(b − A·v0), which equals Q+1 fixed-point
// steps from v0. A zero dst gives Algorithm 3 exactly.
//
// Before summing, Solve checks η against λmax(A) (estimated by Lanczos
// steps on the operator unless LambdaMax is given) and refuses with a
// *StepSizeError when η·λmax > MaxEtaLambda, and while summing it stops with
// a *DivergenceError when ‖r_i‖ grows beyond MaxGrowth·‖r_Q‖.
type Neumann struct {
	// Eta is the step η. Zero means 1/λmax with λmax from LambdaMax or
	// Lanczos steps (the paper's η ≤ 1/L).
	Eta float64
	// Terms is Q, the number of operator applications in the series (the
	// largest number for Truncate). Zero means 20.
	Terms int
	// Truncate, when non-nil, selects the randomized-truncation estimator:
	// Truncate(n) must return a uniform draw from {0, …, n−1} (a method's
	// random stream, say rand.Rand.IntN).
	Truncate func(n int) int
	// LambdaMax, when positive, is a known upper bound on λmax(A) and
	// replaces the Lanczos estimate.
	LambdaMax float64
	// LanczosSteps is the maximum number of Lanczos steps (operator
	// applications) for estimating λmax; the estimate stops early once it
	// changes by less than 0.1%. Zero means 30. A negative value skips the
	// estimate and the η check; Eta must then be set. The estimate is
	// repeated on every Solve: when the operator changes little between
	// calls, estimate once (LargestEigenvalue) and set LambdaMax instead.
	LanczosSteps int
	// MaxEtaLambda is the largest admitted η·λmax. Zero means 1, the
	// paper's condition η ≤ 1/L. The series converges for any value below 2
	// in exact arithmetic, but Lanczos approaches λmax from below and
	// mini-batch Hessians have larger eigenvalues than the full one, so
	// the default keeps a factor 2 of margin.
	MaxEtaLambda float64
	// MaxGrowth is the divergence threshold on ‖r_i‖/‖r_Q‖. Zero means 10;
	// +Inf disables the check. With 0 < η·λ < 2 the deterministic terms
	// never grow.
	MaxGrowth float64

	r, ar []float64 // scratch, reused across calls
	lz    lanczos
}

// Solve computes the Neumann approximation of A⁻¹·b into dst with op as
// every A_i; see Neumann.
func (s *Neumann) Solve(dst []float64, op Operator, b []float64) (Stats, error) {
	return s.solve(dst, op, nil, b)
}

// SolveSteps computes the Neumann approximation of A⁻¹·b into dst, asking
// ops for the operator of each term (step k = Q − i + 1 applies A_i), and
// for step 0 when it needs the step-size check or a warm start's residual.
// On a *DivergenceError or *BreakdownError dst holds the partial sum of the
// terms accepted so far (plus the warm start); with Truncate, dst is left
// at the warm start.
func (s *Neumann) SolveSteps(dst []float64, ops Operators, b []float64) (Stats, error) {
	return s.solve(dst, nil, ops, b)
}

// solve is Solve with op (ops nil) or SolveSteps with ops.
func (s *Neumann) solve(dst []float64, op Operator, ops Operators, b []float64) (Stats, error) {
	checkLen("Neumann", dst, b)
	n := len(b)
	if err := checkIters("neumann", "Terms", s.Terms); err != nil {
		return Stats{}, err
	}
	q := s.Terms
	if q == 0 {
		q = 20
	}
	growth := orFloat(s.MaxGrowth, defaultMaxGrowth)
	s.r, s.ar = grow(s.r, n), grow(s.ar, n)
	r, ar := s.r, s.ar

	at := source{op, ops}.at
	var st Stats
	var op0 Operator // step 0's operator, asked for once when needed
	at0 := func() Operator {
		if op0 == nil {
			op0 = at(0)
		}
		return op0
	}
	eta, calls, err := checkedStep("neumann", s.Eta, s.LambdaMax, s.LanczosSteps, s.MaxEtaLambda, 0, at0, r, &s.lz)
	st.HVP += calls
	if err != nil {
		return st, err
	}

	// r_Q = b − A·v0 (= b on a cold start); dst accumulates v0 + η·Σ r_i.
	if isZero(dst) {
		copy(r, b)
	} else {
		at0()(ar, dst)
		st.HVP++
		floats.SubTo(r, b, ar)
	}
	r0 := floats.Norm(r, 2)
	if !finite(r0) {
		return st, &BreakdownError{Solver: "neumann", Iter: 0, Quantity: "‖r_Q‖", Value: r0}
	}
	terms, scale := q, eta
	if s.Truncate != nil {
		terms, scale = s.Truncate(q+1), float64(q+1)*eta
	} else {
		floats.AddScaled(dst, eta, r)
	}
	st.Residual = r0
	for k := 1; k <= terms; k++ {
		at(k)(ar, r)
		st.HVP++
		floats.AddScaled(r, -eta, ar)
		rn := floats.Norm(r, 2)
		if !finite(rn) {
			return st, &BreakdownError{Solver: "neumann", Iter: k, Quantity: "‖r_i‖", Value: rn}
		}
		if rn > growth*r0 {
			return st, &DivergenceError{Solver: "neumann", Iter: k, Norm: rn, Initial: r0, Eta: eta}
		}
		if s.Truncate == nil {
			floats.AddScaled(dst, eta, r)
		}
		st.Iterations = k
		st.Residual = rn
	}
	if s.Truncate != nil {
		floats.AddScaled(dst, scale, r)
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

// stepTol is the relative change of the largest Ritz value at which the
// λmax estimate for a step-size check stops: the check keeps a factor 2 of
// margin, so 0.1% is plenty.
const stepTol = 1e-3

// checkedStep returns the step size to use for an iteration
// v ← v − η((A + shift·I)·v − b): the given eta checked against λmax, or
// 1/λmax when eta is zero, where λmax is lambdaMax when positive and
// otherwise shift plus the Lanczos estimate for op(). v is scratch of
// length dim(A) and lz the Lanczos scratch. It returns the number of
// operator applications it made.
func checkedStep(solver string, eta, lambdaMax float64, steps int, bound, shift float64, op func() Operator, v []float64, lz *lanczos) (float64, int, error) {
	if eta < 0 || math.IsNaN(eta) {
		return 0, 0, errors.New("implicit: " + solver + ": negative or NaN step size Eta")
	}
	if bound == 0 {
		bound = 1
	}
	estimated := false
	calls := 0
	if lambdaMax <= 0 {
		if steps < 0 {
			if eta == 0 {
				return 0, 0, errors.New("implicit: " + solver + ": Eta is zero and LanczosSteps < 0 disables the λmax estimate that would choose it")
			}
			return eta, 0, nil
		}
		if steps == 0 {
			steps = 30
		}
		randomFill(v, 1)
		_, lam, it, err := lz.run(op(), v, steps, stepTol)
		calls = it
		if err != nil {
			return 0, calls, err
		}
		if lam <= 0 {
			return 0, calls, fmt.Errorf("%w: %s: Lanczos steps estimate the largest eigenvalue as %.3g ≤ 0", ErrNotPositiveDefinite, solver, lam)
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
