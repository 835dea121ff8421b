package optim

import (
	"fmt"
	"slices"

	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// F2SA is the Fully First-order Stochastic Approximation method of Kwon,
// Kwon, Wright and Nowak, "A fully first-order method for stochastic
// bilevel optimization" (ICML 2023, arXiv 2301.10945, Algorithm 1; not in
// shared/papers). It calls no second-order oracle: only ∇f and ∇g.
//
// The bilevel problem is the constrained problem min_{x,y} f(x, y) s.t.
// g(x, y) − g*(x) ≤ 0 with g*(x) = min_z g(x, z), whose penalty function
// (the paper's Lagrangian) is
//
//	L_λ(x, y) = f(x, y) + λ(g(x, y) − g*(x)),   L*_λ(x) = min_y L_λ(x, y),
//	∇L*_λ(x) = ∇x f(x, y*_λ) + λ(∇x g(x, y*_λ) − ∇x g(x, y*)),
//
// where y*_λ(x) = argmin_y f + λg and y*(x) = argmin_z g, because
// ∇g*(x) = ∇x g(x, y*(x)) (Danskin); ‖∇L*_λ − ∇Φ‖ = O(1/λ), so λ grows
// along the run. Iteration k of Algorithm 1, with steps α_k, γ_k and
// multiplier λ_k:
//
//	z_{k,t+1} = z_{k,t} − γ_k ∇y g(x_k, z_{k,t}; φ_z),                 t = 0..T−1, z_{k,0} = z_k
//	y_{k,t+1} = y_{k,t} − α_k (∇y f(x_k, y_{k,t}; ζ_y) + λ_k ∇y g(x_k, y_{k,t}; φ_y))
//	x_{k+1}   = x_k − ξα_k (∇x f(x_k, y_{k+1}; ζ_x) + λ_k (∇x g(x_k, y_{k+1}; φ_x) − ∇x g(x_k, z_{k+1}; φ_x)))
//
// with z_{k+1} = z_{k,T}, y_{k+1} = y_{k,T} and every φ a fresh lower
// batch, every ζ a fresh upper batch. The two ∇x g of the x-step share one
// batch φ_x, so that the noise of their difference vanishes as y and z
// meet (independent batches would multiply the noise by λ_k). The z- and
// y-loops do not read each other, so they run one after the other: the
// z-loop is the inner loop of the AID methods (unroll.Descend on g), the
// y-loop unroll.Descend on f + λ_k g. z is State.Vecs["f2sa.z"], started
// at y_0.
//
// Schedules: α_k = Alpha·(k+1)^(−AlphaDecay), γ_k = Gamma·(k+1)^(−GammaDecay),
// λ_k = Lambda·(k+1)^LambdaGrowth, and the direction handed to Outer is
// scaled by (k+1)^(−AlphaDecay), so Outer = SGD{LR: ξ·Alpha} takes
// Algorithm 1's step ξα_k. The paper's analysis takes polynomial schedules
// with α_k λ_k of the order of γ_k (the y-loop's step on λg no larger than
// the z-loop's); for noise in both levels it takes, as we recall it (the
// statement was not read here), a = 5/7, c = 4/7 and λ_k ∝ k^(1/7)
// (AlphaDecay, GammaDecay, LambdaGrowth); the zero values give constant
// steps and a constant λ, which converge to a stationary point of L*_λ,
// O(1/λ) from Φ's.
//
// Oracle calls per iteration: 2T + 2 GradG (T on z, T on y, two ∇x g), T + 1
// GradF; no HVP or mixed product. Default step sizes cost min(30, DimY)
// pairs of GradG once (gradientCurvature).
type F2SA struct {
	// Gamma is γ_0, the step of the z-loop; 0 means 1/L with L the largest
	// eigenvalue of ∇yy g at (x0, y0), estimated from gradient differences.
	Gamma float64
	// Lambda is λ_0, the first multiplier; 0 means 10.
	Lambda float64
	// Alpha is α_0, the step of the y-loop; 0 means γ_0/(2λ_0), the step
	// whose part on λg is half the z-loop's.
	Alpha float64
	// T is the number of steps of each inner loop; 0 means 10.
	T int
	// AlphaDecay, GammaDecay and LambdaGrowth are the exponents of the
	// schedules above; 0 keeps the value constant. LambdaGrowth may not
	// exceed AlphaDecay: α_k λ_k, the y-loop's step on g, must not grow.
	AlphaDecay, GammaDecay, LambdaGrowth float64
	// LowerBatch is the size of every lower-level batch (φ), UpperBatch of
	// every upper-level batch (ζ); 0 means the whole data set.
	LowerBatch, UpperBatch int
	// Outer updates x; nil means Adam{} (LR 1e-3). Algorithm 1's step is
	// SGD{LR: ξ·Alpha}.
	Outer Optimizer
}

var _ Method = F2SA{}

// keyF2SAZ names z, the iterate of the z-loop.
const keyF2SAZ = "f2sa.z"

// Init implements Method. It starts z at y_0 if the state has none.
func (m F2SA) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "F2SA", checks: []error{
		checkStep("F2SA.Gamma", m.Gamma),
		checkStep("F2SA.Alpha", m.Alpha),
		checkStep("F2SA.Lambda", m.Lambda),
		checkCount("F2SA.T", m.T),
		checkBaselineDecay("F2SA.AlphaDecay", m.AlphaDecay),
		checkBaselineDecay("F2SA.GammaDecay", m.GammaDecay),
		checkBaselineDecay("F2SA.LambdaGrowth", m.LambdaGrowth),
		checkBatch(p, "F2SA.LowerBatch", m.LowerBatch, Lower),
		checkBatch(p, "F2SA.UpperBatch", m.UpperBatch, Upper),
		noProjectY("F2SA", st),
	}, outer: m.Outer, hasOuter: true}.run(p, st)
	if err != nil {
		return err
	}
	if m.LambdaGrowth > m.AlphaDecay {
		return fmt.Errorf("F2SA.LambdaGrowth = %v > F2SA.AlphaDecay = %v: α_k λ_k, the y-loop's step on g, would grow until the loop diverges; set LambdaGrowth ≤ AlphaDecay", m.LambdaGrowth, m.AlphaDecay)
	}
	if m.Gamma == 0 {
		if _, err := gradientCurvature(p, st); err != nil {
			return err
		}
	}
	if _, ok := st.Vecs[keyF2SAZ]; !ok {
		st.Vecs[keyF2SAZ] = slices.Clone(st.Y)
	}
	return nil
}

