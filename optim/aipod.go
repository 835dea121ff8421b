package optim

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// AiPOD is alternating implicit projected SGD for equality-constrained
// bilevel problems, Algorithm 1 of paper 004 (Xiao, Shen, Yin, Chen,
// shared/papers/004_0b814357b1b03328.txt):
//
//	min_{x ∈ X} f(x, y*(x)),  y*(x) = argmin_{y ∈ Y(x)} g(x, y),
//	X = {x : B x = e} (Settings.ProjectX),  Y(x) = {y : A y + h(x) = c} (Lower).
//
// Iteration k:
//
//	y^{k,s+1} = Proj_Y(x_k)(y^{k,s} − β ∇y g(x_k, y^{k,s}; φ^{k,s})),  s < S   (eq. 5)
//	u = −V₂(V₂ᵀ∇yy g V₂)⁻¹V₂ᵀ∇y f  estimated by the Neumann series of eq. 9b
//	h_f = ∇x f(x_k, y_{k+1}; ξ^k) + ∇xy g(φ_(0)) u − ∇h(x_k)ᵀA⁺ᵀ(∇yy g(φ_(0)) u + ∇y f)   (eqs. 8, 9a, 9b)
//	x_{k+1} = Proj_X(x_k − α h_f)
//
// The Neumann series is matrix-free: it applies the projector P_y = I − A⁺A
// to Hessian-vector products, never forming V₂ or a Hessian (see
// NeumannEstimator). Iteration cost: S GradG, 1 GradF, J HVPs for the series
// (J = N' ~ U{0..N−1}, N−1 for NeumannPartialSum, the CG steps for
// ExactInverse), 1 MixedXY, plus 1 HVP
// and one Coupling VJP when the lower set is coupled (h ≠ 0); S lower,
// 1 upper and J+1 implicit projections (RoundsOf).
//
// Settings.ProjectX is X: any Projection works (projected SGD), and the
// paper's X = {B x = e} is NewLinearEquality (B of any rank) or NewAffine.
// Settings.ProjectY is rejected: the lower set, which may depend on x, is
// Lower. After every iteration y_{k+1} ∈ Y(x_k) and x_{k+1} ∈ X; y_0 need
// not be feasible. With all batch sizes 0 and NeumannPartialSum the method is
// deterministic.
//
// Iteration.HypergradNorm is ‖x_k − x_{k+1}‖/α, which for x_k ∈ X and an
// affine X is ‖P_x h_f‖, the stationarity measure of eq. 4 (Lemma 1).
type AiPOD struct {
	// Alpha is the upper-level step α. It has no default (0 is an error);
	// Theorem 1 takes α = O(1/√K).
	Alpha float64
	// Beta is the lower-level step β; 0 means 1/L, L the largest eigenvalue
	// of ∇yy g at (x0, y0) on the whole lower data set (≈ ℓ_g,1; β ≤ 1/ℓ_g,1
	// by Lemma 14), estimated once in Init by min(30, DimY) Lanczos steps
	// (as many HVPs), as for AIDBiO.Alpha.
	Beta float64
	// S is the number of lower-level steps per iteration; 0 means 5 (the
	// synthetic experiment, paper 004 Appendix F).
	S int
	// N is the Neumann horizon of eq. 9b; 0 means 10.
	N int
	// Eta is the Neumann step c̃/ℓ_g,1 of eq. 9b; 0 means 1/L (c̃ = 1).
	Eta float64
	// Series selects the Neumann estimator (or ExactInverse); the zero
	// value is the paper's NeumannRandomTerm.
	Series NeumannEstimator
	// Lower is the lower-level set Y(x); nil means y is unconstrained
	// (A = 0, h = 0).
	Lower *LowerEquality
	// InnerBatch is |φ^{k,s}| (lower data) of each lower step; HessianBatch
	// is |φ_(n)| (lower data) of each HVP of the series and of the batch
	// φ_(0) shared by the mixed product and the coupling HVP; UpperBatch is
	// |ξ^k| (upper data). 0 means the whole data set.
	InnerBatch, HessianBatch, UpperBatch int
}

