package graph

import G "gorgonia.org/gorgonia"

// Convolution: im2col lays the patches of (batch, channels, h, w) images
// out as (batch, outH, outW, channels·kh·kw), the layout of gorgonia's
// Im2Col, which its Conv2d multiplies by the filters; col2im, its adjoint,
// sums patch entries back into their image positions. Each is the other's
// adjoint, so both differentiate any number of times.

var opIm2Col, opCol2Im opKind // ints: kh, kw, padH, padW, strideH, strideW, dilH, dilW

func init() {
	opIm2Col = define(opDef{name: "im2col", arity: 1, shape: im2colShape,
		f64: im2colKernel[float64], f32: im2colKernel[float32],
		vjp: func(b *builder, n *node, _ int, g *node) *node { return b.col2im(g, n.args[0].shape, convFrom(n.ints)) },
	})
	opCol2Im = define(opDef{name: "col2im", arity: 1, shape: func(n *node) []int { return n.shape }, // the image's shape
		f64: col2imKernel[float64], f32: col2imKernel[float32],
		vjp: func(b *builder, n *node, _ int, g *node) *node { return b.im2col(g, convFrom(n.ints)) },
	})
	reject("yoloOp", "YOLOv3's loss is not differentiable twice; compute detection losses outside graph/")
	recognize("im2colOp", importRule{doc: "Im2Col, and so Conv2d and Conv1d",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			return im.b.im2col(a[0], im2colParams(n.Op()))
		},
	})
}

// convParams are the ints of opIm2Col and opCol2Im.
type convParams struct{ kh, kw, padH, padW, sH, sW, dH, dW int }

func (p convParams) ints() []int {
	return []int{p.kh, p.kw, p.padH, p.padW, p.sH, p.sW, p.dH, p.dW}
}

func convFrom(ints []int) convParams {
	return convParams{ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]}
}

// outHW is the output height and width of a convolution on an h×w image.
func (p convParams) outHW(h, w int) (int, int) {
	oh := (h+2*p.padH-(p.dH*(p.kh-1)+1))/p.sH + 1
	ow := (w+2*p.padW-(p.dW*(p.kw-1)+1))/p.sW + 1
	return oh, ow
}

// im2col lays out the patches of a (batch, channels, h, w) image as
// (batch, outH, outW, channels·kh·kw), the layout of gorgonia's Im2Col.
func im2colShape(n *node) []int {
	a, p := n.args[0], convFrom(n.ints)
	if len(a.shape) != 4 {
		shapePanic("im2col of shape %v: want (batch, channels, height, width)", a.shape)
	}
	oh, ow := p.outHW(a.shape[2], a.shape[3])
	if oh < 1 || ow < 1 {
		shapePanic("im2col: kernel %dx%d does not fit image %v", p.kh, p.kw, a.shape)
	}
	return []int{a.shape[0], oh, ow, a.shape[1] * p.kh * p.kw}
}

// im2col lays out the patches of a (batch, channels, h, w) image as
// (batch, outH, outW, channels·kh·kw), the layout of gorgonia's Im2Col.
func (b *builder) im2col(a *node, p convParams) *node {
	return b.add(&node{op: opIm2Col, args: []*node{a}, ints: p.ints()})
}

func (b *builder) col2im(g *node, image []int, p convParams) *node {
	return b.add(&node{op: opCol2Im, args: []*node{g}, shape: cloneInts(image), ints: p.ints()})
}

func im2colKernel[T float](n *node, out []T, in [][]T) {
	im2colInto(out, in[0], n.args[0].shape, convFrom(n.ints))
}

func col2imKernel[T float](n *node, out []T, in [][]T) {
	col2imInto(out, in[0], n.shape, convFrom(n.ints))
}

// im2colInto writes the patches of im (batch, channels, h, w) into col
// (batch, outH, outW, channels·kh·kw).
func im2colInto[T float](col, im []T, shape []int, p convParams) {
	nb, ch, h, w := shape[0], shape[1], shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	if p.dH == 1 && p.dW == 1 {
		im2colPadded(col, im, nb, ch, h, w, oh, ow, p)
		return
	}
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				c0 := oc*p.sW - p.padW
				for k := 0; k < ch; k++ {
					for kr := 0; kr < p.kh; kr++ {
						dst := col[c : c+p.kw]
						c += p.kw
						r := or*p.sH - p.padH + kr*p.dH
						if r < 0 || r >= h {
							clear(dst)
							continue
						}
						row := img[(k*h+r)*w : (k*h+r+1)*w]
						for kc := range dst {
							if cc := c0 + kc*p.dW; uint(cc) < uint(w) {
								dst[kc] = row[cc]
							} else {
								dst[kc] = 0
							}
						}
					}
				}
			}
		}
	}
}

