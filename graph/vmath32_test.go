package graph

import (
	"flag"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"sync"
	"testing"
)

var vmath32All = flag.Bool("vmath32.all", false, "TestVmath32Exhaustive: check the float32 functions on every float32 (minutes)")

// vmath32Funcs are the float32 functions with their portable twins and
// their references: float64 math, whose error (below 2 ulp of float64,
// 2^−51 relative; the sigmoid's three roundings add 2^−52) is below 2^−26
// ulp of float32, so that the errors ulp32Err measures are exact to 2^−26
// ulp.
var vmath32Funcs = []struct {
	name string
	into func(dst, x []float32)
	one  func(float32) float32
	ref  func(float64) float64
}{
	{"exp", expInto32, expOne32, math.Exp},
	{"log", logInto32, logOne32, math.Log},
	{"tanh", tanhInto32, tanhOne32, math.Tanh},
	{"sigmoid", sigmoidInto32, sigmoidOne32, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
}

// ulp32Err returns |got − exact| in units of the last place of exact in
// float32 (subnormal units below the normal range), with the infinities
// and larger numbers taken as ±2^128, where float32 would continue; 0
// when both are NaN, +Inf when one is.
func ulp32Err(got float32, exact float64) float64 {
	if g := float64(got); math.IsNaN(g) || math.IsNaN(exact) {
		if math.IsNaN(g) && math.IsNaN(exact) {
			return 0
		}
		return math.Inf(1)
	}
	clamp := func(v float64) float64 { return max(min(v, 0x1p128), -0x1p128) }
	g, e := clamp(float64(got)), clamp(exact)
	ulp := 0x1p-149
	if e != 0 {
		ulp = math.Ldexp(1, max(math.Ilogb(e), -126)-23)
	}
	return math.Abs(g-e) / ulp
}

// vmath32Edges are the special arguments and the boundaries of the
// functions' ranges; vmath32Args adds their neighbours.
var vmath32Edges = []float32{
	0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, 0x1p-127, 0x1p-126, 0x1p-30, 1e-3,
	0.75, 1, 1.5, 2, 0.34657359, 0.69314718, 8.3177661, 9, 9.0109133, 10,
	17.328680, 20, 87.336545, 88.722839, 89, 103.27893, 103.97208, 104, 200,
	math.MaxFloat32, float32Inf, float32NaN, math.Float32frombits(0x7f800001), // a signalling NaN
}

// vmath32Args returns the arguments of the accuracy tests: every 1021st
// float32 bit pattern (all signs and binades, subnormal numbers, NaNs), a
// uniform grid of 2^21 + 1 points on [−10, 10], every 64th float32 in
// [1/2, 2] (log near 1 and its reduction's boundary at 3/4) and the edges
// with their neighbours, of both signs.
func vmath32Args() []float32 {
	var x []float32
	for b := uint64(0); b < 1<<32; b += 1021 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	for i := 0; i <= 1<<21; i++ {
		x = append(x, float32(-10+20*float64(i)/(1<<21)))
	}
	for b := math.Float32bits(0.5); b < math.Float32bits(2); b += 64 {
		x = append(x, math.Float32frombits(b))
	}
	for _, v := range vmath32Edges {
		for _, w := range []float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, float32Inf)} {
			x = append(x, w, -w)
		}
	}
	return x
}

// checkVmath32 checks into on x against the twin one (the same bits) and
// the reference (within 1 ulp), and returns the worst error and its
// argument.
func checkVmath32(t *testing.T, name string, into func(dst, x []float32), one func(float32) float32, ref func(float64) float64, x []float32) (worst float64, at float32) {
	t.Helper()
	got := make([]float32, len(x))
	into(got, x)
	bad := 0
	for i, v := range x {
		if o := one(v); math.Float32bits(o) != math.Float32bits(got[i]) {
			if bad++; bad <= 5 {
				t.Errorf("%s(%v): vector %v (%#x), portable %v (%#x): not the same bits", name, v, got[i], math.Float32bits(got[i]), o, math.Float32bits(o))
			}
		}
		if u := ulp32Err(got[i], ref(float64(v))); u > worst || u != u {
			worst, at = u, v
		}
	}
	if !(worst < 1) {
		t.Errorf("%s(%v) = %v: %.4f ulp from the exact %v, want < 1", name, at, one(at), worst, ref(float64(at)))
	}
	return worst, at
}

