package graph

import "math"

// The exponential, the logarithm, the hyperbolic tangent and the logistic
// sigmoid in float32 arithmetic, sixteen at a time on AVX-512
// (vmath32_amd64.s) and one at a time here, operation for operation the
// same (fma32 is the vector FMA's single rounding), so that an element's
// bits do not depend on which computed it.
//
// e^y, for y clamped to [−104, 89] (beyond, e^y rounds to 0 and +Inf), is
// 2^k·e^(r+rlo): k = round(y/ln 2), r = y − k·ln 2 rounded (|r| ≤ ln 2/2;
// ln 2 in two parts, the first product exact by the FMA) with its rounding
// error rlo, and e^(r+rlo) = 1 + r + w, w = r²·Q(r) + rlo, Q the Taylor
// polynomial of (e^r − 1 − r)/r² to degree 6 (truncation of w below 2^−32).
// exp adds 1 + r exactly in two parts (Fast2Sum), adds w to the low part
// and rounds once; the scaling by 2^k (VSCALEFPS) is exact but for
// subnormal results, which round a second time.
//
// tanh and the sigmoid rest on e^y for y = −2|x| (tanh) and y = −|x|
// written as 2^k·(1 + p + plo), p + plo = r + w exactly (Fast2Sum), so that
// nothing cancels for small |x|:
//
//	tanh|x| = (1 − e^y)/(1 + e^y) = (1 − 2^k − 2^k·p)/(1 + 2^k + 2^k·p)
//	σ(|x|)  = 1/(1 + 2^k + 2^k·p),  σ(−|x|) = (2^k + 2^k·p)/(1 + 2^k + 2^k·p)
//
// each sum with its rounding error and 2^k·plo, and the quotient, formed
// with the reciprocal of the denominator, corrected by its residual
// (quoFix32). |x| is clamped to 10 for tanh (tanh 9.02 rounds to 1) and to
// 104 for the sigmoid; the sigmoid's 2^k is taken no smaller than 2^−64, so
// that every product stays normal, and the quotient of negative x scaled by
// the rest of 2^k (exactly but for subnormal results, as exp's). ±0 and
// subnormal x give tanh x = x.
//
// log x, for positive finite x, writes x = m·2^e with m in [3/4, 3/2)
// (VGETMANTPS, VGETEXPPS; subnormal x included) and f = m − 1 (exact), so
// that log m = 2·atanh s = f − s·(f − R) for s = f/(2 + f) (|s| ≤ 1/5) and
// R = 2s²·(1/3 + s²/5 + … + s⁸/11) (truncation below 2^−32). s is
// f·(1/(2 + f)) with 2 + f in two parts, and its error slo comes from the
// residual f − s·(2 + f): uncorrected, it would cost 0.3 ulp. e·ln 2 is
// e·ln2Hi, exact with 16 bits of ln 2, plus e·ln2Lo; e·ln2Hi + f is summed
// exactly in two parts (Fast2Sum) and the small terms e·ln2Lo, −slo·f and
// −s·(f − R) added to the low part before the one rounding of the sum, so
// that nothing cancels near x = 1 or below x = 3/4 (log x ≈ −0.29). log 0 =
// −Inf, log x = NaN for x < 0, log +Inf = +Inf.
//
// Products that meet a sum are converted to float32 explicitly, which
// keeps the compiler from fusing them into an FMA where the kernel rounds
// twice.
//
// Every function returns NaN arguments as they are and is within 1 ulp of
// the exact float32 result (TestVmath32Accuracy measures it on dense
// sweeps, TestVmath32Exhaustive on every float32 when asked).

const (
	exp32Min     = -104 // e^−104 < 2^−150 rounds to 0
	exp32Max     = 89   // e^89 rounds to +Inf
	tanh32Max    = 10   // tanh 9.02 rounds to 1
	sigmoid32Max = 104  // e^−104 rounds to 0
	sigmoid32K1  = -64  // the least power of two the sigmoid multiplies by
)

