package optim

// The shared machinery of the AiPOD family of paper 004 (Xiao, Shen, Yin,
// Chen, shared/papers/004_0b814357b1b03328.txt): the lower-level steps
// (projected SGD, eq. 5; ProxSkip, eqs. 10a–c), the matrix-free projected
// Neumann estimate of the constrained implicit gradient (eqs. 8, 9b), the
// medium-level ProxSkip of E2-AiPOD (eqs. 17a–c) and the projection and
// communication counters. The hypergradient itself is implicit.Estimate
// with implicit.Neumann on the clients' projected products.
//
// The routines work on "clients", each with its own x_m and y_m: a
// centralized method is one client whose projections are those onto X and
// Y(x). The federated methods of Section 5 (fedclients.go, aipod_fed.go)
// send the same formulas to their clients, so a federated method with one
// client that owns the whole data set performs exactly the floating point
// operations of its centralized form without constraints.

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// Rounds counts the projections of a method of the AiPOD family. In the
// federated forms every projection is an average over the clients, that is
// one communication round (paper 004, Section 5, line 462), so Rounds counts
// communication rounds. A projection step of the algorithm is counted also
// when its set is the whole space (no constraint, or one client).
type Rounds struct {
	// Lower counts lower-level projections: Proj_Y(x) in eq. 5 (AiPOD),
	// the projections that ProxSkip draws in eq. 10b (E-AiPOD, E2-AiPOD;
	// Algorithm 7 in the federated form) or, for FedNest, the rounds of
	// FedInn (two per call: the clients' gradients and their y).
	Lower int64
	// Upper counts explicit upper-level projections: Proj_X after the
	// x-update (Algorithm 1 line 7, eq. 12, eq. 18b), the averaging of the
	// clients' x (Algorithm 6), or FedOut's two rounds (FedNest: the
	// clients' hypergradients and their x).
	Upper int64
	// Implicit counts the upper-level projections inside the hypergradient:
	// one P_y (a round averaging ∇y f or Hessian-vector products, Algorithm
	// 8) per term of the Neumann series (9b) for AiPOD, E-AiPOD and
	// FedNest, and the medium-level projections of eq. 17b
	// (Algorithm 9) for E2-AiPOD. Paper 004 counts them as upper-level
	// projections ("UL: K + KN", Corollary 2).
	Implicit int64
}

// UpperTotal returns Upper + Implicit, the paper's upper-level count.
func (r Rounds) UpperTotal() int64 { return r.Upper + r.Implicit }

// State.Scalars keys of the counters.
const (
	keyRoundsLower    = "aipod.rounds.lower"
	keyRoundsUpper    = "aipod.rounds.upper"
	keyRoundsImplicit = "aipod.rounds.implicit"
)

// RoundsOf returns the cumulative projection (communication) counts of a run
// of AiPOD, EAiPOD, E2AiPOD, FedEAiPOD, FedE2AiPOD or FedNest, saved
// in st.Scalars. To plot a figure against communication rounds, run Solve
// for a few iterations and then Resume in chunks, reading RoundsOf between
// chunks: resumed runs are bit for bit the uninterrupted one.
func RoundsOf(st *State) Rounds {
	return Rounds{
		Lower:    int64(st.Scalars[keyRoundsLower]),
		Upper:    int64(st.Scalars[keyRoundsUpper]),
		Implicit: int64(st.Scalars[keyRoundsImplicit]),
	}
}

// NeumannEstimator selects the estimator of the constrained inverse-Hessian
// product V₂(V₂ᵀ∇yy g V₂)⁻¹V₂ᵀ ∇y f in eq. 9b of paper 004. With P = P_y and
// η the Neumann step, both estimate the N-term partial sum
//
//	η Σ_{j=0}^{N−1} (P − η P H P)^j P ∇y f.
type NeumannEstimator int

