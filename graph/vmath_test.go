package graph

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refPrec is the precision of the references: 256 bits, of which tanh's
// (e^2x − 1) loses at most 80 to cancellation for |x| ≥ 2^−80.
const refPrec = 256

// refExp returns e^x to refPrec bits: the Taylor series at x/2^m,
// |x/2^m| < 2^−10, squared m times.
func refExp(x float64) *big.Float {
	_, e := math.Frexp(x)
	m := max(0, e+10)
	r := new(big.Float).SetPrec(refPrec).SetMantExp(big.NewFloat(x).SetPrec(refPrec), -m)
	sum := new(big.Float).SetPrec(refPrec).SetInt64(1)
	term := new(big.Float).SetPrec(refPrec).SetInt64(1)
	for i := int64(1); i <= 30; i++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetInt64(i))
		sum.Add(sum, term)
	}
	for range m {
		sum.Mul(sum, sum)
	}
	return sum
}

// refTanh returns tanh(x) = (e^2x − 1)/(e^2x + 1) to about refPrec − 80 bits.
func refTanh(x float64) *big.Float {
	e := refExp(2 * x)
	one := big.NewFloat(1)
	num := new(big.Float).SetPrec(refPrec).Sub(e, one)
	return num.Quo(num, new(big.Float).SetPrec(refPrec).Add(e, one))
}

// refSigmoid returns 1/(1 + e^−x).
func refSigmoid(x float64) *big.Float {
	d := new(big.Float).SetPrec(refPrec).Add(refExp(-x), big.NewFloat(1))
	return d.Quo(big.NewFloat(1).SetPrec(refPrec), d)
}

// ulpErr returns |got − exact| in units of the last place of exact in
// float64 (subnormal units below the normal range).
func ulpErr(got float64, exact *big.Float) float64 {
	e := exact.MantExp(nil) // exact = m·2^e, m in [0.5, 1)
	d := new(big.Float).SetPrec(refPrec).Sub(big.NewFloat(got), exact)
	d.SetMantExp(d, -max(e-53, -1074))
	f, _ := d.Float64()
	return math.Abs(f)
}

// vmathArgs returns the arguments of the accuracy tests: a dense grid
// over [−lim, lim], values log-uniform in magnitude from 2^−40 to lim of
// both signs, and the boundaries of the reduction (odd multiples of
// ln 2/4 and ln 2/2 for tanh's 2x) with their neighbours.
func vmathArgs(lim float64) []float64 {
	rng := rand.New(rand.NewPCG(16, 4))
	var x []float64
	for v := -lim; v <= lim; v += 1.0 / 256 {
		x = append(x, v)
	}
	for range 20000 {
		v := math.Exp(-40*math.Ln2 + rng.Float64()*(math.Log(lim)+40*math.Ln2))
		if rng.IntN(2) == 0 {
			v = -v
		}
		x = append(x, v)
	}
	for j := 1; float64(j)*math.Ln2/4 <= lim; j += 2 {
		for _, h := range []float64{float64(j) * math.Ln2 / 4, float64(j) * math.Ln2 / 2} {
			x = append(x, h, -h, math.Nextafter(h, 0), math.Nextafter(h, lim))
		}
	}
	return x
}

// vmathSpecial are the special arguments: signed zeros, subnormal and
// tiny numbers, the saturation thresholds, the largest numbers, the
// infinities and NaN.
var vmathSpecial = []float64{0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	1e-310, -1e-310, 0x1p-1022, 0x1p-30, -0x1p-30, 19, 19.1, 22, -22, 23, 44, -44.1, 700, 710, -745, -746, -747, 1e300,
	math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN()}

// checkVmath checks into against one (the same bits, for every length up
// to 17 and at every offset) and against the reference within maxUlp on
// args, and returns the worst error.
func checkVmath(t *testing.T, name string, into func(dst, x []float64), one func(float64) float64, ref func(float64) *big.Float, args []float64, maxUlp float64) {
	t.Helper()
	got := make([]float64, len(args))
	into(got, args)
	worst, at := 0.0, 0.0
	for i, v := range args {
		if o := one(v); math.Float64bits(o) != math.Float64bits(got[i]) {
			t.Fatalf("%s(%v): vector %v, scalar %v: not the same bits", name, v, got[i], o)
		}
		if u := ulpErr(got[i], ref(v)); u > worst {
			worst, at = u, v
		}
	}
	if worst > maxUlp {
		t.Errorf("%s(%v) = %v: %.3f ulp from the exact value, want ≤ %v", name, at, one(at), worst, maxUlp)
	}
	t.Logf("%s: worst error %.3f ulp at %v over %d arguments", name, worst, at, len(args))
	for n := 0; n <= 17; n++ {
		for off := 0; off+n <= len(vmathSpecial); off += 5 {
			src := append([]float64(nil), vmathSpecial[off:off+n]...)
			dst := make([]float64, n)
			into(dst, src)
			for i, v := range src {
				if o := one(v); math.Float64bits(o) != math.Float64bits(dst[i]) {
					t.Errorf("n = %d: %s(%v) = %v, scalar %v", n, name, v, dst[i], o)
				}
			}
		}
	}
}

