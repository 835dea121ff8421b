package graph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernels checks the register-blocked product kernels (assembly where
// the processor has AVX2 and FMA) against their portable versions for
// inner lengths up to 40 and leading dimensions wider than a row.
func TestKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	for k := 0; k <= 40; k++ {
		lda := k + 3
		a, b := vec(4*lda), vec(kw*k)
		got, want := make([]float64, 4*kw+5), make([]float64, 4*kw+5)
		kern4x12(a, lda, b, k, got, kw+1) // ldc wider than a block
		kern4x12Go(a, lda, b, k, want, kw+1)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-14*(math.Abs(want[i])+1) {
				t.Errorf("k = %d: kern4x12[%d] = %v, want %v", k, i, got[i], want[i])
			}
		}
		at := vec(k*7 + 4)
		c := vec(4 * kw)
		cw := append([]float64{}, c...)
		kernT4x12(at, 7, b, k, c)
		kernT4x12Go(at, 7, b, k, cw)
		for i := range c {
			if math.Abs(c[i]-cw[i]) > 1e-14*(math.Abs(cw[i])+1) {
				t.Errorf("k = %d: kernT4x12[%d] = %v, want %v", k, i, c[i], cw[i])
			}
		}
	}
}

// TestKernelsAVX512 checks the AVX-512 kernels against their portable
// versions where the processor has AVX-512.
func TestKernelsAVX512(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(4, 4))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	close := func(what string, k int, got, want []float64) {
		t.Helper()
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-13*(math.Abs(want[i])+1) {
				t.Errorf("%s, k = %d: [%d] = %v, want %v", what, k, i, got[i], want[i])
				return
			}
		}
	}
	for k := 0; k <= 48; k++ {
		for _, f32 := range []bool{false, true} {
			// arr returns v as the kernels' operand, rounded to float32 with
			// f32, and v as the portable kernels then see it.
			arr := func(v []float64) (array, []float64) {
				if !f32 {
					return array{f64: v}, v
				}
				r := narrowed(v)
				for i, x := range r {
					v[i] = float64(x)
				}
				return array{f32: r}, v
			}
			what := map[bool]string{false: "float64", true: "float32"}[f32]
			{
				lda, ldb := k+5, k+3
				a, a64 := arr(vec(4 * lda))
				bt := vec(5 * ldb)
				got, want := make([]float64, 3*7+5), make([]float64, 3*7+5)
				kernDot4x5(a, lda, bt, ldb, k, got, 7)
				kernDot4x5Go(a64, lda, bt, ldb, k, want, 7)
				close("kernDot4x5 "+what, k, got, want)
			}
			for cols := 1; cols <= 16; cols++ {
				a, a64 := arr(vec(k*19 + 16))
				b := vec(10 * k)
				c := vec(9*17 + 16)
				want := append([]float64{}, c...)
				kernT16x10(cols, a, 19, b, k, c, 17)
				kernTGo(10, cols, a64, 19, b, k, want, 17)
				close("kernT16x10 "+what, k, c, want)
			}
			lda := 40
			a, a64 := arr(vec(k*lda + 32))
			b := vec(5 * k)
			c := vec(4*35 + 32)
			want := append([]float64{}, c...)
			kernT32x5(a, lda, b, k, c, 35)
			kernTGo(5, 32, a64, lda, b, k, want, 35)
			close("kernT32x5 "+what, k, c, want)
			for cols := 1; cols <= 8; cols++ {
				c8 := vec(4*9 + 8)
				want8 := append([]float64{}, c8...)
				kernTx5(cols, a, lda, b, k, c8, 9)
				kernTGo(5, cols, a64, lda, b, k, want8, 9)
				close("kernTx5 "+what, k, c8, want8)
			}
		}
	}
}

// TestMatmul checks the narrow product kernels against a plain triple loop
// for every transpose combination, narrow and wide outputs, with sizes
// large enough to run in parallel, with and without the AVX-512 kernels.
func TestMatmul(t *testing.T) { withoutAVX512Too(func() { testMatmul(t) }) }