// steps returns α_k, γ_k and λ_k of iteration k.
func (m F2SA) steps(k int, st *State) (alpha, gamma, lambda float64) {
	gamma0 := stepOrDefault(m.Gamma, st)
	lambda0 := m.Lambda
	if lambda0 == 0 {
		lambda0 = 10
	}
	alpha0 := m.Alpha
	if alpha0 == 0 {
		alpha0 = gamma0 / (2 * lambda0)
	}
	// baselineDecay(k, −b) is the growth (k+1)^b.
	return alpha0 * baselineDecay(k, m.AlphaDecay), gamma0 * baselineDecay(k, m.GammaDecay), lambda0 * baselineDecay(k, -m.LambdaGrowth)
}

// Iterate implements Method.
func (m F2SA) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	k := st.Iter
	alpha, gamma, lambda := m.steps(k, st)
	t := count(m.T, 10)
	dx, dy := p.DimX(), p.DimY()
	z := st.Vec(keyF2SAZ, dy)
	lower := func(int) []int { return st.Batch(p, Lower, m.LowerBatch) }
	gy := st.Work("optim.gy", dy)
	if err := unroll.Descend(p, st.X, z, t, gamma, lower, gy); err != nil {
		return Iteration{}, fmt.Errorf("F2SA z-loop: %w", err)
	}
	pen := penalty{p: p, lambda: lambda, upper: func() []int { return st.Batch(p, Upper, m.UpperBatch) }, fy: st.Work("optim.fy", dy)}
	if err := unroll.Descend(pen, st.X, st.Y, t, alpha, lower, gy); err != nil {
		return Iteration{}, fmt.Errorf("F2SA y-loop: %w", err)
	}
	h, gxy, gxz := st.Work("optim.hypergradient", dx), st.Work("f2sa.gxy", dx), st.Work("f2sa.gxz", dx)
	p.GradF(h, nil, st.X, st.Y, st.Batch(p, Upper, m.UpperBatch))
	b := st.Batch(p, Lower, m.LowerBatch)
	p.GradG(gxy, nil, st.X, st.Y, b)
	p.GradG(gxz, nil, st.X, z, b)
	floats.Sub(gxy, gxz)
	floats.AddScaled(h, lambda, gxy)
	norm := floats.Norm(h, 2)
	if s := baselineDecay(k, m.AlphaDecay); s != 1 {
		floats.Scale(s, h)
	}
	st.StepX(orDefault(m.Outer), h)
	return Iteration{HypergradNorm: norm}, nil
}

// LowerIterate returns z, F2SA's iterate of the lower-level problem alone,
// its estimate of y*(x) (a view into st, not a copy). State.Y is y_λ, the
// minimizer of f + λg, which the upper objective pulls towards its own
// minimizer: to evaluate what x defines (a classifier trained on the lower
// data, say), use z; the two meet as λ grows.
func (F2SA) LowerIterate(st *State) []float64 { return st.Vecs[keyF2SAZ] }