const (
	// NeumannRandomTerm is the estimator of eq. 9b: one term j = N' with N' drawn
	// uniformly from {0, …, N−1}, scaled by N, which is unbiased for the
	// partial sum; N' Hessian-vector products (mean (N−1)/2), each on an
	// independent batch.
	NeumannRandomTerm NeumannEstimator = iota
	// NeumannPartialSum computes the whole partial sum: N−1 Hessian-vector
	// products, no randomness. It makes the deterministic problem
	// deterministic.
	NeumannPartialSum
	// ExactInverse is not a Neumann estimate but the limit the series
	// estimates: the projected system P ∇yy g(φ_(1)) P v = P ∇y f solved on
	// one batch per client by conjugate gradient, from v = 0 (which keeps
	// the iterates in range(P)) to a relative residual of 10⁻¹⁰, at most
	// d_y steps of one Hessian-vector product and one implicit round each.
	// It is the exact inverse that the authors' companion code used in the
	// synthetic experiment of §6.1, where ∇yy g = I: there one step gives
	// v = P ∇y f, while eq. 9b with η = 1/L = 1 gives N·P ∇y f with
	// probability 1/N and 0 otherwise (every factor P − ηP I P is 0).
	ExactInverse
)

func (s NeumannEstimator) String() string {
	switch s {
	case NeumannRandomTerm:
		return "NeumannRandomTerm"
	case NeumannPartialSum:
		return "NeumannPartialSum"
	case ExactInverse:
		return "ExactInverse"
	}
	return fmt.Sprintf("NeumannEstimator(%d)", int(s))
}

// aipodEnv is one iteration's view of the clients of an AiPOD-family run.
type aipodEnv struct {
	p  oracle.Problem
	st *State
	m  int
	// set is the lower constraint Y(x) of a centralized run (nil: none);
	// coef locates the minimum-norm point of Y(x_k) (see atX).
	set  *LowerEquality
	coef []float64
	// x and y are the clients' variables.
	x, y [][]float64
}

// atX prepares the projection onto Y(x) for the current x (client 0 of a
// centralized run), checking Assumption 4 of paper 004 there.
func (e *aipodEnv) atX() error {
	if e.set == nil {
		return nil
	}
	c, err := e.set.coefAt(e.x[0])
	e.coef = c
	return err
}

// works returns M scratch vectors of length n, one per client.
func (e *aipodEnv) works(name string, n int) [][]float64 {
	flat := e.st.Work(name, e.m*n)
	return aipodViews(flat, e.m, n)
}

// aipodViews cuts flat into m consecutive vectors of length n.
func aipodViews(flat []float64, m, n int) [][]float64 {
	v := make([][]float64, m)
	for i := range v {
		v[i] = flat[i*n : (i+1)*n : (i+1)*n]
	}
	return v
}

// aipodSame returns m references to v (clients that share one consensus value).
func aipodSame(v []float64, m int) [][]float64 {
	s := make([][]float64, m)
	for i := range s {
		s[i] = v
	}
	return s
}

// batch draws a batch of size elements of the data set (State.Batch).
func (e *aipodEnv) batch(set DataSet, _, size int) []int {
	return e.st.Batch(e.p, set, size)
}

// aipodMean stores (1/M) Σ_m v_m in dst, the server average of eq. 24. With one
// client it is an exact copy.
func aipodMean(dst []float64, v [][]float64) {
	copy(dst, v[0])
	for _, w := range v[1:] {
		floats.Add(dst, w)
	}
	if len(v) > 1 {
		floats.Scale(1/float64(len(v)), dst)
	}
}

func (e *aipodEnv) count(key string) { e.st.Scalars[key]++ }

// projectLower sets every y_m to the lower-level projection of the z_m:
// Proj_Y(x_k)(z_0) for a centralized run, the average of the z_m (eq. 24b)
// for a federated one. One lower round.
func (e *aipodEnv) projectLower(z [][]float64) {
	e.count(keyRoundsLower)
	if e.set != nil {
		e.set.set.projectCoef(e.y[0], z[0], e.coef)
		return
	}
	aipodMean(e.y[0], z)
	for _, y := range e.y[1:] {
		copy(y, e.y[0])
	}
}

// implicit stores in dst the implicit projection of the t_m: P_y t_0 for a
// centralized run (t_0 itself without a lower set), the average for a
// federated one. One implicit round.
func (e *aipodEnv) implicit(dst []float64, t [][]float64) {
	e.count(keyRoundsImplicit)
	if e.set != nil {
		e.set.Null(dst, t[0])
		return
	}
	aipodMean(dst, t)
}

