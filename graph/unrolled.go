package graph

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
)

// Unrolled is iterative differentiation built inside one expression: T steps
// of heavy-ball gradient descent on g,
//
//	y_{t+1} = y_t − α ∇y g(x, y_t) + β (y_t − y_{t−1}),  y_{−1} = y_0,
//
// written out as T copies of ∇y g, then f(x, y_T), then its derivative with
// respect to x by the same pure pass as every other oracle. Its size grows
// linearly with T, so it is meant for small T: it is the reference that the
// reverse sweep of package unroll must reproduce to rounding. It uses all
// samples of both levels.
type Unrolled struct {
	p      *Problem
	pr     *program
	x, y0  []*node
	nOuter int
}

// Unrolled builds the unrolled hypergradient program for T steps of size
// alpha and momentum beta (0 for plain gradient descent).
func (p *Problem) Unrolled(T int, alpha, beta float64) (*Unrolled, error) {
	if T < 0 || !(alpha > 0) || math.IsInf(alpha, 1) || !(beta >= 0 && beta < 1) {
		return nil, fmt.Errorf("graph: Unrolled needs T ≥ 0, a finite α > 0 and 0 ≤ β < 1; got T = %d, α = %v, β = %v", T, alpha, beta)
	}
	b := newBuilder()
	b.f32 = p.f32
	u := &Unrolled{p: p}
	leaves := map[*G.Node]*node{}
	for i, v := range p.outer {
		u.x = append(u.x, b.leaf(v.Name, v.Shape))
		leaves[p.outerNodes[i]] = u.x[i]
	}
	for _, v := range p.inner {
		u.y0 = append(u.y0, b.leaf(v.Name, v.Shape))
	}
	for _, l := range p.levels {
		for i, d := range l.data {
			leaves[d] = b.dataConstant([]int(d.Shape()), l.full[i])
		}
	}
	eval := func(lv int, y []*node) (*node, error) {
		m := make(map[*G.Node]*node, len(leaves)+len(y))
		for k, v := range leaves {
			m[k] = v
		}
		for i, n := range p.innerNodes {
			m[n] = y[i]
		}
		im := p.checkImporter(b, lv, nil)
		im.leaves = m
		out, err := im.node(p.levels[lv].root)
		if err != nil {
			return nil, err
		}
		return b.reshape(out, []int{}), nil
	}
	y, prev := u.y0, u.y0
	for t := 0; t < T; t++ {
		g, err := eval(lowerLevel, y)
		if err != nil {
			return nil, err
		}
		d := b.grad(g, y)
		next := make([]*node, len(y))
		for i := range y {
			step := y[i]
			if d[i] != nil {
				step = b.binary(opSub, y[i], b.scale(d[i], alpha))
			}
			if beta != 0 {
				step = b.binary(opAdd, step, b.scale(b.binary(opSub, y[i], prev[i]), beta))
			}
			next[i] = step
		}
		prev, y = y, next
	}
	f, err := eval(upperLevel, y)
	if err != nil {
		return nil, err
	}
	outs := []*node{f}
	for i, d := range b.grad(f, u.x) {
		if d == nil {
			d = b.constant(u.x[i].shape, make([]float64, u.x[i].size))
		}
		outs = append(outs, d)
	}
	u.pr = compile(outs, nil, p.f32)
	return u, nil
}

// Hypergradient computes dF/dx of F(x) = f(x, y_T(x)) for the unrolled
// iteration started at y0 into dst, and returns F(x).
func (u *Unrolled) Hypergradient(dst, x, y0 []float64) float64 {
	p := u.p
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y0, p.dimY, "y0")
	bindFlat(u.pr, u.x, p.outer, x)
	bindFlat(u.pr, u.y0, p.inner, y0)
	u.pr.run()
	defer u.pr.release()
	p.collect(dst, p.outer, u.pr, 1)
	return u.pr.out(0)[0]
}
