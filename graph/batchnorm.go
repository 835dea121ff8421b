package graph

import (
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Batch normalization in training mode, as one operation: BatchNorm's
// forward pass and its adjoint each go over the data a few times, where
// the same function written with Mean, Sub, Square, Sqrt and broadcasts
// takes a dozen memory-bound passes each way. The adjoint with respect to
// the input,
//
//	∂z = γ/σ · (g − mean(g) − x̂·mean(g ⊙ x̂)),   x̂ = (z − μ)/σ,  σ = √(σ² + ε),
//
// per column, is an operation too (opBatchNormGrad); its own derivatives
// (batchNormGradVJP), needed for second-order work through the
// normalization, are written with primitives. Both graph.BatchNorm and
// gorgonia's BatchNorm (on feature maps through a transpose) translate to
// it.

var opBatchNorm, opBatchNormGrad opKind // eps: ε

func init() {
	opBatchNorm = define(opDef{name: "batchnorm", arity: 3, // of args[0] (n×c) with scale args[1] and shift args[2] (c)
		shape: func(n *node) []int {
			checkBN(n.args[0], n.args[1], n.args[2])
			return cloneInts(n.args[0].shape)
		},
		f64: bnForwardKernel[float64], f32: bnForwardKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node { return b.batchNormVJP(n, k, g) },
	})
	opBatchNormGrad = define(opDef{name: "batchnormgrad", arity: 3, // the adjoint of opBatchNorm(args[1], args[2], ·) w.r.t. its input, for the output adjoint args[0]
		shape: func(n *node) []int {
			g, z, gamma := n.args[0], n.args[1], n.args[2]
			checkBN(z, gamma, gamma)
			if !sameShape(g.shape, z.shape) {
				shapePanic("batch-norm adjoint of shape %v for an input of shape %v", g.shape, z.shape)
			}
			return cloneInts(z.shape)
		},
		f64: bnBackwardKernel[float64], f32: bnBackwardKernel[float32],
		vjp: func(b *builder, n *node, k int, g *node) *node { return b.batchNormGradVJP(n, k, g) },
	})
	recognize("batchNormOp", importRule{doc: "graph.BatchNorm",
		translate: func(im *importer, n *G.Node, a []*node) *node {
			return im.b.batchNorm(a[0], a[1], a[2], n.Op().(batchNormOp).eps)
		},
	})
	recognize("BatchNormOp", importRule{doc: "BatchNorm on (batch, features) and (batch, channels, height, width), training and evaluation modes",
		translate: translateGorgoniaBatchNorm, remake: remakeGorgoniaBatchNorm})
	reject("GroupNormOp", "graph/ has no rule for group normalization; write it with Reshape, Mean, Sub, Square and Sqrt, or use graph.BatchNorm")
}

// translateGorgoniaBatchNorm translates gorgonia's BatchNormOp, the
// normalization inside gorgonia's BatchNorm (which then scales and shifts
// with broadcasts of its own): per channel (axis 1), over the batch and
// the spatial axes, x̂ = (x − μ)/√(σ² + ε) with the batch's mean and biased
// variance in training mode, or the op's running statistics (as they are
// when the oracles are compiled) in evaluation (Problem.SetTraining).
func translateGorgoniaBatchNorm(im *importer, n *G.Node, a []*node) *node {
	b, x, op := im.b, a[0], n.Op()
	eps, _ := batchNormParams(op)
	if len(x.shape) != 2 && len(x.shape) != 4 {
		shapePanic("batch normalization of shape %v: want (batch, features) or (batch, channels, height, width)", x.shape)
	}
	c := x.shape[1]
	if !im.training {
		mean, variance := op.(*G.BatchNormOp).Stats()
		mu, ok1 := mean.Data().([]float64)
		v, ok2 := variance.Data().([]float64)
		if !ok1 || !ok2 || len(mu) != c || len(v) != c {
			importPanic("batch normalization's running statistics are not %d float64 values", c)
		}
		inv := make([]float64, c)
		for j := range inv {
			inv[j] = 1 / math.Sqrt(v[j]+eps)
		}
		chans := make([]int, len(x.shape))
		for i := range chans {
			chans[i] = 1
		}
		chans[1] = c
		per := func(vals []float64) *node { return b.broadcast(b.constant(chans, vals), x.shape) }
		return b.mul(b.binary(opSub, x, per(append([]float64{}, mu...))), per(inv))
	}
	ones, zeros := b.filled([]int{c}, 1), b.filled([]int{c}, 0)
	if len(x.shape) == 2 {
		return b.batchNorm(x, ones, zeros, eps)
	}
	nb, h, w := x.shape[0], x.shape[2], x.shape[3]
	rows := b.reshape(b.transpose(x, []int{0, 2, 3, 1}), []int{nb * h * w, c})
	z := b.batchNorm(rows, ones, zeros, eps)
	return b.transpose(b.reshape(z, []int{nb, h, w, c}), []int{0, 3, 1, 2})
}

// remakeGorgoniaBatchNorm makes a BatchNormOp of its own, with a copy of
// the running statistics, for the translation check's copy of the graph,
// so that gorgonia's forward pass does not touch the user's operation
// (gorgonia's machines reset the running statistics of the operations
// they train).
func remakeGorgoniaBatchNorm(c *checkGraph, n *G.Node, args, cargs []*G.Node) (*G.Node, error) {
	op := n.Op().(*G.BatchNormOp)
	eps, momentum := batchNormParams(op)
	_, _, _, fresh, err := G.BatchNorm(cargs[0], nil, nil, momentum, eps)
	if err != nil {
		return nil, err
	}
	mean, variance := op.Stats()
	if err := fresh.SetStats(mean.Clone().(tensor.Tensor), variance.Clone().(tensor.Tensor)); err != nil {
		return nil, err
	}
	return G.ApplyOp(fresh, cargs[0])
}

// batchNorm returns opBatchNorm(z, γ, β) for z of shape (n, c) and γ, β of
// shape (c).
func (b *builder) batchNorm(z, gamma, beta *node, eps float64) *node {
	return b.add(&node{op: opBatchNorm, args: []*node{z, gamma, beta}, eps: eps})
}

// batchNormGrad returns the adjoint of opBatchNorm(z, γ, ·) with respect
// to z, for the adjoint g of its output.
func (b *builder) batchNormGrad(g, z, gamma *node, eps float64) *node {
	return b.add(&node{op: opBatchNormGrad, args: []*node{g, z, gamma}, eps: eps})
}

func checkBN(z, gamma, beta *node) {
	if len(z.shape) != 2 || !sameShape(gamma.shape, z.shape[1:]) || !sameShape(beta.shape, z.shape[1:]) {
		shapePanic("batch normalization of shape %v with scale %v and shift %v: want (samples, features) and (features)", z.shape, gamma.shape, beta.shape)
	}
}

// bnNormalized returns x̂ = (z − μ)/σ and the row 1/σ, written with
// primitives.
func (b *builder) bnNormalized(z *node, eps float64) (xhat, inv *node) {
	n, row := z.shape[0], []int{1, z.shape[1]}
	mean := func(a *node) *node { return b.reshape(b.scale(b.reduce(opSum, a, 0), 1/float64(n)), row) }
	c := b.binary(opSub, z, b.broadcast(mean(z), z.shape))
	v := mean(b.unary(opSquare, c))
	inv = b.unary(opInvSqrt, b.binary(opAdd, v, b.scalar(eps)))
	return b.mul(c, b.broadcast(inv, z.shape)), inv
}

// batchNormVJP returns the adjoint of argument k of n = opBatchNorm(z, γ,
// β) for the adjoint g of n: opBatchNormGrad(g, z, γ) for z, Σ_rows g ⊙ x̂
// for γ (x̂ = opBatchNorm(z, 1, 0)), Σ_rows g for β.
func (b *builder) batchNormVJP(n *node, k int, g *node) *node {
	z, c := n.args[0], n.args[0].shape[1]
	switch k {
	case 0:
		return b.batchNormGrad(g, z, n.args[1], n.eps)
	case 1:
		xhat := b.batchNorm(z, b.filled([]int{c}, 1), b.filled([]int{c}, 0), n.eps)
		return b.reduce(opSum, b.mul(g, xhat), 0)
	}
	return b.reduce(opSum, g, 0)
}

// batchNormGradVJP returns the adjoint of argument k of n =
// opBatchNormGrad(g, z, γ) for the adjoint w of n. Per column, with
// F = γ/σ·(g − ḡ − x̂·A/n), A = Σ g ⊙ x̂, B = Σ w ⊙ x̂, S = Σ w ⊙ (g − ḡ):
//
//	∂⟨w, F⟩/∂g = γ/σ·(w − w̄ − x̂·B/n) = opBatchNormGrad(w, z, γ) (the map g ↦ F is symmetric),
//	∂⟨w, F⟩/∂z = −γ/(n σ²)·(B (g − ḡ) + A (w − w̄) + x̂ (S − 3AB/n)),
//	∂⟨w, F⟩/∂γ = Σ_rows w ⊙ opBatchNormGrad(g, z, 1),
//
// the second from ∂x̂_i/∂z_j = (δ_ij − 1/n − x̂_i x̂_j/n)/σ and
// ∂(1/σ)/∂z_j = −x̂_j/(n σ²).
func (b *builder) batchNormGradVJP(n *node, k int, w *node) *node {
	g, z, gamma := n.args[0], n.args[1], n.args[2]
	rows, c := z.shape[0], z.shape[1]
	switch k {
	case 0:
		return b.batchNormGrad(w, z, gamma, n.eps)
	case 2:
		return b.reduce(opSum, b.mul(w, b.batchNormGrad(g, z, b.filled([]int{c}, 1), n.eps)), 0)
	}
	row := []int{1, c}
	colSum := func(a *node) *node { return b.reshape(b.reduce(opSum, a, 0), row) }
	full := func(r *node) *node { return b.broadcast(r, z.shape) }
	inv := 1 / float64(rows)
	xhat, is := b.bnNormalized(z, n.eps)
	gc := b.binary(opSub, g, full(b.scale(colSum(g), inv)))
	wc := b.binary(opSub, w, full(b.scale(colSum(w), inv)))
	A, B, S := colSum(b.mul(g, xhat)), colSum(b.mul(w, xhat)), colSum(b.mul(w, gc))
	sum := b.add2(b.add2(b.mul(full(B), gc), b.mul(full(A), wc)),
		b.mul(xhat, full(b.binary(opSub, S, b.scale(b.mul(A, B), 3*inv)))))
	coef := b.scale(b.mul(b.reshape(gamma, row), b.unary(opSquare, is)), -inv)
	return b.mul(full(coef), sum)
}

func bnForwardKernel[T float](n *node, out []T, in [][]T) {
	bnForward(out, in[0], in[1], in[2], n.shape[0], n.shape[1], n.eps)
}

func bnBackwardKernel[T float](n *node, out []T, in [][]T) {
	bnBackward(out, in[0], in[1], in[2], n.shape[0], n.shape[1], n.eps)
}

// bnStats sets mean[j] to the mean of column j of z (n×c) and inv[j] to
// 1/√(σ²_j + ε), σ²_j its biased variance. The statistics are float64 in
// either precision, and so is the arithmetic of bnForward and bnBackward
// per element (their results are rounded to T). Each column's terms are
// added one by one in row order, with the partial sum in a register
// (addRows, bnSqRows).
func bnStats[T float](mean, inv []float64, z []T, n, c int, eps float64) {
	mean, inv = mean[:c], inv[:c]
	clear(mean)
	clear(inv)
	addRows(mean, z[:n*c], n)
	s := 1 / float64(n)
	for j := range mean {
		mean[j] *= s
	}
	bnSqRows(inv, mean, z[:n*c], n)
	for j := range inv {
		inv[j] = 1 / math.Sqrt(inv[j]*s+eps)
	}
}

// bnForward sets out = (z − μ)·γ/σ + β, column by column, for z (n×c).
func bnForward[T float](out, z, gamma, beta []T, n, c int, eps float64) {
	st := getScratch(4 * c)
	defer putScratch(st)
	mean, inv, k, b := (*st)[:c], (*st)[c:2*c], (*st)[2*c:3*c], (*st)[3*c:]
	bnStats(mean, inv, z, n, c, eps)
	for j := range k {
		k[j], b[j] = float64(gamma[j])*inv[j], float64(beta[j])
	}
	bnNormRows(out[:n*c], z[:n*c], mean, k, b, n)
}

// bnBackward sets out to the adjoint of bnForward's input for the adjoint
// g of its output (see the file comment).
func bnBackward[T float](out, g, z, gamma []T, n, c int, eps float64) {
	st := getScratch(5 * c)
	defer putScratch(st)
	mean, inv, sg, sgx, k := (*st)[:c], (*st)[c:2*c], (*st)[2*c:3*c], (*st)[3*c:4*c], (*st)[4*c:]
	bnStats(mean, inv, z, n, c, eps)
	clear(sg)
	clear(sgx)
	bnSumsRows(sg, sgx, mean, inv, g[:n*c], z[:n*c], n)
	s := 1 / float64(n)
	for j := range k {
		k[j] = float64(gamma[j]) * inv[j]
		sg[j] *= s
		sgx[j] *= s
	}
	bnOutRows(out[:n*c], g[:n*c], z[:n*c], mean, inv, sg, sgx, k, n)
}

// The passes of batch normalization over the rows of an n×c array (c =
// len(m)), each column's terms in row order; batchnorm_amd64.s has their
// AVX-512 kernels, with the same bits.

// bnSqRowsGo adds (x − m)² to acc, row after row.
func bnSqRowsGo[T float](acc, m []float64, x []T, rows int) {
	c := len(m)
	r := 0
	for ; r+4 <= rows; r += 4 {
		z0, z1, z2, z3 := x[r*c:][:c], x[(r+1)*c:][:c], x[(r+2)*c:][:c], x[(r+3)*c:][:c]
		for j, mj := range m {
			d0, d1, d2, d3 := float64(z0[j])-mj, float64(z1[j])-mj, float64(z2[j])-mj, float64(z3[j])-mj
			acc[j] = acc[j] + d0*d0 + d1*d1 + d2*d2 + d3*d3
		}
	}
	for ; r < rows; r++ {
		zr := x[r*c:][:c]
		for j, mj := range m {
			d := float64(zr[j]) - mj
			acc[j] += d * d
		}
	}
}

// bnNormRowsGo sets out = (x − m)·k + b, rounded to T.
func bnNormRowsGo[T float](out, x []T, m, k, b []float64, rows int) {
	c := len(m)
	for r := 0; r < rows; r++ {
		o, zr := out[r*c:][:c], x[r*c:][:c]
		for j, mj := range m {
			o[j] = T((float64(zr[j])-mj)*k[j] + b[j])
		}
	}
}

// bnSumsRowsGo adds g to sg and g·(x − m)·inv to sgx, row after row.
func bnSumsRowsGo[T float](sg, sgx, m, inv []float64, g, x []T, rows int) {
	c := len(m)
	r := 0
	for ; r+2 <= rows; r += 2 {
		z0, z1, g0, g1 := x[r*c:][:c], x[(r+1)*c:][:c], g[r*c:][:c], g[(r+1)*c:][:c]
		for j, mj := range m {
			v0, v1 := float64(g0[j]), float64(g1[j])
			sg[j] = sg[j] + v0 + v1
			sgx[j] = sgx[j] + v0*(float64(z0[j])-mj)*inv[j] + v1*(float64(z1[j])-mj)*inv[j]
		}
	}
	for ; r < rows; r++ {
		zr, gr := x[r*c:][:c], g[r*c:][:c]
		for j, mj := range m {
			v := float64(gr[j])
			sg[j] += v
			sgx[j] += v * (float64(zr[j]) - mj) * inv[j]
		}
	}
}

// bnOutRowsGo sets out = k·((g − sg) − (x − m)·inv·sgx), rounded to T.
func bnOutRowsGo[T float](out, g, x []T, m, inv, sg, sgx, k []float64, rows int) {
	c := len(m)
	for r := 0; r < rows; r++ {
		o, zr, gr := out[r*c:][:c], x[r*c:][:c], g[r*c:][:c]
		for j, mj := range m {
			o[j] = T(k[j] * (float64(gr[j]) - sg[j] - (float64(zr[j])-mj)*inv[j]*sgx[j]))
		}
	}
}