// The constants of the float32 functions, read by the vector kernels too
// (vmath32_amd64.s); TestVmath32Constants checks them against their
// definitions.
var (
	exp32Log2e  = math.Float32frombits(0x3fb8aa3b) // 1/ln 2
	exp32Ln2Hi  = math.Float32frombits(0x3f317218) // ln 2 rounded
	exp32Ln2Lo  = math.Float32frombits(0xb102e308) // ln 2 − exp32Ln2Hi
	log32Ln2Hi  = math.Float32frombits(0x3f317200) // ln 2 to 16 bits
	log32Ln2Lo  = math.Float32frombits(0x35bfbe8e) // ln 2 − log32Ln2Hi
	float32NaN  = math.Float32frombits(0x7fc00000) // the NaN of log x, x < 0
	float32Inf  = float32(math.Inf(1))
	float32Sign = uint32(1) << 31
	// exp32C[i] = 1/(8−i)!, i < 7: Q(r) = 1/2 + r/6 + … + r⁶/8!.
	exp32C = [...]float32{
		math.Float32frombits(0x37d00d01), math.Float32frombits(0x39500d01),
		math.Float32frombits(0x3ab60b61), math.Float32frombits(0x3c088889),
		math.Float32frombits(0x3d2aaaab), math.Float32frombits(0x3e2aaaab), 0.5,
	}
	// log32C[i] = 1/(11−2i), i < 5.
	log32C = [...]float32{
		math.Float32frombits(0x3dba2e8c), math.Float32frombits(0x3de38e39),
		math.Float32frombits(0x3e124925), math.Float32frombits(0x3e4ccccd),
		math.Float32frombits(0x3eaaaaab),
	}
)

// fma32 returns a·b + c rounded once to float32, as the vector FMA does,
// for finite a, b, c and a finite result. a·b is exact in float64 and the
// sum s rounded to float64; rounding s to float32 rounds a·b + c, but
// where s is a tie of float32 (or subnormal in float32, where the ties lie
// elsewhere): there fma32Tie rounds the sum to odd first.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	if bits := math.Float64bits(s); bits&(1<<29-1) == 1<<28 || bits&^(1<<63) < 0x3810000000000000 { // |s| < 2^−126
		return fma32Tie(p, float64(c), s)
	}
	return float32(s)
}

// fma32Tie returns p + c rounded to float32 from s = p + c rounded to
// float64: s rounded to odd (to its neighbour with an odd last bit where
// s is inexact), which a second rounding to float32's 24 bits cannot
// spoil. Rare, it is kept out of line so that fma32 inlines.
//
//go:noinline
func fma32Tie(p, c, s float64) float32 {
	t := s - p
	e := (p - (s - t)) + (c - t) // p + c − s exactly (TwoSum)
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// scale32 returns v·2^k rounded once to float32, as VSCALEFPS does, for
// integer k in [−150, 128].
func scale32(v, k float32) float32 {
	return float32(float64(v) * math.Ldexp(1, int(k)))
}

// abs32 returns |x|.
func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ float32Sign)
}

// expReduce32 returns k, r and w with e^y = 2^k·(1 + r + w) for y in
// [−104, 89] (see the comment above).
func expReduce32(y float32) (k, r, w float32) {
	k = float32(math.RoundToEven(float64(y * exp32Log2e)))
	r1 := fma32(-k, exp32Ln2Hi, y)
	r = fma32(-k, exp32Ln2Lo, r1)
	rlo := fma32(-k, exp32Ln2Lo, r1-r)
	q := exp32C[0]
	for _, c := range exp32C[1:] {
		q = fma32(r, q, c)
	}
	return k, r, fma32(r*r, q, rlo)
}

// fastTwoSum32 returns a + b rounded and its rounding error, for |a| ≥ |b|
// or a = 0.
func fastTwoSum32(a, b float32) (s, e float32) {
	s = a + b
	return s, (a - s) + b
}