// TestVmath32Accuracy checks exp, log, tanh and the sigmoid in float32
// within 1 ulp (strictly below: faithful rounding) of the exact value on
// vmath32Args, the vector kernels with the bits of the portable twins, and
// tanh odd to the bit.
func TestVmath32Accuracy(t *testing.T) {
	x := vmath32Args()
	for _, f := range vmath32Funcs {
		worst, at := checkVmath32(t, f.name, f.into, f.one, f.ref, x)
		t.Logf("%s: worst error %.4f ulp at %v (%#x) over %d arguments", f.name, worst, at, math.Float32bits(at), len(x))
	}
	pos, neg := make([]float32, len(x)), make([]float32, len(x))
	tanhInto32(pos, x)
	for i, v := range x {
		x[i] = -v
	}
	tanhInto32(neg, x)
	for i, v := range x {
		if v == v && math.Float32bits(pos[i]) != math.Float32bits(-neg[i]) {
			t.Fatalf("tanh(%v) = %v but tanh(%v) = %v", -v, pos[i], v, neg[i])
		}
	}
}

// TestVmath32Constants checks the constants of the float32 functions (the
// vector kernels read the same variables) against their definitions,
// computed to 200 bits and rounded to float32: 1/ln 2, ln 2 rounded and the
// rest, ln 2 to 16 bits (so that e·log32Ln2Hi is exact for |e| < 256) and
// the rest, the Taylor coefficients 1/n! of exp and 1/(2j+1) of log. A
// change of a last digit changes too few results to fail the accuracy
// tests, but fails here.
func TestVmath32Constants(t *testing.T) {
	const prec = 200
	ln2, _, err := big.ParseFloat("0.69314718055994530941723212145817656807550013436025525412068000949339362196969", 10, prec, big.ToNearestEven)
	if err != nil {
		t.Fatal(err)
	}
	quo := func(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Quo(a, b) }
	sub := func(a *big.Float, b float32) *big.Float {
		return new(big.Float).SetPrec(prec).Sub(a, big.NewFloat(float64(b)))
	}
	one := big.NewFloat(1)
	check := func(name string, got float32, want *big.Float) {
		if w, _ := want.Float32(); got != w {
			t.Errorf("%s = %v (%#x), want %v (%#x)", name, got, math.Float32bits(got), w, math.Float32bits(w))
		}
	}
	check("exp32Log2e", exp32Log2e, quo(one, ln2))
	check("exp32Ln2Hi", exp32Ln2Hi, ln2)
	check("exp32Ln2Lo", exp32Ln2Lo, sub(ln2, exp32Ln2Hi))
	check("log32Ln2Hi", log32Ln2Hi, new(big.Float).SetPrec(16).Set(ln2))
	check("log32Ln2Lo", log32Ln2Lo, sub(ln2, log32Ln2Hi))
	for i, c := range exp32C {
		n := int64(len(exp32C) + 1 - i)
		fact := new(big.Int).MulRange(1, n)
		check(fmt.Sprintf("exp32C[%d] (1/%d!)", i, n), c, quo(one, new(big.Float).SetInt(fact)))
	}
	for i, c := range log32C {
		n := int64(2*(len(log32C)-i) + 1)
		check(fmt.Sprintf("log32C[%d] (1/%d)", i, n), c, quo(one, new(big.Float).SetInt64(n)))
	}
}

