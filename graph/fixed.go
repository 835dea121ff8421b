package graph

// FixedX evaluates the oracles of both objectives at a fixed outer point x
// and fixed batches, for many inner points y: everything that depends only
// on x and the data — a whole network's forward pass when y is its last
// layer, say — is computed once per program and reused, and each call runs
// only the part that depends on y (and on the vector of a product). Inner
// loops, ITD sweeps and linear solves at one x use it. It holds its own
// copies of x and of the batches' rows; several FixedX values may be used
// in turn, and switching between them recomputes the fixed part.
type FixedX struct {
	p     *Problem
	x     []float64
	batch [2][]int
	w     [2]*world
	data  [2]map[int][]array // per program kind
	// sum holds the adjoints at the boundary (mixedsum.go) accumulated by
	// AddMixedXY since the last MixedXYSum; summed tells whether it holds
	// any.
	sum    []boundarySum
	summed bool
}

// FixX returns the evaluation of the oracles at x on the given lower- and
// upper-level batches (nil: all samples).
func (p *Problem) FixX(x []float64, lower, upper []int) *FixedX {
	f := &FixedX{p: p, x: append([]float64{}, p.checkLen(x, p.dimX, "x")...)}
	for lv, b := range [2][]int{lower, upper} {
		f.w[lv] = p.mustWorld(lv, b)
		if b != nil {
			f.batch[lv] = append([]int{}, b...)
		}
		f.data[lv] = map[int][]array{}
	}
	return f
}

// X returns the fixed outer point; it must not be modified.
func (f *FixedX) X() []float64 { return f.x }

// static returns pr, the program of kind on level lv, with its part that
// depends only on x and the data computed at f's x and batch: at once when
// pr last ran for f, else bound to them and run.
func (f *FixedX) static(lv, kind int, pr *program) *program {
	p, w := f.p, f.w[lv]
	if pr.owner != f {
		data, ok := f.data[lv][kind]
		if !ok {
			data = append([]array{}, w.batchData(p, pr, f.batch[lv], true)...)
			f.data[lv][kind] = data
		}
		for i, v := range p.outer {
			pr.bind(w.x[i], f.x[v.Offset:v.Offset+v.Size])
		}
		w.bindData(pr, data)
		pr.exec(nil, runStatic)
		pr.owner = f
	}
	return pr
}

// run evaluates the program of kind on level lv at y, with seed s (v or u)
// for the products, and returns it for reading; the caller releases it.
func (f *FixedX) run(lv, kind int, y, s []float64) *program {
	p, w := f.p, f.w[lv]
	pr := f.static(lv, kind, w.program(p, kind+progFixed))
	bindFlat(pr, w.y, p.inner, p.checkLen(y, p.dimY, "y"))
	switch kind {
	case progHVP, progMixedXY:
		bindFlat(pr, w.v, p.inner, p.checkLen(s, p.dimY, "v"))
	case progMixedYX:
		bindFlat(pr, w.u, p.outer, p.checkLen(s, p.dimX, "u"))
	}
	pr.exec(nil, runDynamic)
	return pr
}

// G returns g(x, y).
func (f *FixedX) G(y []float64) float64 {
	f.p.stats.LowerEvaluations++
	pr := f.run(lowerLevel, progValue, y, nil)
	defer pr.releaseIf(true)
	return pr.out(0)[0]
}

// F returns f(x, y).
func (f *FixedX) F(y []float64) float64 {
	f.p.stats.UpperEvaluations++
	pr := f.run(upperLevel, progValue, y, nil)
	defer pr.releaseIf(true)
	return pr.out(0)[0]
}

// GradG computes ∇x g into dx and ∇y g into dy; either may be nil.
func (f *FixedX) GradG(dx, dy, y []float64) {
	f.p.stats.LowerGradients++
	f.grad(lowerLevel, dx, dy, y)
}

// GradF computes ∇x f into dx and ∇y f into dy; either may be nil.
func (f *FixedX) GradF(dx, dy, y []float64) {
	f.p.stats.UpperGradients++
	f.grad(upperLevel, dx, dy, y)
}

func (f *FixedX) grad(lv int, dx, dy, y []float64) {
	if lv == lowerLevel && dx == nil && dy != nil {
		pr, ms := f.sweep(y, nil)
		defer pr.releaseIf(true)
		ms.run(pr, ms.grad)
		f.p.collect(dy, f.p.inner, pr, 0)
		return
	}
	if _, ok := gradKind(dx, dy); !ok {
		return
	}
	// One program gives both gradients, each call running the steps of
	// the ones asked for, so that calls for ∇y and then ∇x at one
	// FixedX (features, then their pull-back) share its fixed part.
	p, w := f.p, f.w[lv]
	pr := f.static(lv, progGradXY, w.program(p, progGradXY+progFixed))
	defer pr.releaseIf(true)
	bindFlat(pr, w.y, p.inner, p.checkLen(y, p.dimY, "y"))
	pr.exec(w.gradNeed(pr, dx != nil, dy != nil), runDynamic)
	if dx != nil {
		p.collect(dx, p.outer, pr, 0)
	}
	if dy != nil {
		p.collect(dy, p.inner, pr, len(p.outer))
	}
}

// HVP computes ∇yy g(x, y) · v into dst.
func (f *FixedX) HVP(dst, y, v []float64) {
	f.p.stats.HessVecProducts++
	pr, ms := f.sweep(y, v)
	defer pr.releaseIf(true)
	ms.run(pr, ms.hvp)
	f.p.collect(dst, f.p.inner, pr, ms.hvpAt)
}

// MixedXY computes ∇xy g(x, y) · v into dst (x-space).
func (f *FixedX) MixedXY(dst, y, v []float64) {
	f.p.stats.MixedXYProducts++
	pr := f.run(lowerLevel, progMixedXY, y, v)
	defer pr.releaseIf(true)
	f.p.collect(dst, f.p.outer, pr, 0)
}

// MixedYX computes ∇yx g(x, y) · u into dst (y-space).
func (f *FixedX) MixedYX(dst, y, u []float64) {
	f.p.stats.MixedYXProducts++
	pr := f.run(lowerLevel, progMixedYX, y, u)
	defer pr.releaseIf(true)
	f.p.collect(dst, f.p.inner, pr, 0)
}
