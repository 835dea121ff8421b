package graph

import (
	"math/rand/v2"
	"testing"
)

// TestBatchNormMatchesPrimitives checks opBatchNorm against the same
// function written with primitives: value, gradient and Hessian-vector
// product with respect to the input and the scale, to rounding.
func TestBatchNormMatchesPrimitives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n, c := 50, 4
	mk := func(k int) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	rv, zv, gam, vz, vg := mk(n*c), mk(n*c), mk(c), mk(n*c), mk(c)
	var res [2][][]float64
	for i, useOp := range []bool{false, true} {
		b := newBuilder()
		z, ga := b.leaf("z", []int{n, c}), b.leaf("gamma", []int{c})
		be := b.constant([]int{c}, []float64{0.5, -1, 2, 0})
		var y *node
		if useOp {
			y = b.batchNorm(z, ga, be, 0.1)
		} else {
			xh, _ := b.bnNormalized(z, 0.1)
			row := []int{1, c}
			y = b.binary(opAdd, b.mul(xh, b.broadcast(b.reshape(ga, row), z.shape)), b.broadcast(b.reshape(be, row), z.shape))
		}
		out := b.sumAll(b.mul(b.constant([]int{n, c}, rv), b.unary(opSquare, y)))
		d := b.grad(out, []*node{z, ga})
		dir := b.add2(b.sumAll(b.mul(d[0], b.constant([]int{n, c}, vz))), b.sumAll(b.mul(d[1], b.constant([]int{c}, vg))))
		h := b.grad(dir, []*node{z, ga})
		pr := compile([]*node{out, d[0], d[1], h[0], h[1]}, nil, false)
		pr.bind(z, zv)
		pr.bind(ga, gam)
		pr.run()
		for o := range 5 {
			res[i] = append(res[i], append([]float64{}, pr.out(o)...))
		}
	}
	for o, name := range []string{"value", "∇z", "∇γ", "HVP z part", "HVP γ part"} {
		if e := relErr(res[1][o], res[0][o]); e > 1e-12 {
			t.Errorf("%s: operation and primitives differ by %.1e", name, e)
		}
	}
}