// TestVmath32Special checks the special values exactly: NaN for NaN (the
// argument itself), the infinities, overflow to +Inf and underflow to 0,
// exp's subnormal results, log of 0, of negative numbers and of subnormal
// numbers, signed zeros and saturation of tanh and the sigmoid.
func TestVmath32Special(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	sNaN := math.Float32frombits(0x7f800001)
	for _, c := range []struct {
		name string
		into func(dst, x []float32)
		x    float32
		want float32
	}{
		{"exp", expInto32, 0, 1},
		{"exp", expInto32, negZero, 1},
		{"exp", expInto32, 1, math.E},
		{"exp", expInto32, float32Inf, float32Inf},
		{"exp", expInto32, -float32Inf, 0},
		{"exp", expInto32, 88.72283, 0x1.ffff08p+127}, // below the largest float32
		{"exp", expInto32, 88.72284, float32Inf},
		{"exp", expInto32, math.MaxFloat32, float32Inf},
		{"exp", expInto32, -87.33654, 0x1.00004cp-126}, // near the least normal number
		{"exp", expInto32, -103.27893, 0x1p-149},       // e^x in [2^−149.5, 2^−149]
		{"exp", expInto32, -103.97207, 0x1p-149},       // e^x just above 2^−150
		{"exp", expInto32, -103.97209, 0},              // e^x just below 2^−150
		{"exp", expInto32, -math.MaxFloat32, 0},
		{"log", logInto32, 1, 0},
		{"log", logInto32, 2, 0x1.62e43p-1},
		{"log", logInto32, 0, -float32Inf},
		{"log", logInto32, negZero, -float32Inf},
		{"log", logInto32, -1, float32NaN},
		{"log", logInto32, -math.SmallestNonzeroFloat32, float32NaN},
		{"log", logInto32, -float32Inf, float32NaN},
		{"log", logInto32, float32Inf, float32Inf},
		{"log", logInto32, math.SmallestNonzeroFloat32, -0x1.9d1dap+6},
		{"log", logInto32, 0x1p-140, -0x1.842994p+6},
		{"log", logInto32, math.MaxFloat32, 0x1.62e43p+6},
		{"tanh", tanhInto32, 0, 0},
		{"tanh", tanhInto32, negZero, negZero},
		{"tanh", tanhInto32, math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32},
		{"tanh", tanhInto32, -0x1p-130, -0x1p-130},
		{"tanh", tanhInto32, 0x1p-13, 0x1p-13},
		{"tanh", tanhInto32, 9.0109, 0.99999994},
		{"tanh", tanhInto32, 9.0110, 1},
		{"tanh", tanhInto32, -20, -1},
		{"tanh", tanhInto32, float32Inf, 1},
		{"tanh", tanhInto32, -float32Inf, -1},
		{"sigmoid", sigmoidInto32, 0, 0.5},
		{"sigmoid", sigmoidInto32, negZero, 0.5},
		{"sigmoid", sigmoidInto32, 0x1p-140, 0.5},
		{"sigmoid", sigmoidInto32, 17.3286, 0.99999994},
		{"sigmoid", sigmoidInto32, 17.3287, 1},
		{"sigmoid", sigmoidInto32, math.MaxFloat32, 1},
		{"sigmoid", sigmoidInto32, float32Inf, 1},
		{"sigmoid", sigmoidInto32, -103.27893, 0x1p-149},
		{"sigmoid", sigmoidInto32, -103.97209, 0},
		{"sigmoid", sigmoidInto32, -float32Inf, 0},
		{"exp", expInto32, float32NaN, float32NaN},
		{"exp", expInto32, sNaN, sNaN},
		{"log", logInto32, sNaN, sNaN},
		{"tanh", tanhInto32, sNaN, sNaN},
		{"sigmoid", sigmoidInto32, -float32NaN, -float32NaN},
	} {
		// 16 copies, so that the vector kernel computes them, and one more
		// for the portable twin.
		x, got := make([]float32, 17), make([]float32, 17)
		for i := range x {
			x[i] = c.x
		}
		c.into(got, x)
		for i, g := range got {
			if math.Float32bits(g) != math.Float32bits(c.want) {
				t.Errorf("%s(%v) = %v (%#x) at %d, want %v (%#x)", c.name, c.x, g, math.Float32bits(g), i, c.want, math.Float32bits(c.want))
				break
			}
		}
	}
}

