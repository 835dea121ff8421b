package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// CheckSettings configures Check. Zero values mean the defaults.
type CheckSettings struct {
	// Step is the finite-difference step (default 1e-5 for gradients of the
	// objectives and for differences of gradients).
	Step float64
	// Seed draws the random directions v and u (default 1).
	Seed uint64
	// LowerBatch and UpperBatch are the batches the oracles are checked on
	// (nil: all samples).
	LowerBatch, UpperBatch []int
}

// CheckReport holds, for each oracle, the relative error
// ‖oracle − finite difference‖ / max(‖finite difference‖, 1) at one point.
type CheckReport struct {
	GradXF, GradYF, GradXG, GradYG float64
	HVP, MixedXY, MixedYX          float64
	// Linearized is the largest difference between Linearization products
	// and the direct ones (they must agree to rounding).
	Linearized float64
	// Translation is the largest difference of a node's value in graph/'s
	// translation from gorgonia's own forward pass, relative to the node's
	// largest magnitude, at the point checked, on the checked batches (on
	// the first samples when a batch is nil; see Compile), and
	// TranslationErr the error when a node's difference is more than
	// rounding (Translation is then +Inf).
	Translation    float64
	TranslationErr error
	// Float32 and Translation32 are set for a problem computed in float32
	// (Objective.Float32), whose other fields are those of the same
	// objective computed in float64 on the same (float32) data — finite
	// differences of float32 values would measure their rounding, not the
	// derivatives. Float32 is the largest difference of a float32 oracle
	// (f, g, both gradients, the three products, the linearized products)
	// from the float64 one at the same point and vectors,
	// ‖o32 − o64‖ / max(‖o64‖, 1); Translation32 the largest difference of
	// a node's float32 value from gorgonia's, relative to the node's
	// largest magnitude (TranslationErr holds the error when a node is
	// beyond float32 rounding). Both are float32 rounding: about 1e-7 to
	// 1e-5 on well-scaled models, more where the model amplifies rounding
	// (a sum that cancels, a softmax near saturation); graph/'s own tests
	// allow 1e-4 and 1e-4 (verifyTol32).
	Float32, Translation32 float64
}

// Max returns the largest error of the float64 checks: the finite
// differences, the linearization and the translation. (A float32
// problem's Float32 and Translation32 have a tolerance of their own.)
func (r CheckReport) Max() float64 {
	return max(r.GradXF, r.GradYF, r.GradXG, r.GradYG, r.HVP, r.MixedXY, r.MixedYX, r.Linearized, r.Translation)
}

func (r CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "∇x f %.1e, ∇y f %.1e, ∇x g %.1e, ∇y g %.1e, ∇yy g·v %.1e, ∇xy g·v %.1e, ∇yx g·u %.1e, linearized %.1e, translation %.1e",
		r.GradXF, r.GradYF, r.GradXG, r.GradYG, r.HVP, r.MixedXY, r.MixedYX, r.Linearized, r.Translation)
	if r.Float32 != 0 || r.Translation32 != 0 {
		fmt.Fprintf(&b, "; float32 against float64 %.1e, float32 translation %.1e", r.Float32, r.Translation32)
	}
	if r.TranslationErr != nil {
		fmt.Fprintf(&b, " (%v)", r.TranslationErr)
	}
	return b.String()
}

// Check compares every oracle of p at (x, y) with central finite
// differences (gonum's diff/fd): the gradients with differences of f and g,
// the second-order products with differences of the gradients along random
// directions. It also compares the value of every node of the user's
// graph with gorgonia's own forward pass at (x, y), as Compile does at the
// declared values. It is the gradient checker to run on a new model.
//
// For a problem computed in float32 (Objective.Float32), the finite
// differences are those of the same objective computed in float64 on the
// same data, and each float32 oracle is compared with that one (see
// CheckReport's Float32).
func Check(p *Problem, x, y []float64, s *CheckSettings) CheckReport {
	var r CheckReport
	if p.f32 {
		q := p.float64Twin()
		r = check(q, x, y, s)
		r.Float32 = compareOracles(p, q, x, y, s)
	} else {
		r = check(p, x, y, s)
	}
	v, err := p.verify(x, y, [2][]int{batchOf(s, false), batchOf(s, true)})
	r.Translation, r.Translation32, r.TranslationErr = v.worst, v.worst32, err
	if err != nil {
		r.Translation = math.Inf(1)
	}
	return r
}

// batchOf returns the upper or lower batch of s (nil when s is).
func batchOf(s *CheckSettings, upper bool) []int {
	switch {
	case s == nil:
		return nil
	case upper:
		return s.UpperBatch
	}
	return s.LowerBatch
}

// float64Twin returns p computed in float64: the same objectives, data,
// mode and seed, with programs of its own (the data stay in float32, read
// as Objective.Float32Data reads them).
func (p *Problem) float64Twin() *Problem {
	q := *p
	q.f32, q.worlds, q.stats = false, map[worldKey]*world{}, Stats{}
	return &q
}