// projectUpper stores in dst the upper-level projection of the x_m:
// Proj_X(x_0) by Settings.ProjectX for one client, the average (eq. 24a)
// for several. One upper round. dst must not be one of xs.
func (e *aipodEnv) projectUpper(dst []float64, xs [][]float64) {
	e.count(keyRoundsUpper)
	aipodMean(dst, xs)
	if e.m == 1 {
		e.st.ProjectX(dst)
	}
}

// projectedLower runs s projected SGD steps on every client (eq. 5,
// Algorithm 1 lines 3–5): y_m ← Proj(y_m − β ∇y g_m(x_m, y_m; φ)).
func (e *aipodEnv) projectedLower(beta float64, s, size int) {
	dy := e.p.DimY()
	gy := e.st.Work("aipod.gy", dy)
	z := e.works("aipod.z", dy)
	for range s {
		for m := range e.m {
			e.p.GradG(nil, gy, e.x[m], e.y[m], e.batch(Lower, m, size))
			floats.AddScaledTo(z[m], e.y[m], -beta, gy)
		}
		e.projectLower(z)
	}
}

// proxSkipLower runs s ProxSkip steps (Algorithm 3, eqs. 10a–c; Algorithm 7
// in the federated form) on every client with control variates r_m:
//
//	ŷ_m = y_m − β (∇y g_m(x_m, y_m; φ) − r_m)                     (10a)
//	with probability p (one coin θ shared by all clients):
//	  y_m = Proj(ŷ_m − (β/p) r_m),  r_m += (p/β)(y_m − ŷ_m)       (10b, 10c)
//	otherwise y_m = ŷ_m.
//
// Algorithm 7 line 7 prints the factor of 10c as β/β; it is p/β as in 10c
// (paper 004 line 1803). Line 4 evaluates ∇y g at x_m^{k,s}; x does not move
// during the lower loop, so that is x_m^k.
func (e *aipodEnv) proxSkipLower(r [][]float64, beta, p float64, s, size int) {
	dy := e.p.DimY()
	gy := e.st.Work("aipod.gy", dy)
	yh, z := e.works("aipod.yhat", dy), e.works("aipod.z", dy)
	bp, pb := beta/p, p/beta
	for range s {
		for m := range e.m {
			e.p.GradG(nil, gy, e.x[m], e.y[m], e.batch(Lower, m, size))
			y, rm, h := e.y[m], r[m], yh[m]
			for i := range h {
				h[i] = y[i] - beta*(gy[i]-rm[i]) // 10a
			}
		}
		if e.st.Rand().Float64() >= p {
			for m := range e.m {
				copy(e.y[m], yh[m])
			}
			continue
		}
		for m := range e.m {
			rm, h, zm := r[m], yh[m], z[m]
			for i := range zm {
				zm[i] = h[i] - bp*rm[i]
			}
		}
		e.projectLower(z) // 10b
		for m := range e.m {
			y, rm, h := e.y[m], r[m], yh[m]
			for i := range rm {
				rm[i] += pb * (y[i] - h[i]) // 10c
			}
		}
	}
}