func testMatmul(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, c := range []struct{ m, k, n int }{{1, 1, 1}, {3, 5, 2}, {7, 13, 9}, {4, 1, 32}, {37, 50, 12}, {200, 20, 5}, {1000, 300, 10}, {1002, 784, 10}, {9, 700, 25}, {600, 40, 33}, {5, 3000, 31}, {301, 32, 290}, {40, 500, 70}, {70, 500, 40}, {1003, 200, 7}, {64, 100, 18}, {45, 90, 26}, {33, 77, 15}} {
		eachTranspose(c.m, c.k, c.n, func(xs, ys []int, tx, ty bool) {
			tr := [2]bool{tx, ty}
			x, y := make([]float64, c.m*c.k), make([]float64, c.k*c.n)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			for i := range y {
				y[i] = rng.NormFloat64()
			}
			at := func(v []float64, s []int, tr bool, i, j int) float64 {
				if tr {
					i, j = j, i
				}
				return v[i*s[1]+j]
			}
			out := make([]float64, c.m*c.n)
			matmulInto(out, x, y, xs, ys, tr[0], tr[1])
			for i := 0; i < c.m; i++ {
				for j := 0; j < c.n; j++ {
					want, scale := 0.0, 0.0
					for p := 0; p < c.k; p++ {
						v := at(x, xs, tr[0], i, p) * at(y, ys, tr[1], p, j)
						want += v
						scale += math.Abs(v)
					}
					if got := out[i*c.n+j]; math.Abs(got-want) > 1e-13*(scale+1) {
						t.Fatalf("%v transposes %v: out[%d,%d] = %v, want %v", c, tr, i, j, got, want)
					}
				}
			}
		})
	}
}

// ulps returns the distance between a and b in units in the last place
// (0 for equal values, including equal infinities and two NaNs).
func ulps(a, b float64) float64 {
	switch {
	case a == b || math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0):
		return math.Inf(1)
	}
	return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
}

// TestExpInto checks the vector exponential against its scalar version
// expOne (the same bits) and against math.Exp (itself within 1 ulp of exp):
// within 2 ulp, and within 1 ulp for all but 1 in 1000, on a
// million random arguments across the whole range and on the edges of
// the fast range, and the same value as math.Exp outside it (overflow,
// underflow, subnormal results, infinities, NaN), for every length up to
// 13 with misaligned starts.
func TestExpInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	x := make([]float64, 1<<20)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = 1400*rng.Float64() - 700
		case 1:
			x[i] = 40*rng.Float64() - 20
		case 2:
			x[i] = 1e-3 * rng.NormFloat64()
		default:
			x[i] = float64(rng.IntN(2001)-1000) * math.Ln2 / 2 // halfway points of the reduction
		}
	}
	special := []float64{0, math.Copysign(0, -1), 700, -700, math.Nextafter(700, 800), 709.78, 709.79, 710, -708, -740, -745.2, -746,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e-300, -1e-300, math.SmallestNonzeroFloat64, 1, -1, 0.5 * math.Ln2, -0.5 * math.Ln2}
	x = append(x, special...)
	for _, avx512 := range []bool{false, true} {
		if avx512 && !useAVX512 {
			continue
		}
		testExpWith(t, x, special, avx512)
	}
}

func testExpWith(t *testing.T, x, special []float64, avx512 bool) {
	got := make([]float64, len(x))
	expIntoWith(got, x, avx512)
	worst, over1 := 0.0, 0
	for i, v := range x {
		if e := expOne(v); math.Float64bits(e) != math.Float64bits(got[i]) && !math.IsNaN(e) {
			t.Fatalf("exp(%v): vector %v, expOne %v: not the same bits", v, got[i], e)
		}
		u := ulps(got[i], math.Exp(v))
		if math.Abs(v) > 700 || math.IsNaN(v) {
			if u != 0 {
				t.Errorf("exp(%v) = %v outside the fast range, want math.Exp's %v", v, got[i], math.Exp(v))
			}
			continue
		}
		worst = max(worst, u)
		if u > 1 {
			over1++
		}
		if u > 2 {
			t.Errorf("exp(%v) = %v, math.Exp %v: %.2f ulp", v, got[i], math.Exp(v), u)
		}
	}
	if over1 > len(x)/1000 {
		t.Errorf("%d of %d values more than 1 ulp from math.Exp", over1, len(x))
	}
	t.Logf("AVX-512 %v: worst difference from math.Exp: %.2f ulp; %d of %d values more than 1 ulp away", avx512, worst, over1, len(x))
	for n := 0; n <= 13; n++ {
		src := append([]float64{0}, special[:n]...)[1:]
		dst := make([]float64, n+1)[1:]
		expIntoWith(dst, src, avx512)
		for i, v := range src {
			if ulps(dst[i], math.Exp(v)) > 2 {
				t.Errorf("n = %d: exp(%v) = %v, want %v", n, v, dst[i], math.Exp(v))
			}
		}
	}
}

