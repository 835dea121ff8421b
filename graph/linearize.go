package graph

// Linearization holds g's second-order information at a fixed point
// (x, y) and batch: everything the Hessian-vector and mixed products need
// that does not depend on the vector is computed once, by Linearize, and
// each product then runs only the part of the program that depends on v.
// Use it in CG, Neumann and unrolling loops that apply the Hessian many
// times at one point. It holds its own copies of x, y and the batch's rows,
// so several linearizations may be used in turn; switching between them
// recomputes the fixed part.
type Linearization struct {
	p                *Problem
	w                *world
	pr               *program
	needHVP, needMix []bool
	x, y             []float64
	data             []array
}

// Linearize returns the linearization of g at (x, y) on the lower-level
// batch.
func (p *Problem) Linearize(x, y []float64, batch []int) *Linearization {
	w := p.mustWorld(lowerLevel, batch)
	pr := w.program(p, progLinear)
	l := &Linearization{p: p, w: w, pr: pr,
		x: append([]float64{}, p.checkLen(x, p.dimX, "x")...),
		y: append([]float64{}, p.checkLen(y, p.dimY, "y")...)}
	l.needHVP = pr.need(seq(0, len(p.inner))...)
	l.needMix = pr.need(seq(len(p.inner), len(p.inner)+len(p.outer))...)
	l.data = append([]array{}, w.batchData(p, pr, batch, true)...)
	l.activate()
	return l
}

// HVPAt returns the operator v ↦ ∇yy g(x, y)·v on the lower-level batch,
// computed through a Linearization made at its first use: the first product
// costs about one HVP, each later one only the part that depends on v. It
// keeps x, y and batch; they must not change while it is in use. This is
// the operator implicit.HVPOperator uses for a Problem, and so AID's CG and
// Neumann loops.
func (p *Problem) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	var l *Linearization
	return func(dst, v []float64) {
		if l == nil {
			l = p.Linearize(x, y, batch)
		}
		l.HVP(dst, v)
	}
}

// activate makes l the linearization its program holds.
func (l *Linearization) activate() {
	l.w.bind(l.p, l.pr, l.x, l.y, l.data)
	l.pr.exec(nil, runStatic)
	l.pr.owner = l
}

func seq(a, b int) []int {
	r := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		r = append(r, i)
	}
	return r
}

func (l *Linearization) apply(v []float64, mask []bool) {
	if l.pr.owner != l {
		l.activate()
	}
	bindFlat(l.pr, l.w.v, l.p.inner, l.p.checkLen(v, l.p.dimY, "v"))
	l.pr.exec(mask, runDynamic)
}

// HVP computes ∇yy g · v at the linearization point into dst.
func (l *Linearization) HVP(dst, v []float64) {
	l.p.stats.HessVecProducts++
	l.apply(v, l.needHVP)
	l.p.collect(dst, l.p.inner, l.pr, 0)
}

// MixedXY computes ∇xy g · v at the linearization point into dst.
func (l *Linearization) MixedXY(dst, v []float64) {
	l.p.stats.MixedXYProducts++
	l.apply(v, l.needMix)
	l.p.collect(dst, l.p.outer, l.pr, len(l.p.inner))
}