// EAiPOD is E-AiPOD, the projection-efficient AiPOD of paper 004
// (Algorithms 2 and 3). Iteration k:
//
//	lower (Algorithm 3, ProxSkip), s < S, one shared coin θ ~ Bernoulli(p):
//	  ŷ = y − β(∇y g(x_k, y; φ^{k,s}) − r)                              (10a)
//	  θ = 1: y = Proj_Y(x_k)(ŷ − (β/p) r),  r = r + (p/β)(y − ŷ)          (10b, 10c)
//	  θ = 0: y = ŷ
//	w_k = the correction of eq. 9b at (x_k, y_{k+1}), as in AiPOD
//	x^{k,t+1} = x^{k,t} − α (∇x f(x^{k,t}, y_{k+1}; ξ^{k,t}) + w_k),  t < T   (11a, 11b)
//	x_{k+1} = x_k + δ (Proj_X(x^{k,T}) − x_k)                                (12)
//
// The control variate r (State.Vecs "eaipod.r", r_0 = 0) carries over
// iterations and tends to ∇y g(x, y*(x)). Eq. 12 is written
// (1 − δ)x_k + δ Proj_X(x^{k,T}) in the paper; the form used here is the same
// and is what Algorithm 6 aggregates. ξ^{k,0} = ξ^k: the t = 0 step reuses
// the ∇x f of the GradF call that gives ∇y f for w_k, so T = 1, p = 1 is
// AiPOD up to rounding.
//
// Using w_k for all T local steps adds an error of order α²T² (Lemma 18).
// Iteration cost: S GradG, T GradF, J HVPs (+1 if h ≠ 0), 1 MixedXY;
// lower projections ~ Binomial(S, p), 1 upper and J+1 implicit ones.
// y_{k+1} is feasible only if the last lower step drew θ = 1 (ProxSkip leaves
// y infeasible between projections by design); x_{k+1} ∈ X when X is affine
// (then δ > 1 keeps x in X); δ ≠ 1 is rejected for other sets.
// Iteration.HypergradNorm is ‖x_k − x_{k+1}‖/(αδT).
type EAiPOD struct {
	// Alpha, Beta, S, N, Eta, Series, Lower and the batch sizes are as in
	// AiPOD; every t ≥ 1 local step draws a fresh UpperBatch.
	Alpha, Beta float64
	S, N        int
	Eta         float64
	Series      NeumannEstimator
	Lower       *LowerEquality
	// P is the probability p of a lower-level projection; 0 means 0.3 (the
	// synthetic experiment, paper 004 Appendix F). Theorem 2 takes
	// p = O(√β); 1 projects at every step.
	P float64
	// T is the number of local upper steps per projection; 0 means 1.
	T int
	// Delta is the extrapolation δ ≥ 1 of eq. 12; 0 means 1 (Corollary 1;
	// Corollary 2 takes δ = √T with an O(T) lower batch).
	Delta float64

	InnerBatch, HessianBatch, UpperBatch int
}