// TestVmath32Lengths checks every length from 0 to 40 at the offsets 0 to
// 3 (unaligned slices): the same bits as the portable twin at every
// position, and dst untouched beyond len(x).
func TestVmath32Lengths(t *testing.T) {
	args := vmath32Args()
	for _, f := range vmath32Funcs {
		for n := 0; n <= 40; n++ {
			for off := 0; off < 4; off++ {
				src := args[1000*n+off : 1000*n+off+n]
				buf := make([]float32, n+off+1)
				for i := range buf {
					buf[i] = -7
				}
				dst := buf[off:]
				f.into(dst, src)
				for i, v := range src {
					if o := f.one(v); math.Float32bits(o) != math.Float32bits(dst[i]) {
						t.Errorf("n = %d, offset %d: %s(%v) = %v at %d, portable %v", n, off, f.name, v, dst[i], i, o)
					}
				}
				if dst[n] != -7 {
					t.Errorf("n = %d, offset %d: %s wrote dst[%d] = %v beyond len(x)", n, off, f.name, n, dst[n])
				}
			}
		}
	}
}

// TestVmath32Exhaustive checks each float32 function on every float32 (all
// 2^32 bit patterns) within 1 ulp of the exact value and with the bits of
// its portable twin; run with -vmath32.all (minutes on two cores).
func TestVmath32Exhaustive(t *testing.T) {
	if !*vmath32All {
		t.Skip("run with -vmath32.all")
	}
	const chunk = 1 << 20
	for _, f := range vmath32Funcs {
		var mu sync.Mutex
		worst, at, diffs := 0.0, float32(0), 0
		var wg sync.WaitGroup
		next := make(chan uint64)
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				x, got := make([]float32, chunk), make([]float32, chunk)
				w, a, d := 0.0, float32(0), 0
				for start := range next {
					for i := range x {
						x[i] = math.Float32frombits(uint32(start + uint64(i)))
					}
					f.into(got, x)
					for i, v := range x {
						if u := ulp32Err(got[i], f.ref(float64(v))); u > w || u != u {
							w, a = u, v
						}
						if math.Float32bits(f.one(v)) != math.Float32bits(got[i]) {
							d++
						}
					}
				}
				mu.Lock()
				if w > worst || w != w {
					worst, at = w, a
				}
				diffs += d
				mu.Unlock()
			})
		}
		for start := uint64(0); start < 1<<32; start += chunk {
			next <- start
		}
		close(next)
		wg.Wait()
		t.Logf("%s: worst error %.4f ulp at %v (%#x) over all float32; %d differ from the portable twin", f.name, worst, at, math.Float32bits(at), diffs)
		if !(worst < 1) || diffs != 0 {
			t.Errorf("%s: worst error %.4f ulp at %v, want < 1; %d arguments differ from the portable twin, want 0", f.name, worst, at, diffs)
		}
	}
}

// BenchmarkVmath32 times the float32 functions against float64 math's,
// one element at a time and rounded to float32, on 10000 arguments in
// [−10, 10] (their magnitudes for log), in ns per element.
func BenchmarkVmath32(b *testing.B) {
	x, pos := make([]float32, 10000), make([]float32, 10000)
	for i := range x {
		x[i] = float32(20*float64(i*7919%len(x))/float64(len(x)) - 10)
		pos[i] = abs32(x[i]) + 1e-3
	}
	dst := make([]float32, len(x))
	for _, c := range []struct {
		name string
		into func(dst, x []float32)
		x    []float32
	}{
		{"exp/kernel", expInto32, x},
		{"exp/math.Exp", func(dst, x []float32) {
			for i, v := range x {
				dst[i] = float32(math.Exp(float64(v)))
			}
		}, x},
		{"log/kernel", logInto32, pos},
		{"log/math.Log", func(dst, x []float32) {
			for i, v := range x {
				dst[i] = float32(math.Log(float64(v)))
			}
		}, pos},
		{"tanh/kernel", tanhInto32, x},
		{"tanh/math.Tanh", func(dst, x []float32) {
			for i, v := range x {
				dst[i] = float32(math.Tanh(float64(v)))
			}
		}, x},
		{"sigmoid/kernel", sigmoidInto32, x},
		{"sigmoid/math.Exp", func(dst, x []float32) {
			for i, v := range x {
				dst[i] = float32(1 / (1 + math.Exp(-float64(v))))
			}
		}, x},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.into(dst, c.x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.x)), "ns/elem")
		})
	}
}
