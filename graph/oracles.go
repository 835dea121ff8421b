package graph

import "fmt"

// The oracles: values, gradients, Hessian-vector and mixed products of f
// and g at (x, y) on a batch, each a run of the program of its kind in the
// world of its level and batch size (world.go).

// F returns f(x, y) on the upper-level batch.
func (p *Problem) F(x, y []float64, batch []int) float64 {
	p.stats.UpperEvaluations++
	pr := p.call(upperLevel, progValue, x, y, nil, batch)
	defer pr.release()
	return pr.out(0)[0]
}

// G returns g(x, y) on the lower-level batch.
func (p *Problem) G(x, y []float64, batch []int) float64 {
	p.stats.LowerEvaluations++
	pr := p.call(lowerLevel, progValue, x, y, nil, batch)
	defer pr.release()
	return pr.out(0)[0]
}

// GradF computes ∇x f into dx and ∇y f into dy on the upper-level batch;
// either may be nil to skip it.
func (p *Problem) GradF(dx, dy, x, y []float64, batch []int) {
	p.stats.UpperGradients++
	p.grad(upperLevel, dx, dy, x, y, batch)
}

// GradG computes ∇x g into dx and ∇y g into dy on the lower-level batch;
// either may be nil to skip it.
func (p *Problem) GradG(dx, dy, x, y []float64, batch []int) {
	p.stats.LowerGradients++
	p.grad(lowerLevel, dx, dy, x, y, batch)
}

func (p *Problem) grad(lv int, dx, dy, x, y []float64, batch []int) {
	if kind, ok := gradKind(dx, dy); ok {
		pr := p.call(lv, kind, x, y, nil, batch)
		defer pr.release()
		p.collectGrad(dx, dy, pr)
	}
}

// gradKind returns the program kind computing the gradients asked for
// (a nil destination skips its part), and false when none is.
func gradKind(dx, dy []float64) (int, bool) {
	switch {
	case dx == nil && dy == nil:
		return 0, false
	case dx == nil:
		return progGradY, true
	case dy == nil:
		return progGradX, true
	}
	return progGradXY, true
}

// collectGrad copies the outputs of a gradient program into dx and dy
// (either may be nil, as asked of gradKind).
func (p *Problem) collectGrad(dx, dy []float64, pr *program) {
	k := 0
	if dx != nil {
		k = p.collect(dx, p.outer, pr, 0)
	}
	if dy != nil {
		p.collect(dy, p.inner, pr, k)
	}
}

// collect copies the outputs first, first+1, ... of pr, one per variable
// of vs, into dst and returns the next output index.
func (p *Problem) collect(dst []float64, vs []Var, pr *program, first int) int {
	if len(dst) != sumSizes(vs) {
		panic(fmt.Sprintf("graph: destination has length %d, want %d", len(dst), sumSizes(vs)))
	}
	for i, v := range vs {
		copy(dst[v.Offset:v.Offset+v.Size], pr.out(first+i))
	}
	return first + len(vs)
}

func sumSizes(vs []Var) int {
	n := 0
	for _, v := range vs {
		n += v.Size
	}
	return n
}

// HVP computes the Hessian-vector product ∇yy g(x, y) · v into dst on the
// lower-level batch.
func (p *Problem) HVP(dst, x, y, v []float64, batch []int) {
	p.stats.HessVecProducts++
	pr := p.call(lowerLevel, progHVP, x, y, v, batch)
	defer pr.release()
	p.collect(dst, p.inner, pr, 0)
}

// MixedXY computes the mixed product ∇xy g(x, y) · v = ∇x ⟨∇y g, v⟩, a
// vector in x-space, into dst on the lower-level batch.
func (p *Problem) MixedXY(dst, x, y, v []float64, batch []int) {
	p.stats.MixedXYProducts++
	pr := p.call(lowerLevel, progMixedXY, x, y, v, batch)
	defer pr.release()
	p.collect(dst, p.outer, pr, 0)
}

// MixedYX computes the mixed product ∇yx g(x, y) · u = ∇y ⟨∇x g, u⟩, a
// vector in y-space, into dst on the lower-level batch.
func (p *Problem) MixedYX(dst, x, y, u []float64, batch []int) {
	p.stats.MixedYXProducts++
	pr := p.call(lowerLevel, progMixedYX, x, y, u, batch)
	defer pr.release()
	p.collect(dst, p.inner, pr, 0)
}

func (p *Problem) checkLen(v []float64, n int, name string) []float64 {
	if len(v) != n {
		panic(fmt.Sprintf("graph: %s has length %d, want %d", name, len(v), n))
	}
	return v
}