// hypergradient writes to h (M·d_x, client-major) every client's
// estimate of the constrained implicit gradient of eq. 9b,
//
//	h_m = ∇x f_m(φ) − C_m·v,   v ≈ V₂ (V₂ᵀ ∇yy g V₂)⁻¹ V₂ᵀ ∇y f = −u*   (eq. 15)
//
// as one implicit.Estimate over the clients, and leaves the cross terms C_m·v
// in c (M·d_x), E-AiPOD's delayed correction. With P = P_y (the implicit
// projection: P_y for a centralized run, the server average for a
// federated one, Algorithm 8), v is the Neumann estimate on the operator
// v ↦ P(∇yy g v) with right-hand side P ∇y f:
//
//	z_0 = P ∇y f,   z_n = z_{n−1} − η P (∇yy g(φ_(n)) z_{n−1}),
//	v = ηN z_{N'} (NeumannRandomTerm)   or   v = η Σ_{n=0}^{N−1} z_n (NeumannPartialSum),
//
// (implicit.Neumann on a per-step source: each step draws a fresh batch
// φ_(n) per client and is one implicit round), which equals
// V₂[η N Π (I − η V₂ᵀ H_n V₂)]V₂ᵀ ∇y f because V₂V₂ᵀ = P and V₂ᵀV₂ = I;
// or, with ExactInverse, v solves P ∇yy g(φ_(1)) v = P ∇y f by conjugate
// gradient on the same operator with one batch φ_(1) per client.
// Algorithm 8 scales v_0 by c̃N/ℓ first and averages (I − ηH_m) v; scaling
// at the end and averaging H_m v is the same linear map. The product has
// N' factors, n = 1..N', as in eq. 9b (Lemma 11, line 892, writes
// n = 0..N'). The cross term is C_m·v = ∇xy g_m(φ_(0)) v on one fresh
// batch per client, plus ∇h(x)ᵀ A⁺ᵀ (∇y f − ∇yy g(φ_(0)) v) for a
// centralized run with a coupled lower set (h ≠ 0; one more HVP). Sign:
// paper 004 writes u = −v and h_f = ∇x f + ∇xy g u − ∇h(x)ᵀA⁺ᵀ(∇yy g u +
// ∇y f) (eq. 9b; Algorithm 8 line 13 writes w = −∇xy g v and Algorithm 6
// then subtracts it); the products are the same. Costs 1 + J implicit
// rounds and J HVPs per client, J = N', N−1 or the CG steps, and one GradF
// and one MixedXY per client, the upper batches drawn first.
func (e *aipodEnv) hypergradient(h, c []float64, eta float64, n int, series NeumannEstimator, hb, ub int) error {
	dx, dy := e.p.DimX(), e.p.DimY()
	fy, t := e.works("aipod.fy", dy), e.works("aipod.nt", dy)
	v := e.st.Work("aipod.v", dy)
	clear(v) // a cold start
	var truncate func(int) int
	if series == NeumannRandomTerm {
		truncate = e.st.Rand().IntN
	}
	// Step n's operator: a fresh batch φ_(n) per client, then P of the
	// clients' products (one implicit round).
	ops := func(int) implicit.Operator {
		batches := make([][]int, e.m)
		for m := range e.m {
			batches[m] = e.batch(Lower, m, hb)
		}
		return func(dst, z []float64) {
			for m := range e.m {
				e.p.HVP(t[m], e.x[m], e.y[m], z, batches[m])
			}
			e.implicit(dst, t)
		}
	}
	solve := neumannSeries(n, eta, math.Inf(1), truncate, ops)
	if series == ExactInverse {
		solve = func(v, b []float64) (implicit.Stats, error) { return cgOn(ops(1), dy, 1e-10)(v, b) }
	}
	_, err := implicit.Estimate(h, v, implicit.System{
		Gradient: func(gx, gy []float64) {
			for m := range e.m {
				e.p.GradF(gx[m*dx:(m+1)*dx], fy[m], e.x[m], e.y[m], e.batch(Upper, m, ub))
			}
			e.implicit(gy, fy) // z_0 = P ∇y f
		},
		Solve: solve,
		Cross: func(dst, v []float64) {
			for m := range e.m {
				e.cross(dst[m*dx:(m+1)*dx], v, fy[0], m, hb)
			}
		},
	}, e.st.Work("aipod.gy", dy), c)
	return err
}

// cross stores in dst client m's cross term of eq. 9b at v, on one fresh
// batch φ_(0): ∇xy g_m(φ_(0)) v, plus ∇h(x)ᵀ A⁺ᵀ (∇y f − ∇yy g(φ_(0)) v)
// for a centralized run with a coupled lower set; fy0 is ∇y f of client 0.
func (e *aipodEnv) cross(dst, v, fy0 []float64, m, hb int) {
	dx, dy := e.p.DimX(), e.p.DimY()
	b := e.batch(Lower, m, hb)
	e.p.MixedXY(dst, e.x[m], e.y[m], v, b)
	if e.set == nil || e.set.h == nil {
		return
	}
	hv, g := e.st.Work("aipod.hv", dy), e.st.Work("aipod.hterm", dx)
	e.p.HVP(hv, e.x[m], e.y[m], v, b)
	floats.SubTo(hv, fy0, hv)
	e.set.hTerm(g, e.x[m], hv)
	floats.Add(dst, g)
}

