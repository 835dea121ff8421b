package graph

import (
	"math/bits"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// Matrix products. Bilevel models multiply tall data matrices by narrow
// parameter matrices — n×d samples by d×c weights, and back — which general
// GEMM kernels block badly for. Products with a narrow output (at most
// narrow columns) therefore use kernels of their own: the right-hand factor
// is packed in blocks of kw columns, and a register-blocked kernel
// multiplies four rows (or, transposed, four columns) of the data by a
// block, holding the 4×kw result in registers; the work is split across
// cores by rows. Everything else goes to the general product of gemm.go
// (or to OpenBLAS with the openblas build tag).

// narrow is the widest output handled by the kernels below; with AVX-512,
// inner dimensions longer than shortK take the dot-product kernels.
const (
	narrow = 32
	shortK = 64
)

// parallelWork is the number of multiply-adds above which a product is
// split across cores.
const parallelWork = 1 << 21

// scratch holds temporary buffers by size class (capacity 2^c), so that
// buffers of different sizes do not evict each other and a steady run
// allocates nothing; scratch32 holds float32 buffers.
var scratch, scratch32 [64]sync.Pool

// getScratch returns a buffer of length n from the pool; putScratch
// returns it.
func getScratch(n int) *[]float64 { return getBuf[float64](n) }

func putScratch(p *[]float64) { putBuf(p) }

// getBuf returns a buffer of n elements from the pool of its type; putBuf
// returns it.
func getBuf[T float](n int) *[]T {
	c := bits.Len(uint(max(n, 1) - 1))
	p, _ := pools[T]()[c].Get().(*[]T)
	if p == nil {
		b := make([]T, 1<<c)
		p = &b
	}
	*p = (*p)[:n]
	return p
}

func putBuf[T float](p *[]T) {
	pools[T]()[bits.Len(uint(cap(*p)-1))].Put(p)
}

// pools returns the pools of buffers of T.
func pools[T float]() *[64]sync.Pool {
	if _, ok := any(T(0)).(float64); ok {
		return &scratch
	}
	return &scratch32
}

// productShape returns the sizes of op(x)·op(y) for x of shape xs and y
// of shape ys — op(x) is m×k, op(y) k×n — and the strides of
// B = op(y): B[p][j] = y[p·sp + j·sj] (y is k×n, or n×k when transposed).
func productShape(xs, ys []int, tx, ty bool) (m, k, n, sp, sj int) {
	m, k = xs[0], xs[1]
	if tx {
		m, k = k, m
	}
	n, sp, sj = ys[1], ys[1], 1
	if ty {
		n, sp, sj = ys[0], 1, k
	}
	return m, k, n, sp, sj
}

// wide reports whether matmulInto sends a product of m×k by k×n to gemm:
// when neither side of the result is narrow. (BenchmarkRoutes: the narrow
// kernels are faster up to 32 columns or rows, gemm beyond, short inner
// dimensions included.)
func wide(m, n int) bool {
	return m > narrow && n > narrow
}

// emptyProduct reports whether a product of m×k by k×n has nothing to
// compute, after setting out to zero where k is 0: the first case of
// every product's dispatch (matmulInto, matmulMixed, matmul32).
func emptyProduct[T float](out []T, m, n, k int) bool {
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 {
		clear(out)
		return true
	}
	return false
}

// matmulInto computes out = op(x)·op(y) for row-major x (xs) and y (ys).
func matmulInto(out, x, y []float64, xs, ys []int, tx, ty bool) {
	m, k, n, sp, sj := productShape(xs, ys, tx, ty)
	switch {
	case emptyProduct(out, m, n, k):
		return
	case useAVX512 && n <= narrow && k > shortK && !tx:
		mulNarrowDot(out, array{f64: x}, m, k, n, y, sp, sj)
		return
	case n <= narrow && !tx:
		mulNarrow(out, x, m, k, n, y, sp, sj)
		return
	case useAVX512 && n <= narrow && m >= 32:
		mulNarrowT5(out, array{f64: x}, m, k, n, y, sp, sj)
		return
	case n <= narrow:
		mulNarrowT(out, x, m, k, n, y, sp, sj)
		return
	case m <= narrow:
		// A narrow result transposed: outᵀ = op(y)ᵀ·op(x)ᵀ.
		t := getScratch(n * m)
		matmulInto(*t, y, x, ys, xs, !ty, !tx)
		transposeInto(out, *t, []int{n, m}, []int{1, 0})
		putScratch(t)
		return
	}
	if openBLAS {
		blasProduct(out, x, y, xs, ys, m, n, tx, ty)
		return
	}
	gemm(gemmKernelF64(), out, n, m, n, k, sideA(x, m, k, tx), sideB(y, k, n, ty), false)
}

// gemmMixed is gemm for matmulMixed's operands (one or both in float32),
// with float64 arithmetic.
func gemmMixed(out, x []float64, x32 []float32, y []float64, y32 []float32, m, k, n int, tx, ty bool) {
	kd := gemmKernelF64()
	switch {
	case x32 != nil && y32 != nil:
		gemm(kd, out, n, m, n, k, sideA(x32, m, k, tx), sideB(y32, k, n, ty), false)
	case x32 != nil:
		gemm(kd, out, n, m, n, k, sideA(x32, m, k, tx), sideB(y, k, n, ty), false)
	default:
		gemm(kd, out, n, m, n, k, sideA(x, m, k, tx), sideB(y32, k, n, ty), false)
	}
}

// openBLAS is set by the openblas build (openblas.go): wide products then
// go to gonum's blas64, which that build switches to OpenBLAS, instead of
// gemm.
var openBLAS = false

// blasProduct computes out (m×n) = op(x)·op(y) with blas64.Gemm.
func blasProduct(out, x, y []float64, xs, ys []int, m, n int, tx, ty bool) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if tx {
		ta = blas.Trans
	}
	if ty {
		tb = blas.Trans
	}
	a := blas64.General{Rows: xs[0], Cols: xs[1], Stride: xs[1], Data: x}
	b := blas64.General{Rows: ys[0], Cols: ys[1], Stride: ys[1], Data: y}
	c := blas64.General{Rows: m, Cols: n, Stride: n, Data: out}
	blas64.Gemm(ta, tb, 1, a, b, 0, c)
}

