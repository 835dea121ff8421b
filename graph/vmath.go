package graph

import "math"

// The hyperbolic tangent and the logistic sigmoid, eight at a time on
// AVX-512 (vmath_amd64.s) and one at a time here, operation for operation
// the same, so that an element's bits do not depend on which computed it.
//
// Both rest on e^y for y = −|x| ≤ 0 (y = −2|x| for tanh) written as
// 2^k·(1 + p): k = round(y/ln 2), r = y − k·ln 2 in two parts (r and its
// rounding error rlo, |r| ≤ ln 2/2), and p = e^(r+rlo) − 1 =
// r + (r²·Q(r) + rlo) with its rounding error plo, Q the Taylor polynomial
// of (e^r − 1 − r)/r² to degree 11 (truncation below 2^−56 relative). p is
// small for small |x|, so that nothing cancels:
//
//	tanh|x| = (1 − e^y)/(1 + e^y) = (1 − 2^k − 2^k·p)/(1 + 2^k + 2^k·p)
//	σ(|x|)  = 1/(1 + 2^k + 2^k·p),  σ(−|x|) = (2^k + 2^k·p)/(1 + 2^k + 2^k·p)
//
// each sum with its rounding error (2^k·p is exact) and 2^k·plo, and the
// quotient corrected by its residual (quoFix): the error is little more
// than the last rounding. Within 1 ulp of the exact value (TestTanhInto and
// TestSigmoidInto assert it and log the worst case). |x| is clamped to
// tanhMax (sigmoidMax), where the result has saturated to ±1 (to 1 and to 0
// or exp's smallest subnormal), which also gives the infinities their
// values; NaN is returned as it is; ±0 and subnormal x give tanh x = x
// exactly.

const (
	tanhMax    = 22  // tanh(22) rounds to 1
	sigmoidMax = 746 // e^−746 rounds to 0
)

// expm1Parts returns k, 2^k, p and its rounding error plo with
// e^y = 2^k·(1 + p + plo) for y ≤ 0 (see the comment above).
func expm1Parts(y float64) (k, s, p, plo float64) {
	k = math.RoundToEven(y * expLog2e)
	r1 := math.FMA(-k, expLn2Hi, y)
	r := math.FMA(-k, expLn2Lo, r1)
	rlo := math.FMA(-k, expLn2Lo, r1-r)
	q := expC[0]
	for _, c := range expC[1:] {
		q = math.FMA(r, q, c)
	}
	p, plo = fastTwoSum(r, math.FMA(r*r, q, rlo))
	return k, math.Ldexp(1, int(k)), p, plo
}

// tanhOne returns tanh(x) by the vector kernel's algorithm.
func tanhOne(x float64) float64 {
	if x != x {
		return x
	}
	_, s, p, plo := expm1Parts(-2 * min(math.Abs(x), tanhMax))
	b, blo := float64(s*p), float64(s*plo) // exact: s is a power of two ≥ 2^−64
	n, nlo := onePlus(-s, -b)
	d, dlo := onePlus(s, b)
	return math.Copysign(quoFix(n, nlo-blo, d, dlo+blo), x)
}

// sigmoidOne returns 1/(1 + e^−x) by the vector kernel's algorithm. The
// numerator e^−|x| of negative x is formed with 2^max(k, −1000), so that
// its sum is exact, and the quotient scaled by the rest of 2^k: one
// rounding into the subnormal numbers, as exp's.
func sigmoidOne(x float64) float64 {
	if x != x {
		return x
	}
	k, s, p, plo := expm1Parts(-min(math.Abs(x), sigmoidMax))
	d, dlo := onePlus(s, float64(s*p))
	dlo += float64(s * plo)
	if x >= 0 {
		return quoFix(1, 0, d, dlo)
	}
	k1 := max(k, -1000)
	s1 := math.Ldexp(1, int(k1))
	n, nlo := fastTwoSum(s1, float64(s1*p))
	nlo += float64(s1 * plo)
	return math.Ldexp(quoFix(n, nlo, d, dlo), int(k-k1))
}

// onePlus returns 1 + s + b rounded and its rounding error, for |s| ≤ 1
// and |b| ≤ |1 + s| or 1 + s = 0.
func onePlus(s, b float64) (float64, float64) {
	t, tlo := fastTwoSum(1, s)
	u, ulo := fastTwoSum(t, b)
	return u, ulo + tlo
}

// fastTwoSum returns a + b rounded and its rounding error, for |a| ≥ |b|
// or a = 0.
func fastTwoSum(a, b float64) (s, e float64) {
	s = a + b
	return s, (a - s) + b
}

// quoFix returns (n + nlo)/(d + dlo), nlo and dlo below half an ulp of n
// and d: the quotient q = n/d corrected by the exact residual n − q·d and
// the low parts.
func quoFix(n, nlo, d, dlo float64) float64 {
	q := n / d
	rho := math.FMA(-q, d, n) + nlo
	return q + math.FMA(-q, dlo, rho)/d
}

// tanhLoop and sigmoidLoop are the portable loops of tanhInto and
// sigmoidInto, for the elements the vector kernels leave.
func tanhLoop(dst, x []float64) {
	for i, v := range x {
		dst[i] = tanhOne(v)
	}
}

func sigmoidLoop(dst, x []float64) {
	for i, v := range x {
		dst[i] = sigmoidOne(v)
	}
}