func BenchmarkExpInto(b *testing.B) {
	x := make([]float64, 10000)
	for i := range x {
		x[i] = float64(i%200) / 10
	}
	dst := make([]float64, len(x))
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			expInto(dst, x)
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				dst[i] = math.Exp(v)
			}
		}
	})
}

// TestLogInto checks the vector logarithm against its scalar version logOne
// (the same bits) and against math.Log: within 1 ulp on
// a million arguments from the
// smallest normal number to the largest, near 1, and at powers of two, and
// the same value as math.Log for zero, negative numbers, subnormal
// numbers, infinities and NaN, for every length up to 17.
func TestLogInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	x := make([]float64, 1<<20)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = math.Exp((2*rng.Float64() - 1) * 708)
		case 1:
			x[i] = 1 + 1e-3*rng.NormFloat64()
		case 2:
			x[i] = 0.5 + 1.5*rng.Float64()
		default:
			x[i] = math.Ldexp(1, rng.IntN(2044)-1022) * (1 + float64(rng.IntN(3))/4)
		}
	}
	special := []float64{1, 0.75, 1.5, math.Nextafter(1.5, 0), 2, 0.5, math.MaxFloat64, 0x1p-1022, 0, math.Copysign(0, -1), -1, 0x1p-1070,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e-310, 3, 10}
	x = append(x, special...)
	got := make([]float64, len(x))
	logInto(got, x)
	worst := 0.0
	for i, v := range x {
		if l := logOne(v); math.Float64bits(l) != math.Float64bits(got[i]) && !math.IsNaN(l) {
			t.Fatalf("log(%v): vector %v, logOne %v: not the same bits", v, got[i], l)
		}
		u := ulps(got[i], math.Log(v))
		if !(v >= 0x1p-1022 && v <= math.MaxFloat64) {
			if u != 0 {
				t.Errorf("log(%v) = %v outside the fast range, want math.Log's %v", v, got[i], math.Log(v))
			}
			continue
		}
		worst = max(worst, u)
		if u > 1 {
			t.Errorf("log(%v) = %v, math.Log %v: %.2f ulp", v, got[i], math.Log(v), u)
		}
	}
	t.Logf("worst difference from math.Log: %.2f ulp", worst)
	for n := 0; n <= len(special); n++ {
		src := append([]float64{0}, special[:n]...)[1:]
		dst := make([]float64, n+1)[1:]
		logInto(dst, src)
		for i, v := range src {
			if ulps(dst[i], math.Log(v)) > 1 {
				t.Errorf("n = %d: log(%v) = %v, want %v", n, v, dst[i], math.Log(v))
			}
		}
	}
}

// TestPoolArgmaxFast checks the branch-free 2×2 path against the general
// one on planes with ties, infinities and NaNs: the same first largest
// element of every window.
func TestPoolArgmaxFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	vals := []float64{0, 1, -1, 2, math.Inf(1), math.Inf(-1), math.NaN()}
	const h, w = 6, 8
	plane := make([]float64, h*w)
	for trial := 0; trial < 2000; trial++ {
		for i := range plane {
			plane[i] = vals[rng.IntN(len(vals))]
		}
		for or := 0; or < h/2; or++ {
			for oc := 0; oc < w/2; oc++ {
				got := poolArgmax(plane, h, w, or, oc, pool2x2, true)
				want := poolArgmax(plane, h, w, or, oc, pool2x2, false)
				if got != want {
					t.Fatalf("window (%d, %d) of %v: fast path picks %d, general %d", or, oc, plane, got, want)
				}
			}
		}
	}
}