// E2AiPOD is E2-AiPOD, paper 004 Algorithms 4 and 5, for lower sets that do
// not depend on x (h = 0). Iteration k:
//
//	lower: S ProxSkip steps as in EAiPOD (Algorithm 3)
//	medium (Algorithm 4), u^{k,0} = e^{k,0} = 0, n < N, one coin θ̃ ~ Bernoulli(q):
//	  û = u − ρ (∇y f(x_k, y_{k+1}; ξ_(n)) + ∇yy g(x_k, y_{k+1}; φ_(n)) u − e)   (17a)
//	  θ̃ = 1: u = P_y (û − (ρ/q) e),  e = e + (q/ρ)(u − û)                      (17b, 17c)
//	  θ̃ = 0: u = û
//	d_f = ∇x f(x_k, y_{k+1}; ξ^k) + ∇xy g(x_k, y_{k+1}; φ^k) u^{k,N}              (18a)
//	x_{k+1} = Proj_X(x_k − α d_f) if k mod T = 0, else x_k − α d_f              (18b)
//
// u tends to u*(x, y) of eq. 15, the minimizer of the quadratic of Lemma 4
// over Ker A, and d_f uses "+ ∇xy g u" as eq. 18a does with eq. 15 (the
// appendix writes d̄_f = ∇x f − ∇xy g u at line 1467, a sign slip). ξ_(0) = ξ^k: one GradF call gives ∇x f and the first ∇y f; the
// steps n ≥ 1 draw fresh upper batches (none when UpperBatch is 0, since
// the whole data set gives the same ∇y f). Iteration cost: S GradG,
// 1 + (N−1)·[UpperBatch > 0] GradF, N−1 HVPs (N with WarmStart), 1 MixedXY;
// lower projections ~ Binomial(S, p), implicit ones ~ Binomial(N, q), and
// one upper projection every T iterations.
//
// Between upper projections x leaves X (the analysis uses x̄_k = Proj_X(x_k),
// line 401); x_{k+1} ∈ X after iterations with k mod T = 0. With T > 1 and
// a constant α, x̄ settles in a neighbourhood of x* of radius O(αT) (the
// O(α²T²) term of Theorem 3's bound on ‖∇F‖²), so Corollary 3 lets α shrink
// as T grows: α = O(1/√K), T = O(K^{1/4}).
// Iteration.HypergradNorm is ‖x_k − x_{k+1}‖/α: ‖P_x d_f‖ after a projection
// from x_k ∈ X, ‖d_f‖ otherwise.
//
// Paper 004's Theorem 3 states N = O(log 1/α), but its proof needs
// (1 − ρμ_g/2)^N = O(α²) (lines 1557, 1738): take N ≫ 1/(ρμ_g), or
// WarmStart.
type E2AiPOD struct {
	// Alpha, Beta, S, P, T and the batch sizes are as in EAiPOD; Lower
	// must not be coupled (h = nil). HessianBatch is |φ_(n)| of each
	// medium-level HVP and |φ^k| of the mixed product.
	Alpha, Beta float64
	S           int
	P           float64
	T           int
	Lower       *LowerEquality
	// Rho is the medium-level step ρ; 0 means 1/L (Theorem 3: ρ ≤ 1/ℓ_g,1).
	Rho float64
	// Q is the probability q of a medium-level projection; 0 means 0.3
	// (Theorem 3 takes q = O(√ρ); the paper runs no E2-AiPOD experiment).
	Q float64
	// N is the number of medium-level steps; 0 means 10.
	N int
	// WarmStart starts the medium level from the previous iteration's u and
	// e (State.Vecs "e2aipod.u", "e2aipod.e") instead of 0 as in Algorithm
	// 4. The paper's text sets e^{k+1} = e^{k,N} (line 381), which suggests
	// it; false follows Algorithm 4.
	WarmStart bool

	InnerBatch, HessianBatch, UpperBatch int
}

var (
	_ Method = AiPOD{}
	_ Method = EAiPOD{}
	_ Method = E2AiPOD{}
)

// rejectProjectY returns an error if the run has Settings.ProjectY.
func rejectProjectY(method string, st *State) error {
	if _, py := st.Projections(); py != nil {
		return fmt.Errorf("%s: remove Settings.ProjectY and set %s.Lower (the lower set of paper 004 may depend on x)", method, method)
	}
	return nil
}