// mediumLevel runs n steps of the medium-level ProxSkip of E2-AiPOD
// (Algorithm 4, eqs. 17a–c; Algorithm 9 in the federated form) on the
// clients' u_m and e_m:
//
//	û_m = u_m − ρ (∇y f_m(ξ_(n)) + ∇yy g_m(φ_(n)) u_m − e_m)        (17a)
//	with probability q (one shared coin):
//	  u_m = P(û_m − (ρ/q) e_m),  e_m += (q/ρ)(u_m − û_m)           (17b, 17c)
//	otherwise u_m = û_m,
//
// P = V₂V₂ᵀ = P_y (the average for a federated run). fy holds ∇y f_m on
// ξ_(0); steps n ≥ 1 draw fresh upper batches of size ob, or reuse fy when
// ob = 0 (the whole data set gives the same vector). When cold (u_m = 0 at
// step 0) the first HVP is skipped.
func (e *aipodEnv) mediumLevel(u, ev, fy [][]float64, rho, q float64, n, hb, ob int, cold bool) {
	dy := e.p.DimY()
	uh, z := e.works("aipod.uhat", dy), e.works("aipod.mz", dy)
	hu, g := e.st.Work("aipod.mhu", dy), e.st.Work("aipod.mfy", dy)
	rq, qr := rho/q, q/rho
	for step := range n {
		for m := range e.m {
			gy := fy[m]
			if step > 0 && ob > 0 {
				e.p.GradF(nil, g, e.x[m], e.y[m], e.batch(Upper, m, ob))
				gy = g
			}
			if step > 0 || !cold {
				e.p.HVP(hu, e.x[m], e.y[m], u[m], e.batch(Lower, m, hb))
			} else {
				clear(hu)
			}
			um, em, h := u[m], ev[m], uh[m]
			for i := range h {
				h[i] = um[i] - rho*(gy[i]+hu[i]-em[i]) // 17a
			}
		}
		if e.st.Rand().Float64() >= q {
			for m := range e.m {
				copy(u[m], uh[m])
			}
			continue
		}
		for m := range e.m {
			em, h, zm := ev[m], uh[m], z[m]
			for i := range zm {
				zm[i] = h[i] - rq*em[i]
			}
		}
		// 17b: u_m = P_y z_m, or the average of the z_m.
		e.count(keyRoundsImplicit)
		if e.set != nil {
			e.set.Null(u[0], z[0])
		} else {
			aipodMean(u[0], z)
			for _, um := range u[1:] {
				copy(um, u[0])
			}
		}
		for m := range e.m {
			um, em, h := u[m], ev[m], uh[m]
			for i := range em {
				em[i] += qr * (um[i] - h[i]) // 17c
			}
		}
	}
}

// aipodCheckProb validates a probability in (0, 1] whose zero value means a
// default.
func aipodCheckProb(name string, v float64) error {
	if !(v >= 0 && v <= 1) {
		return fmt.Errorf("%s = %v: set a probability in (0, 1], or 0 for the default", name, v)
	}
	return nil
}

// aipodCheckAlpha validates the upper-level step α, which has no default.
func aipodCheckAlpha(name string, v float64) error {
	if !(v > 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%s = %v: set the upper-level step size α to a finite value > 0 (it has no default: paper 004 tunes it per problem)", name, v)
	}
	return nil
}

// aipodCheckSeries validates a NeumannEstimator.
func aipodCheckSeries(name string, s NeumannEstimator) error {
	if s != NeumannRandomTerm && s != NeumannPartialSum && s != ExactInverse {
		return fmt.Errorf("%s = %d: use NeumannRandomTerm, NeumannPartialSum or ExactInverse", name, int(s))
	}
	return nil
}

// aipodFloat returns v, or def when v is 0.
func aipodFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// aipodCheckLower validates a lower constraint against p.
func aipodCheckLower(name string, p oracle.Problem, l *LowerEquality) error {
	if l == nil {
		return nil
	}
	if l.Dim() != p.DimY() {
		return fmt.Errorf("%s has dimension %d, but the problem has DimY() = %d", name, l.Dim(), p.DimY())
	}
	if h, ok := l.h.(*LinearCoupling); ok {
		if r, c := h.h.Dims(); r != l.Rows() || c != p.DimX() {
			return fmt.Errorf("%s: the coupling H is %d×%d, want %d×%d (rows of A × DimX())", name, r, c, l.Rows(), p.DimX())
		}
	}
	return nil
}

// aipodStepNorm returns ‖a − b‖ / s.
func aipodStepNorm(a, b []float64, s float64) float64 {
	return floats.Distance(a, b, 2) / s
}
