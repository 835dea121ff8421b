package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// gemmCase is a product op(A)·op(B) of m×k by k×n with the transposes
// ta, tb, its operands in float64 (values representable in float32, so
// that every precision reads the same numbers), the triple loop's result
// and the error bound of any summation order: |c − want| ≤ γ·Σ_p
// |a_ip·b_pj| with γ = k·u (u the unit roundoff of the arithmetic).
type gemmCase struct {
	name       string
	m, n, k    int
	ta, tb     bool
	x, y       []float64 // op(A) = x or xᵀ (shape xs), op(B) = y or yᵀ (ys)
	xs, ys     []int
	xf32, yf32 []float32 // x and y in float32 (the same values)
	want, abs  []float64 // Σ_p a_ip·b_pj and Σ_p |a_ip·b_pj|
	acc        []float64 // c before an accumulating product
	ldcPad     int       // c's row stride is n + ldcPad
}

func newGemmCase(rng *rand.Rand, m, n, k int, ta, tb bool) *gemmCase {
	c := &gemmCase{m: m, n: n, k: k, ta: ta, tb: tb}
	c.name = fmt.Sprintf("%d×%d×%d ta=%v tb=%v", m, k, n, ta, tb)
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(rng.NormFloat64()))
		}
		return v
	}
	c.x, c.y = vec(m*k), vec(k*n)
	c.xs, c.ys = []int{m, k}, []int{k, n}
	if ta {
		c.xs = []int{k, m}
	}
	if tb {
		c.ys = []int{n, k}
	}
	c.xf32, c.yf32 = narrowed(c.x), narrowed(c.y)
	c.ldcPad = rng.IntN(3)
	c.acc = vec(m * n)
	at := func(v []float64, s []int, t bool, i, j int) float64 {
		if t {
			i, j = j, i
		}
		return v[i*s[1]+j]
	}
	c.want, c.abs = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, a float64
			for p := 0; p < k; p++ {
				v := at(c.x, c.xs, ta, i, p) * at(c.y, c.ys, tb, p, j)
				s += v
				a += math.Abs(v)
			}
			c.want[i*n+j], c.abs[i*n+j] = s, a
		}
	}
	return c
}

// check runs the product with kernel kd in float64 or float32 arithmetic
// (f32), with operands given in float64 or float32 (src32: each side in
// float32), into c with a row stride of n plus a pad, overwriting or
// accumulating, and compares with the triple loop.
func (c *gemmCase) check(t *testing.T, what string, kd64 *gemmKernel[float64], kd32 *gemmKernel[float32], src32 [2]bool, add bool) {
	t.Helper()
	ldc := c.n + c.ldcPad
	u := 0x1p-53
	if kd32 != nil {
		u = 0x1p-24
	}
	got := make([]float64, c.m*ldc)
	for i := range got {
		got[i] = math.NaN() // every element must be written (or read: NaN stays)
	}
	for i := 0; i < c.m; i++ {
		if add {
			copy(got[i*ldc:i*ldc+c.n], c.acc[i*c.n:(i+1)*c.n])
		}
	}
	switch {
	case kd32 != nil:
		c32 := narrowed(got)
		gemm(kd32, c32, ldc, c.m, c.n, c.k, sideA(c.xf32, c.m, c.k, c.ta), sideB(c.yf32, c.k, c.n, c.tb), add)
		for i, v := range c32 {
			got[i] = float64(v)
		}
	case src32[0] && src32[1]:
		gemm(kd64, got, ldc, c.m, c.n, c.k, sideA(c.xf32, c.m, c.k, c.ta), sideB(c.yf32, c.k, c.n, c.tb), add)
	case src32[0]:
		gemm(kd64, got, ldc, c.m, c.n, c.k, sideA(c.xf32, c.m, c.k, c.ta), sideB(c.y, c.k, c.n, c.tb), add)
	case src32[1]:
		gemm(kd64, got, ldc, c.m, c.n, c.k, sideA(c.x, c.m, c.k, c.ta), sideB(c.yf32, c.k, c.n, c.tb), add)
	default:
		gemm(kd64, got, ldc, c.m, c.n, c.k, sideA(c.x, c.m, c.k, c.ta), sideB(c.y, c.k, c.n, c.tb), add)
	}
	for i := 0; i < c.m; i++ {
		for j := 0; j < ldc; j++ {
			g := got[i*ldc+j]
			if j >= c.n {
				if !math.IsNaN(g) {
					t.Fatalf("%s %s add=%v: wrote c[%d,%d] past the row", what, c.name, add, i, j)
				}
				continue
			}
			want, bound := c.want[i*c.n+j], float64(c.k+1)*u*c.abs[i*c.n+j]
			if add {
				want += c.acc[i*c.n+j]
				bound += float64(c.k+1) * u * math.Abs(c.acc[i*c.n+j])
			}
			if !(math.Abs(g-want) <= bound) {
				t.Fatalf("%s %s add=%v: c[%d,%d] = %v, want %v (bound %.2g)", what, c.name, add, i, j, g, want, bound)
			}
		}
	}
}

// shrunk returns kd with blocks small enough that products of a few dozen
// rows and columns cross every boundary of the loops.
func shrunk[T float](kd *gemmKernel[T]) *gemmKernel[T] {
	s := *kd
	s.kc, s.mc, s.nc = 7, 2*kd.mr, 2*kd.nr
	return &s
}

