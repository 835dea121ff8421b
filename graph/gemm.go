package graph

import "runtime"

// A general matrix product of our own, for products wider than the narrow
// kernels of matmul.go: c = op(A)·op(B), or c += op(A)·op(B), for
// row-major operands in float64 or float32 (read as they are, converted to
// the kernel's precision when packed), by the five loops of Goto and van
// de Geijn ("Anatomy of high-performance matrix multiplication", ACM TOMS
// 34(3), 2008) around a register-blocked micro-kernel:
//
//	for i0 over the m rows of A by mc:                   (a block of A in L3)
//	  for p0 over the k terms by kc:
//	    pack A[i0:i0+mc, p0:p0+kc] into panels of mr rows
//	    for j0 over the n columns of B by nc:            (a block of B in L2)
//	      pack B[p0:p0+kc, j0:j0+nc] into panels of nr columns
//	      for each panel of A (kc×mr, kept in L1):
//	        for each panel of B (kc×nr, streamed from L2):
//	          micro-kernel: the mr×nr block of c in registers
//
// A packed panel holds, term after term, the mr elements of A (or nr of B)
// the kernel multiplies: it reads both panels sequentially, whatever the
// transposes and strides of the operands; panels are padded with zeros, and
// a block of c at a ragged edge goes through a small buffer. Row-major c
// puts the vector registers along its rows: the kernel broadcasts an
// element of A and multiplies it by vectors of a row of B. The work is
// split across the cores by rows of c (by columns when c is wide and
// short), each part packing its own panels.

// float is the element type of a product's operands and kernels.
type float interface{ float32 | float64 }

// gemmSide is one factor of a product seen as a matrix of rows×k, whose
// element (r, p) is x[r·rs + p·ps]: op(A) by its m rows, or op(B) by its n
// columns. One of the strides is 1 (the operands are row-major).
type gemmSide[S float] struct {
	x      []S
	rs, ps int
}

// sideA returns op(A) of x, m×k (x is m×k, or k×m when transposed), by its
// rows.
func sideA[S float](x []S, m, k int, t bool) gemmSide[S] {
	if t {
		return gemmSide[S]{x, 1, m}
	}
	return gemmSide[S]{x, k, 1}
}

// sideB returns op(B) of y, k×n (y is k×n, or n×k when transposed), by its
// columns.
func sideB[S float](y []S, k, n int, t bool) gemmSide[S] {
	if t {
		return gemmSide[S]{y, k, 1}
	}
	return gemmSide[S]{y, 1, n}
}

// from returns s from row r and term p on.
func (s gemmSide[S]) from(r, p int) gemmSide[S] {
	return gemmSide[S]{s.x[r*s.rs+p*s.ps:], s.rs, s.ps}
}

// pack writes rows [0, rows) and terms [0, kc) of s to dst as ⌈rows/w⌉
// panels of kc·w elements, the w rows of a panel side by side for each
// term: dst[q·kc·w + p·w + r] = s(q·w + r, p), zero past the last row.
// The source is read along its contiguous dimension.
func pack[S, T float](dst []T, s gemmSide[S], rows, kc, w int) {
	if s.rs == 1 {
		packTerms(dst, s.x, s.ps, rows, kc, w)
		return
	}
	for r0 := 0; r0 < rows; r0 += w {
		h := min(w, rows-r0)
		d := dst[r0*kc : (r0+w)*kc]
		r := 0
		for ; r+8 <= h; r += 8 { // eight rows at a time
			x := s.x[(r0+r)*s.rs:]
			p0 := packRowsFast(d[r:], x, s.rs, kc, w)
			if p0 == 0 && w == 8 {
				packRows8(d, x, s.rs, kc)
				continue
			}
			for i := 0; i < 8; i++ {
				for p, v := range x[i*s.rs+p0 : i*s.rs+kc] {
					d[(p0+p)*w+r+i] = T(v)
				}
			}
		}
		for ; r < h; r++ {
			for p, v := range s.x[(r0+r)*s.rs : (r0+r)*s.rs+kc] {
				d[p*w+r] = T(v)
			}
		}
		for r := h; r < w; r++ {
			for p := 0; p < kc; p++ {
				d[p*w+r] = 0
			}
		}
	}
}