// Init implements Method. It estimates L if Beta or Eta is 0.
func (m AiPOD) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "AiPOD", checks: []error{
		aipodCheckAlpha("AiPOD.Alpha", m.Alpha),
		checkStep("AiPOD.Beta", m.Beta),
		checkStep("AiPOD.Eta", m.Eta),
		checkCount("AiPOD.S", m.S),
		checkCount("AiPOD.N", m.N),
		aipodCheckSeries("AiPOD.Series", m.Series),
		aipodCheckLower("AiPOD.Lower", p, m.Lower),
		checkBatch(p, "AiPOD.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "AiPOD.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "AiPOD.UpperBatch", m.UpperBatch, Upper),
		rejectProjectY("AiPOD", st),
	}, steps: []float64{m.Beta, m.Eta}}.run(p, st)
}

// Iterate implements Method.
func (m AiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dx := p.DimX()
	e := &aipodEnv{p: p, st: st, m: 1, set: m.Lower, x: [][]float64{st.X}, y: [][]float64{st.Y}}
	if err := e.atX(); err != nil {
		return Iteration{}, err
	}
	e.projectedLower(stepOrDefault(m.Beta, st), count(m.S, 5), m.InnerBatch)
	h, c := st.Work("aipod.h", dx), st.Work("aipod.c", dx)
	if err := e.hypergradient(h, c, stepOrDefault(m.Eta, st), count(m.N, 10), m.Series, m.HessianBatch, m.UpperBatch); err != nil {
		return Iteration{}, err
	}
	old := st.Work("aipod.xold", dx)
	copy(old, st.X)
	for i, hi := range h {
		st.X[i] -= m.Alpha * hi // eq. 9a, Algorithm 1 line 7
	}
	e.count(keyRoundsUpper)
	st.ProjectX(st.X)
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, m.Alpha)}, nil
}

// Init implements Method. It allocates the control variate r (zeros) and
// estimates L if Beta or Eta is 0.
func (m EAiPOD) Init(p oracle.Problem, st *State) error {
	px, _ := st.Projections()
	err := methodInit{name: "EAiPOD", checks: []error{
		m.check("EAiPOD", p),
		rejectProjectY("EAiPOD", st),
		checkDelta("EAiPOD.Delta", m.Delta, px),
	}, steps: []float64{m.Beta, m.Eta}}.run(p, st)
	if err != nil {
		return err
	}
	st.Vec("eaipod.r", p.DimY())
	return nil
}

func (m EAiPOD) check(name string, p oracle.Problem) error {
	return firstErr(
		aipodCheckAlpha(name+".Alpha", m.Alpha),
		checkStep(name+".Beta", m.Beta),
		checkStep(name+".Eta", m.Eta),
		checkCount(name+".S", m.S),
		checkCount(name+".N", m.N),
		checkCount(name+".T", m.T),
		aipodCheckProb(name+".P", m.P),
		aipodCheckSeries(name+".Series", m.Series),
		aipodCheckLower(name+".Lower", p, m.Lower),
		checkBatch(p, name+".InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, name+".HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, name+".UpperBatch", m.UpperBatch, Upper),
	)
}

// checkDelta validates δ of eq. 12: ≥ 1 (0: 1), and 1 unless X is affine.
func checkDelta(name string, delta float64, px Projection) error {
	if delta == 0 || delta == 1 {
		return nil
	}
	if !(delta >= 1) || math.IsInf(delta, 1) {
		return fmt.Errorf("%s = %v: set δ ≥ 1 (paper 004 eq. 12), or 0 for 1", name, delta)
	}
	switch px.(type) {
	case nil, *Affine, *LinearEquality:
		return nil
	}
	return fmt.Errorf("%s = %v: extrapolation keeps x feasible only for an affine set, but Settings.ProjectX is %T: use δ = 1", name, delta, px)
}

// Iterate implements Method.
func (m EAiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	e := &aipodEnv{p: p, st: st, m: 1, set: m.Lower, x: [][]float64{st.X}, y: [][]float64{st.Y}}
	r := [][]float64{st.Vec("eaipod.r", p.DimY())}
	return m.iterate(e, r)
}