// TestGemm checks the general product against a triple loop for every
// kernel this processor runs (AVX-512, AVX2, portable), in float64 and
// float32 arithmetic and with float32 operands widened as they are packed,
// for every transpose combination, overwriting and accumulating: on ragged
// shapes from 1 to 70 in each dimension with the kernels' own blocking and
// with blocks shrunk so that the shapes cross every boundary of the loops,
// and on shapes past the real blocks (split across cores). The error bound
// is (k+1)·u·Σ_p |a_ip·b_pj|, which holds for any order of summation.
func TestGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	var shapes [][3]int
	for _, s := range []int{1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 47, 48, 49, 70} {
		shapes = append(shapes, [3]int{s, s, s}, [3]int{s, 70 - s + 1, rng.IntN(70) + 1}, [3]int{rng.IntN(70) + 1, s, 71 - s})
	}
	for range 40 {
		shapes = append(shapes, [3]int{rng.IntN(70) + 1, rng.IntN(70) + 1, rng.IntN(70) + 1})
	}
	var cases []*gemmCase
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			cases = append(cases, newGemmCase(rng, s[0], s[1], s[2], tr[0], tr[1]))
		}
	}
	// Past every real block (kc ≤ 512, nc ≤ 240, mc ≤ 1024) and large
	// enough to split across cores, by rows and by columns.
	var large []*gemmCase
	for _, s := range [][3]int{{1031, 250, 523}, {20, 500, 300}} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			large = append(large, newGemmCase(rng, s[0], s[1], s[2], tr[0], tr[1]))
		}
	}
	forEachISA(t, func(t *testing.T, isa string) {
		k64, k32 := gemmKernelF64(), gemmKernelF32()
		for _, c := range cases {
			add := rng.IntN(2) == 1
			c.check(t, isa+" float64", k64, nil, [2]bool{}, add)
			c.check(t, isa+" float64 shrunk", shrunk(k64), nil, [2]bool{}, !add)
			c.check(t, isa+" float32", nil, k32, [2]bool{}, add)
			c.check(t, isa+" float32 shrunk", nil, shrunk(k32), [2]bool{}, !add)
			src := [2]bool{rng.IntN(2) == 1, rng.IntN(2) == 1}
			c.check(t, isa+" float64 from float32", shrunk(k64), nil, src, add)
		}
		for _, c := range large {
			c.check(t, isa+" float64", k64, nil, [2]bool{}, false)
			c.check(t, isa+" float32", nil, k32, [2]bool{}, true)
			c.check(t, isa+" float64 from float32", k64, nil, [2]bool{true, false}, false)
		}
	})
}

// BenchmarkRoutes times the narrow kernels of matmulInto against gemm on
// shapes near the boundary between them (matmulInto's routes, wide), with
// every transpose the IR emits there: the measurements behind wide.
//
//	go test -run '^$' -bench '^BenchmarkRoutes$' ./graph/
func BenchmarkRoutes(b *testing.B) {
	benchRoutes(b, []routeShape{
		{20000, 10, 256, false}, {5000, 32, 512, false}, {2000, 64, 256, false},
		{20000, 784, 16, false}, {20000, 784, 24, false}, {20000, 784, 32, false}, {20000, 288, 32, false},
		{784, 20000, 16, true}, {784, 20000, 32, true}, {288, 20000, 32, true},
		{10, 20000, 784, true}, {32, 784, 256, false}, {16, 5000, 512, true},
	}, map[string]func(s routeShape, out, x, y []float64, xs, ys []int){
		"matmulInto": func(s routeShape, out, x, y []float64, xs, ys []int) { matmulInto(out, x, y, xs, ys, s.tx, false) },
		"gemm": func(s routeShape, out, x, y []float64, _, _ []int) {
			gemm(gemmKernelF64(), out, s.n, s.m, s.n, s.k, sideA(x, s.m, s.k, s.tx), sideB(y, s.k, s.n, false), false)
		},
	})
}

// routeShape is a product of BenchmarkRoutes: op(x) m×k, x transposed
// when tx, times y k×n.
type routeShape struct {
	m, k, n int
	tx      bool
}

// benchRoutes times each implementation of a product on each shape, in
// the precision T, as sub-benchmarks shape/implementation with their
// GFLOPS.
func benchRoutes[T float](b *testing.B, shapes []routeShape, impls map[string]func(s routeShape, out, x, y []T, xs, ys []int)) {
	names := make([]string, 0, len(impls))
	for name := range impls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, s := range shapes {
		xs, ys := []int{s.m, s.k}, []int{s.k, s.n}
		if s.tx {
			xs = []int{s.k, s.m}
		}
		x, y, out := make([]T, s.m*s.k), make([]T, s.k*s.n), make([]T, s.m*s.n)
		for i := range x {
			x[i] = T(i%7) - 3
		}
		for i := range y {
			y[i] = T(i%5) - 2
		}
		shape := fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n)
		if s.tx {
			shape += "-At"
		}
		for _, name := range names {
			b.Run(shape+"/"+name, func(b *testing.B) {
				for b.Loop() {
					impls[name](s, out, x, y, xs, ys)
				}
				b.ReportMetric(2*float64(s.m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}