// packTerms is pack for a side whose rows of a term are contiguous (rs =
// 1): term p is x[p·ps:]. A group of panels of about 64 rows is written at
// a time, term by term, so that both the reads and the writes stream.
func packTerms[S, T float](dst []T, x []S, ps, rows, kc, w int) {
	group := max(1, 64/w) * w
	for g := 0; g < rows; g += group {
		g0, g1 := g, min(rows, g+group)
		if packTermsFast(dst[g0*kc:], x[g0:], ps, kc, (g1-g0)/w, w) {
			g0 += (g1 - g0) / w * w // the ragged panel, if any, below
		}
		for p := 0; p < kc && g0 < g1; p++ {
			src := x[p*ps+g0 : p*ps+g1]
			for r0 := 0; r0 < len(src); r0 += w {
				sp := src[r0:min(r0+w, len(src))]
				o := (g0+r0)*kc + p*w
				dp := dst[o : o+len(sp)]
				for r, v := range sp {
					dp[r] = T(v)
				}
				clear(dst[o+len(sp) : o+w])
			}
		}
	}
}

// packRows8 writes a panel of eight rows of x (row stride rs), kc terms
// each, to d.
func packRows8[S, T float](d []T, x []S, rs, kc int) {
	r0, r1, r2, r3 := x[:kc], x[rs:rs+kc], x[2*rs:2*rs+kc], x[3*rs:3*rs+kc]
	r4, r5, r6, r7 := x[4*rs:4*rs+kc], x[5*rs:5*rs+kc], x[6*rs:6*rs+kc], x[7*rs:7*rs+kc]
	d = d[:8*kc]
	for p := range r0 {
		dp := d[8*p : 8*p+8 : 8*p+8]
		dp[0], dp[1], dp[2], dp[3] = T(r0[p]), T(r1[p]), T(r2[p]), T(r3[p])
		dp[4], dp[5], dp[6], dp[7] = T(r4[p]), T(r5[p]), T(r6[p]), T(r7[p])
	}
}

// gemmKernel is a micro-kernel with its blocking. kern sets the mr×nr block
// of c (row stride ldc) to the product of a packed panel of A (k·mr
// elements) and one of B (k·nr), or adds the product to it with add; k ≥ 1.
// A block of A is mc rows by kc terms, a block of B kc terms by nc columns
// (mc a multiple of mr, nc of nr).
type gemmKernel[T float] struct {
	mr, nr, kc, mc, nc int
	kern               func(k int, a, b, c []T, ldc int, add bool)
}

// maxTile is the largest mr·nr of the kernels: the buffer for a block of c
// at a ragged edge.
const maxTile = 8 * 48