// split runs f on [lo, hi) ranges covering [0, rows), in parallel when the
// work is large enough.
func split(rows, work int, f func(lo, hi int)) {
	parts := runtime.GOMAXPROCS(0)
	if work < parallelWork || !spareCores(parts) || rows < 2*parts {
		f(0, rows)
		return
	}
	runParts(parts, func(q int) { f(rows*q/parts, rows*(q+1)/parts) })
}

// packB writes columns j0, …, j0+width−1 of B (k×n, B[p][j] =
// b[p·sp+j·sj]) to dst (k×width, row-major), zero beyond column n.
func packB(dst, b []float64, k, n, sp, sj, j0, width int) {
	w := min(width, n-j0)
	for p := 0; p < k; p++ {
		row := dst[p*width : (p+1)*width]
		if sj == 1 {
			for j, v := range b[p*sp+j0 : p*sp+j0+w] {
				row[j] = v
			}
		} else {
			for j := 0; j < w; j++ {
				row[j] = b[p*sp+(j0+j)*sj]
			}
		}
		clear(row[w:])
	}
}

// mulNarrow computes out (m×n) = a·B for a (m×k, row-major) and B (k×n,
// B[p][j] = b[p·sp+j·sj]), with n at most narrow: B is packed block after
// block, and each group of four rows of a is multiplied by every block
// while it is in cache.
func mulNarrow(out, a []float64, m, k, n int, b []float64, sp, sj int) {
	nb := (n + kw - 1) / kw
	bp := getScratch(nb * k * kw)
	defer putScratch(bp)
	for q := 0; q < nb; q++ {
		packB((*bp)[q*k*kw:(q+1)*k*kw], b, k, n, sp, sj, q*kw, kw)
	}
	blocks := m / 4
	split(blocks, blocks*4*k*nb*kw, func(lo, hi int) {
		var c [4 * kw]float64
		for i := 4 * lo; i < 4*hi; i += 4 {
			for q := 0; q < nb; q++ {
				j0, w := q*kw, min(kw, n-q*kw)
				if w == kw { // a whole block: straight into out
					kern4x12(a[i*k:], k, (*bp)[q*k*kw:], k, out[i*n+j0:], n)
					continue
				}
				kern4x12(a[i*k:], k, (*bp)[q*k*kw:], k, c[:], kw)
				for r := 0; r < 4; r++ {
					for j, v := range c[r*kw : r*kw+w] {
						out[(i+r)*n+j0+j] = v
					}
				}
			}
		}
	})
	for i := 4 * blocks; i < m; i++ { // the last m mod 4 rows
		for q := 0; q < nb; q++ {
			j0, w := q*kw, min(kw, n-q*kw)
			oi, bq := out[i*n+j0:i*n+j0+w], (*bp)[q*k*kw:(q+1)*k*kw]
			clear(oi)
			for p, v := range a[i*k : (i+1)*k] {
				for j := range oi {
					oi[j] += v * bq[p*kw+j]
				}
			}
		}
	}
}