// TestTanhInto checks tanh within 1 ulp of the exact value over
// [−23, 23], at magnitudes down to 2^−40 and at the reduction's
// boundaries, the vector kernel with the bits of tanhOne, and the special
// values exactly as math.Tanh gives them: ±0 with their sign, x itself for
// subnormal and tiny x, ±1 from 19 on and for ±Inf, NaN for NaN.
func TestTanhInto(t *testing.T) {
	checkVmath(t, "tanh", tanhInto, tanhOne, refTanh, vmathArgs(23), 1)
	got := make([]float64, len(vmathSpecial))
	tanhInto(got, vmathSpecial)
	for i, v := range vmathSpecial {
		if want := math.Tanh(v); math.Float64bits(got[i]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(got[i])) {
			t.Errorf("tanh(%v) = %v, want math.Tanh's %v", v, got[i], want)
		}
	}
}

// TestSigmoidInto checks the sigmoid within 1 ulp of the exact value over
// [−40, 40] and at magnitudes down to 2^−40, far in the tail where
// e^−|x| is subnormal, with the bits of sigmoidOne, and its limits: 1/2
// at ±0, 1 for large x and +Inf, 0 at −Inf, NaN for NaN.
func TestSigmoidInto(t *testing.T) {
	args := vmathArgs(40)
	for v := -745.0; v < -700; v += 0.37 {
		args = append(args, v)
	}
	checkVmath(t, "sigmoid", sigmoidInto, sigmoidOne, refSigmoid, args, 1)
	for _, c := range []struct{ x, want float64 }{
		{0, 0.5}, {math.Copysign(0, -1), 0.5}, {40, 1}, {math.MaxFloat64, 1}, {math.Inf(1), 1},
		{-746, 0}, {-math.MaxFloat64, 0}, {math.Inf(-1), 0}, {-745, math.SmallestNonzeroFloat64},
	} {
		if got := sigmoidOne(c.x); got != c.want {
			t.Errorf("sigmoid(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := sigmoidOne(math.NaN()); !math.IsNaN(got) {
		t.Errorf("sigmoid(NaN) = %v, want NaN", got)
	}
}

// TestTanhMathAgrees compares tanh with math.Tanh on a dense sweep of a
// million arguments over [−20, 20]: math.Tanh is itself not correctly
// rounded, so the bound is 2 ulp, one for each.
func TestTanhMathAgrees(t *testing.T) {
	x := make([]float64, 1<<20)
	for i := range x {
		x[i] = 40*float64(i)/float64(len(x)) - 20
	}
	got := make([]float64, len(x))
	tanhInto(got, x)
	worst := 0.0
	for i, v := range x {
		worst = max(worst, ulps(got[i], math.Tanh(v)))
	}
	t.Logf("worst difference from math.Tanh: %.2f ulp", worst)
	if worst > 2 {
		t.Errorf("tanh differs from math.Tanh by %.2f ulp, want ≤ 2", worst)
	}
}

// BenchmarkVmath times the vector kernels against math's functions, one
// element at a time, on 10000 arguments in [−10, 10], in ns per element.
func BenchmarkVmath(b *testing.B) {
	x := make([]float64, 10000)
	for i := range x {
		x[i] = 20*float64(i*7919%len(x))/float64(len(x)) - 10
	}
	dst := make([]float64, len(x))
	for _, c := range []struct {
		name string
		into func(dst, x []float64)
	}{
		{"tanh/kernel", tanhInto},
		{"tanh/math.Tanh", func(dst, x []float64) {
			for i, v := range x {
				dst[i] = math.Tanh(v)
			}
		}},
		{"sigmoid/kernel", sigmoidInto},
		{"sigmoid/math.Exp", func(dst, x []float64) {
			for i, v := range x {
				dst[i] = 1 / (1 + math.Exp(-v))
			}
		}},
		{"exp/kernel", expInto},
		{"exp/math.Exp", func(dst, x []float64) {
			for i, v := range x {
				dst[i] = math.Exp(v)
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.into(dst, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/elem")
		})
	}
}