// compareOracles returns the largest relative difference of p's oracles
// from q's at (x, y), on s's batches, with the random vectors of check.
func compareOracles(p, q *Problem, x, y []float64, s *CheckSettings) float64 {
	seed, lb, ub := uint64(1), batchOf(s, false), batchOf(s, true)
	if s != nil && s.Seed != 0 {
		seed = s.Seed
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	dx, dy := p.DimX(), p.DimY()
	v, u := randVec(rng, dy), randVec(rng, dx)
	worst := 0.0
	for _, o := range []struct {
		n int
		f func(p *Problem, dst []float64)
	}{
		{1, func(p *Problem, dst []float64) { dst[0] = p.F(x, y, ub) }},
		{1, func(p *Problem, dst []float64) { dst[0] = p.G(x, y, lb) }},
		{dx + dy, func(p *Problem, dst []float64) { p.GradF(dst[:dx], dst[dx:], x, y, ub) }},
		{dx + dy, func(p *Problem, dst []float64) { p.GradG(dst[:dx], dst[dx:], x, y, lb) }},
		{dy, func(p *Problem, dst []float64) { p.HVP(dst, x, y, v, lb) }},
		{dx, func(p *Problem, dst []float64) { p.MixedXY(dst, x, y, v, lb) }},
		{dy, func(p *Problem, dst []float64) { p.MixedYX(dst, x, y, u, lb) }},
		{dy + dx, func(p *Problem, dst []float64) {
			l := p.Linearize(x, y, lb)
			l.HVP(dst[:dy], v)
			l.MixedXY(dst[dy:], v)
		}},
	} {
		a, b := make([]float64, o.n), make([]float64, o.n)
		o.f(p, a)
		o.f(q, b)
		worst = max(worst, relErr(a, b))
	}
	return worst
}

// check is Check's comparison with finite differences, for a problem
// computed in float64.
func check(p *Problem, x, y []float64, s *CheckSettings) CheckReport {
	if s == nil {
		s = &CheckSettings{}
	}
	h := s.Step
	if h == 0 {
		h = 1e-5
	}
	seed := s.Seed
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	lb, ub := s.LowerBatch, s.UpperBatch
	fdSet := &fd.Settings{Formula: fd.Central, Step: h}
	dx, dy := p.DimX(), p.DimY()
	x = append([]float64{}, x...)
	y = append([]float64{}, y...)
	var r CheckReport

	gx, gy := make([]float64, dx), make([]float64, dy)
	wx, wy := make([]float64, dx), make([]float64, dy)
	for _, lv := range []struct {
		val        func(x, y []float64) float64
		grad       func(dx, dy, x, y []float64)
		errX, errY *float64
	}{
		{func(x, y []float64) float64 { return p.F(x, y, ub) }, func(a, b, x, y []float64) { p.GradF(a, b, x, y, ub) }, &r.GradXF, &r.GradYF},
		{func(x, y []float64) float64 { return p.G(x, y, lb) }, func(a, b, x, y []float64) { p.GradG(a, b, x, y, lb) }, &r.GradXG, &r.GradYG},
	} {
		lv.grad(gx, gy, x, y)
		fd.Gradient(wx, func(v []float64) float64 { return lv.val(v, y) }, x, fdSet)
		fd.Gradient(wy, func(v []float64) float64 { return lv.val(x, v) }, y, fdSet)
		*lv.errX = relErr(gx, wx)
		*lv.errY = relErr(gy, wy)
	}

	v := randVec(rng, dy)
	u := randVec(rng, dx)
	// ∇yy g·v: the derivative of ∇y g along v.
	got := make([]float64, dy)
	p.HVP(got, x, y, v, lb)
	want := directional(dy, func(dst []float64, t float64) {
		yt := axpy(y, t, v)
		p.GradG(nil, dst, x, yt, lb)
	}, h)
	r.HVP = relErr(got, want)
	// ∇xy g·v = ∇x⟨∇y g, v⟩: the gradient in x of the directional
	// derivative of g along v in y, i.e. the derivative of ∇x g along v.
	gotX := make([]float64, dx)
	p.MixedXY(gotX, x, y, v, lb)
	wantX := directional(dx, func(dst []float64, t float64) {
		p.GradG(dst, nil, x, axpy(y, t, v), lb)
	}, h)
	r.MixedXY = relErr(gotX, wantX)
	// ∇yx g·u = ∇y⟨∇x g, u⟩: the derivative of ∇y g along u in x.
	p.MixedYX(got, x, y, u, lb)
	want = directional(dy, func(dst []float64, t float64) {
		p.GradG(nil, dst, axpy(x, t, u), y, lb)
	}, h)
	r.MixedYX = relErr(got, want)

	l := p.Linearize(x, y, lb)
	lin := make([]float64, dy)
	l.HVP(lin, v)
	p.HVP(got, x, y, v, lb)
	r.Linearized = relErr(lin, got)
	linX := make([]float64, dx)
	l.MixedXY(linX, v)
	p.MixedXY(gotX, x, y, v, lb)
	r.Linearized = max(r.Linearized, relErr(linX, gotX))
	return r
}

// directional returns the central difference (d(h) − d(−h)) / 2h of the
// vector function d.
func directional(n int, d func(dst []float64, t float64), h float64) []float64 {
	plus, minus := make([]float64, n), make([]float64, n)
	d(plus, h)
	d(minus, -h)
	floats.Sub(plus, minus)
	floats.Scale(1/(2*h), plus)
	return plus
}

func axpy(x []float64, t float64, v []float64) []float64 {
	r := append([]float64{}, x...)
	floats.AddScaled(r, t, v)
	return r
}

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// relErr is ‖a − b‖ / max(‖b‖, 1).
func relErr(a, b []float64) float64 {
	if len(a) == 0 {
		return 0
	}
	d := mat.NewVecDense(len(a), append([]float64{}, a...))
	d.SubVec(d, mat.NewVecDense(len(b), b))
	e := mat.Norm(d, 2) / math.Max(floats.Norm(b, 2), 1)
	if math.IsNaN(e) {
		return math.Inf(1)
	}
	return e
}
