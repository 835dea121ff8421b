package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPatchRowKernels checks im2col and col2im on padded planes (the
// kernels of patchRow where the processor has AVX-512) against the
// portable loops (useAVX512 off), bit for bit in both precisions, for
// kernels of 1 to 9 columns (9 is past a float64 vector: the portable
// loop), strides 1 and 2, paddings 0 to 2 and odd image sizes, with a
// guard element after col and the image.
func TestPatchRowKernels(t *testing.T) {
	t.Logf("AVX-512: %v", useAVX512)
	cases := []struct {
		nb, ch, h, w int
		p            convParams
	}{
		{2, 3, 7, 9, convParams{kh: 3, kw: 3, padH: 1, padW: 1, sH: 1, sW: 1, dH: 1, dW: 1}},
		{1, 1, 28, 28, convParams{kh: 3, kw: 3, padH: 1, padW: 1, sH: 1, sW: 1, dH: 1, dW: 1}},
		{3, 5, 6, 6, convParams{kh: 2, kw: 2, sH: 2, sW: 2, dH: 1, dW: 1}},
		{1, 2, 9, 11, convParams{kh: 5, kw: 5, padH: 2, padW: 2, sH: 2, sW: 1, dH: 1, dW: 1}},
		{2, 4, 5, 5, convParams{kh: 1, kw: 1, sH: 1, sW: 1, dH: 1, dW: 1}},
		{1, 2, 12, 13, convParams{kh: 2, kw: 9, padH: 0, padW: 1, sH: 1, sW: 3, dH: 1, dW: 1}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%dx%dx%d/k%dx%d", c.nb, c.ch, c.h, c.w, c.p.kh, c.p.kw)
		t.Run("f64/"+name, func(t *testing.T) { checkPatchRows[float64](t, c.nb, c.ch, c.h, c.w, c.p) })
		t.Run("f32/"+name, func(t *testing.T) { checkPatchRows[float32](t, c.nb, c.ch, c.h, c.w, c.p) })
	}
}

func checkPatchRows[T float](t *testing.T, nb, ch, h, w int, p convParams) {
	rng := rand.New(rand.NewPCG(uint64(h*w), uint64(ch)))
	shape := []int{nb, ch, h, w}
	oh, ow := p.outHW(h, w)
	ncol, nim := nb*oh*ow*ch*p.kh*p.kw, nb*ch*h*w
	values := func(n int) []T {
		x := make([]T, n)
		for i := range x {
			x[i] = T(rng.NormFloat64())
			if rng.IntN(8) == 0 {
				x[i] = T(math.Copysign(0, -1))
			}
		}
		return x
	}
	im, g := values(nim), values(ncol)
	run := func(avx bool) (col, back []T) {
		saved := useAVX512
		useAVX512 = avx && saved
		defer func() { useAVX512 = saved }()
		col, back = make([]T, ncol+1), make([]T, nim+1)
		col[ncol], back[nim] = 7, 7
		im2colInto(col[:ncol], im, shape, p)
		col2imInto(back[:nim], g, shape, p)
		return col, back
	}
	col, back := run(true)
	wantCol, wantBack := run(false)
	requireBits(t, "im2col", col, wantCol)
	requireBits(t, "col2im", back, wantBack)
}