// onePlus32 returns 1 + s + b rounded and its rounding error, for |s| ≤ 1
// and |b| ≤ |1 + s| or 1 + s = 0.
func onePlus32(s, b float32) (float32, float32) {
	t, tlo := fastTwoSum32(1, s)
	u, ulo := fastTwoSum32(t, b)
	return u, ulo + tlo
}

// quoFix32 returns (n + nlo)/(d + dlo), nlo and dlo below an ulp of n and
// d: the quotient q = n·(1/d) corrected by the residual n − q·d and the low
// parts, with one rounding at the end.
func quoFix32(n, nlo, d, dlo float32) float32 {
	inv := 1 / d
	q := n * inv
	rho := fma32(-q, d, n) + nlo
	rho = fma32(-q, dlo, rho)
	return fma32(rho, inv, q)
}

// expOne32 returns e^x by the vector kernel's algorithm.
func expOne32(x float32) float32 {
	if x != x {
		return x
	}
	k, r, w := expReduce32(min(max(x, exp32Min), exp32Max))
	t, tlo := fastTwoSum32(1, r)
	return scale32(t+(tlo+w), k)
}

// logOne32 returns ln x by the vector kernel's algorithm.
func logOne32(x float32) float32 {
	switch {
	case x != x || x == float32Inf:
		return x
	case x < 0:
		return float32NaN
	case x == 0:
		return -float32Inf
	}
	frac, exp := math.Frexp(float64(x))
	m, e := float32(2*frac), float32(exp-1) // x = m·2^e, m in [1, 2)
	if m >= 1.5 {
		m, e = m/2, e+1
	}
	f := m - 1
	d, dlo := fastTwoSum32(1, m) // 2 + f in two parts
	inv := 1 / d
	s := f * inv
	slo := fma32(-s, dlo, fma32(-s, d, f)) * inv // s + slo = f/(2 + f)
	z := s * s
	q := log32C[0]
	for _, c := range log32C[1:] {
		q = fma32(z, q, c)
	}
	r := float32((z + z) * q)
	h, hlo := fastTwoSum32(float32(e*log32Ln2Hi), f) // e·ln2Hi exact
	u := fma32(e, log32Ln2Lo, hlo)
	u = fma32(-slo, f, u)
	return h + fma32(-s, f-r, u)
}

// tanhOne32 returns tanh x by the vector kernel's algorithm.
func tanhOne32(x float32) float32 {
	if x != x {
		return x
	}
	k, r, w := expReduce32(-2 * min(abs32(x), tanh32Max))
	p, plo := fastTwoSum32(r, w)
	s := scale32(1, k)
	b, blo := float32(s*p), float32(s*plo) // exact: s is a power of two ≥ 2^−29
	n, nlo := onePlus32(-s, -b)
	d, dlo := onePlus32(s, b)
	t := abs32(quoFix32(n, nlo-blo, d, dlo+blo))
	return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&float32Sign)
}

// sigmoidOne32 returns 1/(1 + e^−x) by the vector kernel's algorithm.
func sigmoidOne32(x float32) float32 {
	if x != x {
		return x
	}
	k, r, w := expReduce32(-min(abs32(x), sigmoid32Max))
	p, plo := fastTwoSum32(r, w)
	k1 := max(k, sigmoid32K1)
	s := scale32(1, k1)
	b, blo := float32(s*p), float32(s*plo) // exact
	d, dlo := onePlus32(s, b)
	dlo += blo
	if x >= 0 {
		return quoFix32(1, 0, d, dlo)
	}
	n, nlo := fastTwoSum32(s, b)
	return scale32(quoFix32(n, nlo+blo, d, dlo), k-k1)
}

// vmathLoop32 sets dst[i] = one(x[i]): the portable loop of the float32
// functions, and the tail of their vector kernels.
func vmathLoop32(dst, x []float32, one func(float32) float32) {
	for i, v := range x {
		dst[i] = one(v)
	}
}