// sumParts splits the k rows of a transposed product into parts (one when
// work, the multiply-adds, is small), runs run on each range with a zeroed
// accumulator of size elements, adds the accumulators and returns the
// buffer whose first size elements hold the sum; the caller puts it back
// with putScratch. The parts depend only on the sizes and GOMAXPROCS, not
// on whether cores are spare now (then they run on the cores, else one
// after the other here), so that the sum's bits do not depend on what else
// runs: package meta's tasks give the same bits in parallel goroutines and
// one at a time in a dist worker.
func sumParts(k, work, size int, run func(lo, hi int, acc []float64)) *[]float64 {
	parts := runtime.GOMAXPROCS(0)
	if work < parallelWork || k < 2*parts {
		parts = 1
	}
	acc := getScratch(parts * size)
	clear(*acc)
	part := func(q int) { run(k*q/parts, k*(q+1)/parts, (*acc)[q*size:(q+1)*size]) }
	if parts == 1 {
		part(0)
		return acc
	}
	if spareCores(parts) {
		runParts(parts, part)
	} else {
		for q := range parts {
			part(q)
		}
	}
	for q := 1; q < parts; q++ {
		floats.Add((*acc)[:size], (*acc)[q*size:(q+1)*size])
	}
	return acc
}

// maxChunk bounds rowChunk, so that a chunk's packed rows of B fit in a
// buffer on the stack (24 KiB).
const maxChunk = 256

// rowChunk is the number of rows of the data that mulNarrowT multiplies
// at a time for each block of four columns, so that they stay in cache:
// about 384 KiB of them.
func rowChunk(m int) int {
	return min(maxChunk, max(8, 49152/max(m, 1)))
}

// mulNarrowT computes out (m×n) = aᵀ·B for a (k×m, row-major) and B (k×n,
// B[p][j] = b[p·sp+j·sj]), n at most narrow. The rows are split between
// the cores and taken a chunk at a time; each chunk of B is packed, block
// after block, and multiplied with every group of four columns of a while
// the chunk of a is in cache. Each core accumulates its part, then the
// parts are added.
func mulNarrowT(out, a []float64, m, k, n int, b []float64, sp, sj int) {
	nb := (n + kw - 1) / kw
	size := nb * m * kw // block jb holds columns jb·kw, … of the m rows of out
	chunk := rowChunk(m)
	m4 := m &^ 3
	acc := sumParts(k, k*m*n, size, func(lo, hi int, part []float64) {
		var pk [maxChunk * kw]float64
		for p0 := lo; p0 < hi; p0 += chunk {
			pc := min(chunk, hi-p0)
			for jb := 0; jb < nb; jb++ {
				packB(pk[:pc*kw], b[p0*sp:], pc, n, sp, sj, jb*kw, kw)
				pj := part[jb*m*kw : (jb+1)*m*kw]
				for i := 0; i < m4; i += 4 {
					kernT4x12(a[p0*m+i:], m, pk[:], pc, pj[i*kw:])
				}
				for i := m4; i < m; i++ { // the last m mod 4 columns
					ci := pj[i*kw : (i+1)*kw]
					for p := 0; p < pc; p++ {
						v := a[(p0+p)*m+i]
						for j, w := range pk[p*kw : (p+1)*kw] {
							ci[j] += v * w
						}
					}
				}
			}
		}
	})
	defer putScratch(acc)
	for jb := 0; jb < nb; jb++ {
		j0, w := jb*kw, min(kw, n-jb*kw)
		pj := (*acc)[jb*m*kw : (jb+1)*m*kw]
		for i := 0; i < m; i++ {
			copy(out[i*n+j0:i*n+j0+w], pj[i*kw:i*kw+w])
		}
	}
}

// The AVX-512 variants. With 32 registers of eight lanes, a narrow
// product is computed with every lane used: a·B as dot products of four
// rows of a with five columns of B, eight terms at a time (mulNarrowDot),
// and aᵀ·B with sixteen columns of a, transposed, against ten columns of B
// (and thirty-two against five for a last group of at most five;
// mulNarrowT5): there, the rows of a stream from memory once for ten
// columns — the common case — so that memory stays busy.