// iterate is one iteration of E-AiPOD on the client of e (Algorithm 2; the
// federated form, FedEAiPOD, sends these formulas to its clients). It
// starts from x = st.X, which it returns updated.
func (m EAiPOD) iterate(e *aipodEnv, r [][]float64) (Iteration, error) {
	p, st := e.p, e.st
	dx := p.DimX()
	if err := e.atX(); err != nil {
		return Iteration{}, err
	}
	e.proxSkipLower(r, stepOrDefault(m.Beta, st), aipodFloat(m.P, 0.3), count(m.S, 5), m.InnerBatch)
	h, c := st.Work("eaipod.h", e.m*dx), st.Work("eaipod.c", e.m*dx)
	if err := e.hypergradient(h, c, stepOrDefault(m.Eta, st), count(m.N, 10), m.Series, m.HessianBatch, m.UpperBatch); err != nil {
		return Iteration{}, err
	}
	// 11a, 11b: T local steps from x_k with the delayed cross term C·v of
	// x_k, the hypergradient at x^{k,t} on a fresh upper batch for t ≥ 1.
	alpha, t := m.Alpha, count(m.T, 1)
	xl, g := e.works("eaipod.xl", dx), st.Work("eaipod.g", dx)
	gy, cs := st.Work("eaipod.gy", p.DimY()), st.Work("eaipod.cs", dx)
	for k := range e.m {
		ck, y := c[k*dx:(k+1)*dx], e.y[k]
		copy(xl[k], st.X)
		copy(g, h[k*dx:(k+1)*dx])
		for step := range t {
			if step > 0 {
				_, err := implicit.Estimate(g, gy, implicit.System{
					Gradient: func(gx, _ []float64) { p.GradF(gx, nil, xl[k], y, e.batch(Upper, k, m.UpperBatch)) },
					Cross:    func(dst, _ []float64) { copy(dst, ck) },
				}, gy, cs)
				if err != nil {
					return Iteration{}, err
				}
			}
			for i, gi := range g {
				xl[k][i] -= alpha * gi
			}
		}
	}
	// 12: x_{k+1} = x_k + δ (Proj_X(x^{k,T}) − x_k).
	xbar, old := st.Work("eaipod.xbar", dx), st.Work("eaipod.xold", dx)
	e.projectUpper(xbar, xl)
	copy(old, st.X)
	delta := aipodFloat(m.Delta, 1)
	for i, xb := range xbar {
		st.X[i] += delta * (xb - st.X[i])
	}
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, alpha*delta*float64(t))}, nil
}

// Init implements Method. It allocates the control variate r (and u, e with
// WarmStart) and estimates L if Beta or Rho is 0.
func (m E2AiPOD) Init(p oracle.Problem, st *State) error {
	err := methodInit{name: "E2AiPOD", checks: []error{
		m.check("E2AiPOD", p),
		rejectProjectY("E2AiPOD", st),
	}, steps: []float64{m.Beta, m.Rho}}.run(p, st)
	if err != nil {
		return err
	}
	dy := p.DimY()
	st.Vec("e2aipod.r", dy)
	if m.WarmStart {
		st.Vec("e2aipod.u", dy)
		st.Vec("e2aipod.e", dy)
	}
	return nil
}

func (m E2AiPOD) check(name string, p oracle.Problem) error {
	err := firstErr(
		aipodCheckAlpha(name+".Alpha", m.Alpha),
		checkStep(name+".Beta", m.Beta),
		checkStep(name+".Rho", m.Rho),
		checkCount(name+".S", m.S),
		checkCount(name+".N", m.N),
		checkCount(name+".T", m.T),
		aipodCheckProb(name+".P", m.P),
		aipodCheckProb(name+".Q", m.Q),
		aipodCheckLower(name+".Lower", p, m.Lower),
		checkBatch(p, name+".InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, name+".HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, name+".UpperBatch", m.UpperBatch, Upper),
	)
	if err == nil && m.Lower != nil && m.Lower.Coupled() {
		err = errors.New(name + ".Lower depends on x (h ≠ 0), but E2-AiPOD requires h = 0 (paper 004 Section 4): use EAiPOD or AiPOD")
	}
	return err
}

