package graph

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
)

// Matrix products. Bilevel models multiply tall data matrices by narrow
// parameter matrices — n×d samples by d×c weights, and back — which general
// GEMM kernels block badly for. Products with a narrow output (at most
// narrow columns) therefore use kernels of their own, written as unit-stride
// dot products and axpys over rows of the data, split across cores by rows;
// everything else goes to gonum's BLAS (or OpenBLAS with the openblas build
// tag).

// narrow is the widest output handled by the kernels below.
const narrow = 32

// parallelWork is the number of multiply-adds above which a product is
// split across cores.
const parallelWork = 1 << 18

var scratch = sync.Pool{New: func() any { return new([]float64) }}

func getScratch(n int) *[]float64 {
	p := scratch.Get().(*[]float64)
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	return p
}

// matmulInto computes out = op(x)·op(y) for row-major x (xs) and y (ys).
func matmulInto(out, x, y []float64, xs, ys []int, tx, ty bool) {
	m, k := xs[0], xs[1]
	if tx {
		m, k = k, m
	}
	n := ys[1]
	if ty {
		n = ys[0]
	}
	switch {
	case m == 0 || n == 0:
		return
	case k == 0:
		clear(out)
		return
	case n <= narrow && !tx:
		if ty {
			rowsDot(out, x, y, m, k, n)
		} else {
			// x·y = rows of x dotted with the columns of y: transpose y.
			yt := getScratch(n * k)
			transposeInto(*yt, y, ys, []int{1, 0})
			rowsDot(out, x, *yt, m, k, n)
			scratch.Put(yt)
		}
		return
	case n <= narrow && tx && !ty:
		outerSum(out, x, y, k, m, n)
		return
	}
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
	if work < parallelWork || parts < 2 || rows < 2*parts {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := rows*p/parts, rows*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// rowsDot computes out (m×n) with out_ij = ⟨a_i, b_j⟩ for a (m×k) and b
// (n×k), both row-major: a·bᵀ.
func rowsDot(out, a, b []float64, m, k, n int) {
	split(m, m*k*n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ai := a[i*k : (i+1)*k]
			oi := out[i*n : (i+1)*n]
			j := 0
			for ; j+4 <= n; j += 4 {
				oi[j], oi[j+1], oi[j+2], oi[j+3] = dot4(ai, b[j*k:(j+1)*k], b[(j+1)*k:(j+2)*k], b[(j+2)*k:(j+3)*k], b[(j+3)*k:(j+4)*k])
			}
			for ; j < n; j++ {
				oi[j] = floats.Dot(ai, b[j*k:(j+1)*k])
			}
		}
	})
}

// outerSum computes out (m×n) = aᵀ·b = Σ_p a_p b_pᵀ for a (k×m) and b (k×n)
// with narrow n: each core accumulates the transpose of its rows' sum with
// unit-stride axpys, then the parts are added.
func outerSum(out, a, b []float64, k, m, n int) {
	parts := runtime.GOMAXPROCS(0)
	if k*m*n < parallelWork || parts < 2 || k < 2*parts {
		parts = 1
	}
	acc := getScratch(parts * n * m)
	clear(*acc)
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := k*p/parts, k*(p+1)/parts
		part := (*acc)[p*n*m : (p+1)*n*m]
		run := func() {
			// Four rows at a time: each pass over the accumulator adds
			// four scaled rows of a.
			r := lo
			var coef [4]float64
			for ; r+4 <= hi; r += 4 {
				a0, a1, a2, a3 := a[r*m:(r+1)*m], a[(r+1)*m:(r+2)*m], a[(r+2)*m:(r+3)*m], a[(r+3)*m:(r+4)*m]
				for j := 0; j < n; j++ {
					coef = [4]float64{b[r*n+j], b[(r+1)*n+j], b[(r+2)*n+j], b[(r+3)*n+j]}
					axpy4(part[j*m:(j+1)*m], a0, a1, a2, a3, &coef)
				}
			}
			for ; r < hi; r++ {
				ar := a[r*m : (r+1)*m]
				for j, v := range b[r*n : (r+1)*n] {
					if v != 0 {
						floats.AddScaled(part[j*m:(j+1)*m], v, ar)
					}
				}
			}
		}
		if parts == 1 {
			run()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	wg.Wait()
	for p := 1; p < parts; p++ {
		floats.Add((*acc)[:n*m], (*acc)[p*n*m:(p+1)*n*m])
	}
	transposeInto(out, (*acc)[:n*m], []int{n, m}, []int{1, 0})
	scratch.Put(acc)
}