// narrowGroups returns the number of groups of ten columns a narrow
// product of n columns takes and the number rem ≤ 5 of columns left for a
// group of five (a last group of six to nine columns is a group of ten
// with zero columns).
func narrowGroups(n int) (tens, rem int) {
	tens, rem = n/10, n%10
	if rem > 5 {
		return tens + 1, 0
	}
	return tens, rem
}

// mulNarrowDot computes out (m×n) = a·B for a (m×k, row-major, in float64
// or float32) and B (k×n, B[p][j] = b[p·sp+j·sj]), n at most narrow.
func mulNarrowDot(out []float64, a array, m, k, n int, b []float64, sp, sj int) {
	n5 := (n + 4) / 5 * 5
	bt := getScratch(n5 * k) // Bᵀ, zero rows beyond n
	defer putScratch(bt)
	for j := 0; j < n5; j++ {
		row := (*bt)[j*k : (j+1)*k]
		switch {
		case j >= n:
			clear(row)
		case sp == 1:
			copy(row, b[j*sj:j*sj+k])
		default:
			for p := range row {
				row[p] = b[p*sp+j*sj]
			}
		}
	}
	dot := func(i, j int) float64 {
		s := 0.0
		for p, v := range (*bt)[j*k : (j+1)*k] {
			s += a.at(i*k+p) * v
		}
		return s
	}
	blocks := m / 4
	split(blocks, blocks*4*k*n5, func(lo, hi int) {
		var c [4 * 5]float64
		for i := 4 * lo; i < 4*hi; i += 4 {
			for g := 0; g < n; g += 5 {
				if g+5 <= n { // a whole group: straight into out
					kernDot4x5(a.from(i*k), k, (*bt)[g*k:], k, k, out[i*n+g:], n)
					continue
				}
				kernDot4x5(a.from(i*k), k, (*bt)[g*k:], k, k, c[:], 5)
				for r := 0; r < 4; r++ {
					for j := g; j < min(g+5, n); j++ {
						out[(i+r)*n+j] = c[r*5+j-g]
					}
				}
			}
		}
	})
	for i := 4 * blocks; i < m; i++ { // the last m mod 4 rows
		for j := 0; j < n; j++ {
			out[i*n+j] = dot(i, j)
		}
	}
}

// mulNarrowT5 computes out (m×n) = aᵀ·B for a (k×m, row-major, in float64
// or float32) with m ≥ 32 and B (k×n, B[p][j] = b[p·sp+j·sj]), n at most
// narrow, as mulNarrowT does but with the result transposed: each core
// accumulates outᵀ, ten rows (or five) at a time.
func mulNarrowT5(out []float64, a array, m, k, n int, b []float64, sp, sj int) {
	tens, rem := narrowGroups(n)
	g5 := 10 * tens
	rows := g5 + 5*min(rem, 1) // of outᵀ, with zero rows past n
	chunk := rowChunk(m)
	m32 := m &^ 31
	acc := sumParts(k, k*m*rows, rows*m, func(lo, hi int, part []float64) {
		var pk [maxChunk * 10]float64
		for p0 := lo; p0 < hi; p0 += chunk {
			pc := min(chunk, hi-p0)
			for q := 0; q < tens; q++ {
				packB(pk[:pc*10], b[p0*sp:], pc, n, sp, sj, 10*q, 10)
				ct := part[10*q*m:]
				for i := 0; i < m; i += 16 {
					kernT16x10(min(16, m-i), a.from(p0*m+i), m, pk[:], pc, ct[i:], m)
				}
			}
			if rem == 0 {
				continue
			}
			packB(pk[:pc*5], b[p0*sp:], pc, n, sp, sj, g5, 5)
			ct := part[g5*m:]
			for i := 0; i < m32; i += 32 {
				kernT32x5(a.from(p0*m+i), m, pk[:], pc, ct[i:], m)
			}
			for i := m32; i < m; i += 8 {
				kernTx5(min(8, m-i), a.from(p0*m+i), m, pk[:], pc, ct[i:], m)
			}
		}
	})
	defer putScratch(acc)
	for j := 0; j < n; j++ {
		for i, v := range (*acc)[j*m : (j+1)*m] {
			out[i*n+j] = v
		}
	}
}