// im2colPadded is im2colInto without dilation: each image is copied once
// into a zero-padded plane per channel, so that every row of every patch is
// a run of a padded row, copied without a bounds test per element.
func im2colPadded[T float](col, im []T, nb, ch, h, w, oh, ow int, p convParams) {
	ph, pw := h+2*p.padH, w+2*p.padW
	buf := getBuf[T](ch * ph * pw)
	defer putBuf(buf)
	pad := *buf
	clear(pad)
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for k := 0; k < ch; k++ {
			for r := 0; r < h; r++ {
				copy(pad[(k*ph+r+p.padH)*pw+p.padW:], img[(k*h+r)*w:(k*h+r+1)*w])
			}
		}
		for or := 0; or < oh; or++ {
			n := ow * ch * p.kh * p.kw
			patchRow(col[c:c+n], pad, or*p.sH*pw, ow, ch, ph*pw, pw, p, false)
			c += n
		}
	}
}

// patchRowGo is patchRow's portable loop: for each of the ow patches
// along an output row (the first at pad[base:]), each channel k and each
// kernel row kr, the kw elements at pad[base + oc·sW + k·plane + kr·pw:]
// are copied to the next kw of col or, with add, col's are added to them.
func patchRowGo[T float](col, pad []T, base, ow, ch, plane, pw int, p convParams, add bool) {
	c := 0
	for oc := 0; oc < ow; oc++ {
		at := base + oc*p.sW
		for k := 0; k < ch; k++ {
			pl := pad[k*plane:]
			for kr := 0; kr < p.kh; kr++ {
				img := pl[at+kr*pw : at+kr*pw+p.kw]
				cl := col[c : c+p.kw]
				c += p.kw
				switch {
				case add && len(cl) == 3 && len(img) == 3: // the common 3×3
					img[0], img[1], img[2] = img[0]+cl[0], img[1]+cl[1], img[2]+cl[2]
				case add:
					for i, v := range cl {
						img[i] += v
					}
				case len(cl) == 3: // three moves, not a call
					cl[0], cl[1], cl[2] = img[0], img[1], img[2]
				default:
					copy(cl, img)
				}
			}
		}
	}
}

// col2imInto is the adjoint of im2colInto: it sums patch entries back into
// their image positions.
func col2imInto[T float](im, col []T, shape []int, p convParams) {
	if p.dH == 1 && p.dW == 1 {
		nb, ch, h, w := shape[0], shape[1], shape[2], shape[3]
		oh, ow := p.outHW(h, w)
		col2imPadded(im, col, nb, ch, h, w, oh, ow, p)
		return
	}
	col2imBounded(im, col, shape, p)
}

// col2imBounded is col2imInto with a bounds test for every element.
func col2imBounded[T float](im, col []T, shape []int, p convParams) {
	nb, ch, h, w := shape[0], shape[1], shape[2], shape[3]
	oh, ow := p.outHW(h, w)
	clear(im)
	c := 0
	for b := 0; b < nb; b++ {
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for or := 0; or < oh; or++ {
			for oc := 0; oc < ow; oc++ {
				c0 := oc*p.sW - p.padW
				for k := 0; k < ch; k++ {
					for kr := 0; kr < p.kh; kr++ {
						src := col[c : c+p.kw]
						c += p.kw
						r := or*p.sH - p.padH + kr*p.dH
						if r < 0 || r >= h {
							continue
						}
						row := img[(k*h+r)*w : (k*h+r+1)*w]
						for kc, v := range src {
							if cc := c0 + kc*p.dW; uint(cc) < uint(w) {
								row[cc] += v
							}
						}
					}
				}
			}
		}
	}
}

// col2imPadded is col2imInto without dilation: each image's patches are
// summed into a zero-padded plane per channel, without a bounds test per
// element, and the planes' interiors copied out. Every image position
// receives the same terms in the same order as in col2imBounded.
func col2imPadded[T float](im, col []T, nb, ch, h, w, oh, ow int, p convParams) {
	ph, pw := h+2*p.padH, w+2*p.padW
	buf := getBuf[T](ch * ph * pw)
	defer putBuf(buf)
	pad := *buf
	c := 0
	for b := 0; b < nb; b++ {
		clear(pad)
		for or := 0; or < oh; or++ {
			n := ow * ch * p.kh * p.kw
			patchRow(col[c:c+n], pad, or*p.sH*pw, ow, ch, ph*pw, pw, p, true)
			c += n
		}
		img := im[b*ch*h*w : (b+1)*ch*h*w]
		for k := 0; k < ch; k++ {
			for r := 0; r < h; r++ {
				copy(img[(k*h+r)*w:(k*h+r+1)*w], pad[(k*ph+r+p.padH)*pw+p.padW:])
			}
		}
	}
}
