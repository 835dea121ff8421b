package graph

import "math"

// Portable versions of the register-blocked product kernels; the assembly
// versions (kernels_amd64.s) compute the same sums with FMA.

// kw is the number of columns of a packed block of the right-hand factor.
const kw = 12

// kern4x12Go sets c[i·ldc+j] = Σ_p a[i·lda+p]·b[kw·p+j] for i < 4,
// j < kw, p < k.
func kern4x12Go(a []float64, lda int, b []float64, k int, c []float64, ldc int) {
	for i := 0; i < 4; i++ {
		ai, ci := a[i*lda:i*lda+k], c[i*ldc:i*ldc+kw]
		clear(ci)
		for p, v := range ai {
			for j, w := range b[p*kw : (p+1)*kw] {
				ci[j] += v * w
			}
		}
	}
}

// kernT4x12Go adds Σ_p a[p·lda+i]·b[kw·p+j] to c[kw·i+j] for i < 4,
// j < kw, p < k.
func kernT4x12Go(a []float64, lda int, b []float64, k int, c []float64) {
	for p := 0; p < k; p++ {
		bp := b[p*kw : (p+1)*kw]
		for i, v := range a[p*lda : p*lda+4] {
			ci := c[i*kw : (i+1)*kw]
			for j, w := range bp {
				ci[j] += v * w
			}
		}
	}
}

// kernDot4x5Go sets c[i·ldc+j] = Σ_p a[i·lda+p]·bt[j·ldb+p] for i < 4,
// j < 5, p < k.
func kernDot4x5Go[E float32 | float64](a []E, lda int, bt []float64, ldb, k int, c []float64, ldc int) {
	for i := 0; i < 4; i++ {
		ai := a[i*lda : i*lda+k]
		for j := 0; j < 5; j++ {
			s := 0.0
			for p, v := range bt[j*ldb : j*ldb+k] {
				s += float64(ai[p]) * v
			}
			c[i*ldc+j] = s
		}
	}
}

// kernTGo adds Σ_p a[p·lda+i]·b[w·p+j] to c[j·ldc+i] for i < cols, j < w,
// p < k: the portable kernTx5 (w = 5) and kernT16x10 (w = 10).
func kernTGo[E float32 | float64](w, cols int, a []E, lda int, b []float64, k int, c []float64, ldc int) {
	for p := 0; p < k; p++ {
		ap := a[p*lda : p*lda+cols]
		for j, v := range b[w*p : w*p+w] {
			cj := c[j*ldc : j*ldc+cols]
			for i, x := range ap {
				cj[i] += float64(x) * v
			}
		}
	}
}

// The constants of the vector exponential and logarithm (kernels_amd64.s).
var (
	expLog2e = math.Float64frombits(0x3ff71547652b82fe)
	expLn2Hi = math.Float64frombits(0x3fe62e42fee00000)
	expLn2Lo = math.Float64frombits(0x3dea39ef35793c76)
	// expC[i] = 1/(13−i)!, i < 12.
	expC = [...]float64{
		math.Float64frombits(0x3de6124613a86d09), math.Float64frombits(0x3e21eed8eff8d898),
		math.Float64frombits(0x3e5ae64567f544e4), math.Float64frombits(0x3e927e4fb7789f5c),
		math.Float64frombits(0x3ec71de3a556c734), math.Float64frombits(0x3efa01a01a01a01a),
		math.Float64frombits(0x3f2a01a01a01a01a), math.Float64frombits(0x3f56c16c16c16c17),
		math.Float64frombits(0x3f81111111111111), math.Float64frombits(0x3fa5555555555555),
		math.Float64frombits(0x3fc5555555555555), 0.5,
	}
	// logC[i] = 1/(25−2i), i < 12.
	logC = [...]float64{
		math.Float64frombits(0x3fa47ae147ae147b), math.Float64frombits(0x3fa642c8590b2164),
		math.Float64frombits(0x3fa8618618618618), math.Float64frombits(0x3faaf286bca1af28),
		math.Float64frombits(0x3fae1e1e1e1e1e1e), math.Float64frombits(0x3fb1111111111111),
		math.Float64frombits(0x3fb3b13b13b13b14), math.Float64frombits(0x3fb745d1745d1746),
		math.Float64frombits(0x3fbc71c71c71c71c), math.Float64frombits(0x3fc2492492492492),
		math.Float64frombits(0x3fc999999999999a), math.Float64frombits(0x3fd5555555555555),
	}
)

// expOne returns exp(x) for |x| ≤ 700 by the vector kernels' algorithm,
// operation for operation, so that an element's value does not depend on
// whether a vector kernel or this function computed it; math.Exp outside.
func expOne(x float64) float64 {
	if !(math.Abs(x) <= 700) {
		return math.Exp(x)
	}
	k := math.RoundToEven(x * expLog2e)
	r := math.FMA(-k, expLn2Hi, x)
	r = math.FMA(-k, expLn2Lo, r)
	p := expC[0]
	for _, c := range expC[1:] {
		p = math.FMA(r, p, c)
	}
	p = math.FMA(r, p, 1)
	p = math.FMA(r, p, 1)
	return math.Float64frombits(math.Float64bits(p) + uint64(int64(k))<<52)
}

// logOne returns log(x) for positive normal finite x by the vector kernel's
// algorithm, operation for operation (see expOne); math.Log otherwise.
func logOne(x float64) float64 {
	if !(x >= 0x1p-1022 && x <= math.MaxFloat64) {
		return math.Log(x)
	}
	frac, exp := math.Frexp(x)
	m, e := 2*frac, float64(exp-1) // x = m·2^e, m in [1, 2)
	if m >= 1.5 {
		m, e = m/2, e+1
	}
	f := m - 1
	s := f / (m + 1)
	z := s * s
	q := logC[0]
	for _, c := range logC[1:] {
		q = math.FMA(z, q, c)
	}
	r := (z + z) * q
	l := math.FMA(-s, f-r, f)
	l = math.FMA(e, expLn2Lo, l)
	return math.FMA(e, expLn2Hi, l)
}