// gemm sets c (m×n, row stride ldc) to a·b, for a m×k and b k×n, or adds
// a·b to it with add, with kernel kd, split across cores when the work is
// large enough.
func gemm[SA, SB, T float](kd *gemmKernel[T], c []T, ldc, m, n, k int, a gemmSide[SA], b gemmSide[SB], add bool) {
	switch {
	case m == 0 || n == 0:
		return
	case k == 0:
		if !add {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	rowPanels, colPanels := (m+kd.mr-1)/kd.mr, (n+kd.nr-1)/kd.nr
	parts := runtime.GOMAXPROCS(0)
	if m >= n && rowPanels >= 2*parts || colPanels < 2*parts {
		split(rowPanels, m*n*k, func(lo, hi int) {
			i0, i1 := lo*kd.mr, min(hi*kd.mr, m)
			gemmSerial(kd, c[i0*ldc:], ldc, i1-i0, n, k, a.from(i0, 0), b, add)
		})
		return
	}
	split(colPanels, m*n*k, func(lo, hi int) {
		j0, j1 := lo*kd.nr, min(hi*kd.nr, n)
		gemmSerial(kd, c[j0:], ldc, m, j1-j0, k, a, b.from(j0, 0), add)
	})
}

// gemmSerial is gemm on the calling goroutine: the five loops.
func gemmSerial[SA, SB, T float](kd *gemmKernel[T], c []T, ldc, m, n, k int, a gemmSide[SA], b gemmSide[SB], add bool) {
	mr, nr := kd.mr, kd.nr
	// Blocks of about equal size, no larger than the kernel's: a short
	// last block would cost as many passes as a full one.
	kcb := balance(k, kd.kc, 1)
	mcb, ncb := balance(m, kd.mc, mr), balance(n, kd.nc, nr)
	pa, pb := getBuf[T](mcb*kcb), getBuf[T](ncb*kcb+maxTile)
	defer putBuf(pa)
	defer putBuf(pb)
	tile := (*pb)[ncb*kcb:] // a block of c at a ragged edge
	for i0 := 0; i0 < m; i0 += mcb {
		mc := min(mcb, m-i0)
		for p0 := 0; p0 < k; p0 += kcb {
			kc := min(kcb, k-p0)
			acc := add || p0 > 0
			pack(*pa, a.from(i0, p0), mc, kc, mr)
			for j0 := 0; j0 < n; j0 += ncb {
				nc := min(ncb, n-j0)
				pack(*pb, b.from(j0, p0), nc, kc, nr)
				for ir := 0; ir < mc; ir += mr {
					ap, h := (*pa)[ir*kc:(ir+mr)*kc], min(mr, mc-ir)
					for jr := 0; jr < nc; jr += nr {
						bp, w := (*pb)[jr*kc:(jr+nr)*kc], min(nr, nc-jr)
						ci := (i0+ir)*ldc + j0 + jr
						if h == mr && w == nr {
							kd.kern(kc, ap, bp, c[ci:], ldc, acc)
							continue
						}
						kd.kern(kc, ap, bp, tile, nr, false)
						for r := 0; r < h; r++ {
							row, t := c[ci+r*ldc:ci+r*ldc+w], tile[r*nr:r*nr+w]
							if !acc {
								copy(row, t)
								continue
							}
							for j, v := range t {
								row[j] += v
							}
						}
					}
				}
			}
		}
	}
}

// balance returns the size of the blocks that split n into as few blocks
// of at most limit as possible, of about equal sizes, rounded up to a
// multiple of unit (limit is one).
func balance(n, limit, unit int) int {
	blocks := (n + limit - 1) / limit
	return min(limit, ((n+blocks-1)/blocks+unit-1)/unit*unit)
}

// The portable kernels: a 2×4 block of c in eight variables (with the
// operands, as many as amd64 has registers for: a 4×4 block spilled to
// memory and ran at half the speed).
var (
	gemmF64Go = gemmKernel[float64]{mr: 2, nr: 4, kc: 256, mc: 512, nc: 256, kern: gemm2x4Go[float64]}
	gemmF32Go = gemmKernel[float32]{mr: 2, nr: 4, kc: 256, mc: 512, nc: 256, kern: gemm2x4Go[float32]}
)

// gemm2x4Go is the portable micro-kernel, mr = 2, nr = 4.
func gemm2x4Go[T float](k int, a, b, c []T, ldc int, add bool) {
	var c00, c01, c02, c03, c10, c11, c12, c13 T
	a, b = a[:2*k], b[:4*k]
	for p := 0; p < k; p++ {
		ap, bp := a[2*p:2*p+2:2*p+2], b[4*p:4*p+4:4*p+4]
		a0, a1 := ap[0], ap[1]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00, c01, c02, c03 = c00+a0*b0, c01+a0*b1, c02+a0*b2, c03+a0*b3
		c10, c11, c12, c13 = c10+a1*b0, c11+a1*b1, c12+a1*b2, c13+a1*b3
	}
	r0, r1 := c[:4:4], c[ldc:ldc+4:ldc+4]
	if add {
		c00, c01, c02, c03 = r0[0]+c00, r0[1]+c01, r0[2]+c02, r0[3]+c03
		c10, c11, c12, c13 = r1[0]+c10, r1[1]+c11, r1[2]+c12, r1[3]+c13
	}
	r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
	r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
}
