package optim

// What the fully first-order methods (F2SA, BOME) share: a curvature
// estimate from gradients alone, and the penalty objective f + λg whose
// gradient descent is one of F2SA's inner loops.

import (
	"math"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// gradientCurvature is curvature for the methods that call no second-order
// oracle: the same min(30, DimY) Lanczos steps, cached under the same
// State key, on the central difference of gradients
//
//	∇yy g·v ≈ (∇y g(x, y + h v) − ∇y g(x, y − h v)) / (2h),   h = 10⁻⁴·max(1, ‖y‖∞),
//
// at the state's (x, y) on the whole lower data set: two GradG calls per
// step instead of one HVP, so that a run of F2SA or BOME never calls HVP.
// Lanczos hands the operator unit vectors, so h is the length of the
// perturbation. The difference is exact for a g quadratic in y up to
// rounding (relative error about 10⁻¹²); otherwise its error is O(h²).
func gradientCurvature(p oracle.Problem, st *State) (float64, error) {
	dy := p.DimY()
	h := 1e-4 * math.Max(1, floats.Norm(st.Y, math.Inf(1)))
	yp, ym, gm := st.Work("optim.fd.yp", dy), st.Work("optim.fd.ym", dy), st.Work("optim.fd.gm", dy)
	op := func(dst, v []float64) {
		floats.AddScaledTo(yp, st.Y, h, v)
		floats.AddScaledTo(ym, st.Y, -h, v)
		p.GradG(nil, dst, st.X, yp, nil)
		p.GradG(nil, gm, st.X, ym, nil)
		floats.Sub(dst, gm)
		floats.Scale(1/(2*h), dst)
	}
	return curvatureOf(st, op, dy)
}

// penalty is the lower-gradient oracle of the penalty objective
// f + λg of F2SA's y-loop: GradG returns ∇y f on a fresh upper batch plus
// λ times ∇y g on the given lower batch, so that unroll.Descend with step
// α takes the step y ← y − α(∇y f + λ∇y g). It computes no ∇x.
type penalty struct {
	p      oracle.Problem
	lambda float64
	upper  func() []int // draws the upper batch of a step
	fy     []float64    // scratch, length DimY
}

// GradG implements oracle.LowerGradient (dx is ignored).
func (q penalty) GradG(_, dy, x, y []float64, batch []int) {
	q.p.GradG(nil, dy, x, y, batch)
	q.p.GradF(nil, q.fy, x, y, q.upper())
	for i, f := range q.fy {
		dy[i] = f + q.lambda*dy[i]
	}
}

var _ oracle.LowerGradient = penalty{}