// Iterate implements Method.
func (m E2AiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dy := p.DimY()
	e := &aipodEnv{p: p, st: st, m: 1, set: m.Lower, x: [][]float64{st.X}, y: [][]float64{st.Y}}
	r := [][]float64{st.Vec("e2aipod.r", dy)}
	var u, ev []float64
	if m.WarmStart {
		u, ev = st.Vec("e2aipod.u", dy), st.Vec("e2aipod.e", dy)
	} else {
		u, ev = st.Work("e2aipod.u", dy), st.Work("e2aipod.e", dy)
	}
	old := st.Work("e2aipod.xold", p.DimX())
	copy(old, st.X)
	if err := m.iterate(e, r, u, ev); err != nil {
		return Iteration{}, err
	}
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, m.Alpha)}, nil
}

// iterate is one iteration of E2-AiPOD on the client of e (Algorithm 5;
// the federated form, FedE2AiPOD, sends these formulas to its clients),
// updating x in place. u and ev are the clients' medium-level variables
// (M·d_y, client-major); they are zeroed here unless WarmStart. d_f of eq.
// 18a is implicit.Estimate whose solve is the medium level and whose cross
// term is −∇xy g u (u ≈ −H⁻¹∇y f is the paper's sign).
func (m E2AiPOD) iterate(e *aipodEnv, r [][]float64, u, ev []float64) error {
	p, st := e.p, e.st
	dx, dy := p.DimX(), p.DimY()
	if err := e.atX(); err != nil {
		return err
	}
	e.proxSkipLower(r, stepOrDefault(m.Beta, st), aipodFloat(m.P, 0.3), count(m.S, 5), m.InnerBatch)
	h := st.Work("e2aipod.h", e.m*dx)
	_, err := implicit.Estimate(h, u, implicit.System{
		Gradient: func(gx, gy []float64) {
			for c := range e.m {
				p.GradF(gx[c*dx:(c+1)*dx], gy[c*dy:(c+1)*dy], e.x[c], e.y[c], e.batch(Upper, c, m.UpperBatch))
			}
		},
		Solve: func(u, fy []float64) (implicit.Stats, error) {
			if !m.WarmStart {
				clear(u)
				clear(ev)
			}
			e.mediumLevel(aipodViews(u, e.m, dy), aipodViews(ev, e.m, dy), aipodViews(fy, e.m, dy),
				stepOrDefault(m.Rho, st), aipodFloat(m.Q, 0.3), count(m.N, 10), m.HessianBatch, m.UpperBatch, !m.WarmStart)
			return implicit.Stats{}, nil
		},
		Cross: func(dst, u []float64) {
			for c := range e.m {
				w := dst[c*dx : (c+1)*dx]
				p.MixedXY(w, e.x[c], e.y[c], u[c*dy:(c+1)*dy], e.batch(Lower, c, m.HessianBatch))
				for i := range w {
					w[i] = -w[i]
				}
			}
		},
	}, st.Work("e2aipod.fy", e.m*dy), st.Work("e2aipod.w", e.m*dx))
	if err != nil {
		return err
	}
	for c := range e.m {
		x := e.x[c]
		for i, hi := range h[c*dx : (c+1)*dx] {
			x[i] -= m.Alpha * hi // 18a, 18b
		}
	}
	if st.Iter%count(m.T, 1) == 0 {
		xbar := st.Work("e2aipod.xbar", dx)
		e.projectUpper(xbar, e.x)
		for _, x := range e.x {
			copy(x, xbar)
		}
	}
	return nil
}
