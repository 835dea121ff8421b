package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// This file holds the momentum-based methods of paper 001 (Huang, "On
// Momentum-Based Gradient Methods for Bilevel Optimization with Nonconvex
// Lower-Level", shared/papers/001_293b4d1e31ff318b.txt): MGBiO
// (Algorithm 1), MSGBiO (Algorithm 2) and VR-MSGBiO (Algorithm 3). All three
// build the surrogate hypergradient of eq. 9,
//
//	w = u − G H⁻¹ h,   u ≈ ∇x f,  h ≈ Π_{C_fy}[∇y f],  G ≈ Π̂_{C_gxy}[∇xy g],  H ≈ S_[μ,L_g][∇yy g],
//
// from explicit matrices: Π_C projects a vector onto the ball of radius C,
// Π̂_C a DimX × DimY matrix onto the spectral-norm ball of radius C (by
// thresholding its singular values), and S_[μ,L_g] a symmetric matrix onto
// those with eigenvalues in [μ, L_g] (by clipping its eigenvalues, which
// keeps H invertible where ∇yy g is singular or indefinite, as it may be for
// a PL lower level). H⁻¹ is applied through the eigenvectors of the clip,
// H⁻¹h = Σ_i (U_iᵀh/θ_i) U_i (eqs. 14–15). Then, with v ≈ ∇y g,
//
//	x̃ = P_X(x_t − γ w_t),  x_{t+1} = x_t + η_t (x̃ − x_t),   ỹ = y_t − λ v_t,  y_{t+1} = y_t + η_t (ỹ − y_t),
//
// a simultaneous (Jacobi) step of x and y, one per iteration, no inner loop.
//
// Errata followed (digest shared/digests/papers-001_002.md, 1.2 and 1.7):
// eq. 12 prints w_t = ∇x f + Π̂[·] S[·]⁻¹ Π[·]; eqs. 9 and 15 and Algorithm 1,
// line 5, have the minus sign used here. The domain of S is written d × d
// (line 89); it acts on DimY × DimY. The paper says both Π̂ and S are
// "implemented by SVD and thresholding the singular values"; for S, applied
// literally to an indefinite H, that would map an eigenvalue −a to +a, while
// its formula H = U Θ Uᵀ with θ_i ∈ [μ, L_g] (eq. 13) is the eigenvalue clip
// implemented here. The paper outputs a uniformly drawn iterate; the State
// holds the last one (record x to draw one).

// MGBiO is MGBiO, the deterministic momentum-based gradient bilevel method
// of paper 001, Algorithm 1. Iteration t (k = t−1 here) evaluates every
// oracle at (x_t, y_t) on the whole data sets,
//
//	v_t = ∇y g,  u_t = ∇x f,  h_t = Π_{C_fy}[∇y f],  G_t = Π̂_{C_gxy}[∇xy g],  H_t = S_[μ,L_g][∇yy g],
//	w_t = u_t − G_t H_t⁻¹ h_t                                            (line 5, eq. 15)
//
// and moves x and y by the interpolated steps above with the constant
// η_t = Eta (Theorem 1). With X = R^d it is simultaneous gradient descent
// x ← x − ηγ w, y ← y − ηλ ∇y g. w_t is the reported hypergradient estimate
// and H_t⁻¹ h_t is kept in State.V.
//
// Oracle calls per iteration: 1 GradF, 1 GradG and 2 dense matrices
// (∇xy g and ∇yy g, by HessXY and HessYY where the problem declares them;
// assembled they cost DimY HVPs and
// min(DimX, DimY) mixed products), one eigendecomposition of a DimY × DimY
// matrix and, if CGxy > 0, one SVD of a DimX × DimY matrix.
type MGBiO struct {
	// Gamma is the upper step γ of line 6. Like SGD.LR it has no default
	// and 0 is an error: Theorem 1 takes γ ≤ min(1/(2 L_F η), λμ²/(16 L̂²)),
	// with problem constants the method cannot estimate.
	Gamma float64
	// Lambda is the lower step λ of line 7; 0 means 1/(2 L η), the bound of
	// Theorem 1, with L the largest eigenvalue of ∇yy g at (x0, y0)
	// estimated as for AIDBiO.Alpha.
	Lambda float64
	// Eta is the momentum parameter η_t = η ∈ (0, 1] of lines 6–7; 0 means 1.
	Eta float64
	// Mu and Lg are the eigenvalue bounds of S_[μ,L_g]: 0 means L/1000 for
	// Mu (L estimated as for Lambda) and no upper bound for Lg.
	Mu, Lg float64
	// CFy is the radius C_fy of Π on ∇y f and CGxy the spectral-norm radius
	// C_gxy of Π̂ on ∇xy g; 0 means no projection.
	CFy, CGxy float64
}

var _ Method = MGBiO{}

// Init implements Method. It allocates State.V.
func (m MGBiO) Init(p oracle.Problem, st *State) error {
	return mgbioInit(p, st, m.core(), m.Lambda, []error{
		checkDenseParam("MGBiO.Eta", m.Eta, "1"),
		mgbioCheck("MGBiO", m.Gamma, m.Lambda, m.Mu, m.Lg, m.CFy, m.CGxy, st),
		checkAtMost("MGBiO.Eta", m.Eta, 1, "set η in (0, 1], or 0 for 1"),
	})
}

func (m MGBiO) core() mgbioCore {
	return mgbioCore{name: "MGBiO", key: "mgbio.est.", mu: m.Mu, lg: m.Lg, cfy: m.CFy, cgxy: m.CGxy}
}

// Iterate implements Method.
func (m MGBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	eta := m.Eta
	if eta == 0 {
		eta = 1
	}
	lambda := m.Lambda
	if lambda == 0 {
		lambda = 1 / (2 * st.Scalars[keyCurvature] * eta)
	}
	return m.core().iterate(p, st, m.Gamma, lambda, eta, [5]float64{})
}

// MSGBiOSchedule selects η_t and the estimator weights of MSGBiO and
// VRMSGBiO (paper 001, Theorems 3 and 4). With t the paper's iteration
// (t = k+1), iteration t moves x and y with η_t and its estimates of
// iteration t were formed with the weights β_t = c1 e_{t−1} (∇x f),
// β̂_t = c2 e_{t−1} (∇y f), α_t = c3 e_{t−1} (∇y g), α̂_t = c4 e_{t−1}
// (∇xy g) and α̃_t = c5 e_{t−1} (∇yy g).
type MSGBiOSchedule int

const (
	// MSGBiODefault is the schedule of the method's own theorem:
	// MSGBiOSqrt for MSGBiO and MSGBiOCubeRoot for VRMSGBiO.
	MSGBiODefault MSGBiOSchedule = iota
	// MSGBiOSqrt is Theorem 3 (MSGBiO): η_t = k/(m+t)^{1/2} and
	// e_t = η_t; the default m is max(k², (c_i k)²), the smallest the
	// theorem admits, which keeps every weight ≤ 1.
	MSGBiOSqrt
	// MSGBiOCubeRoot is Theorem 4 (VR-MSGBiO): η_t = k/(m+t)^{1/3} and
	// e_t = η_t²; the default m is max(2, k³, (c_i k)³).
	MSGBiOCubeRoot
)

// MSGBiO is MSGBiO, the momentum-based stochastic gradient bilevel method of
// paper 001, Algorithm 2. At k = 0 (t = 1) it draws an upper batch ξ_1 and a
// lower batch ζ_1 and sets u_1 = ∇x f(ξ_1), h_1 = Π[∇y f(ξ_1)],
// v_1 = ∇y g(ζ_1), G_1 = Π̂[∇xy g(ζ_1)], H_1 = S[∇yy g(ζ_1)] (line 2);
// afterwards it draws fresh ξ_t, ζ_t and updates the moving averages at
// (x_t, y_t) (lines 7–11):
//
//	u_t = β_t ∇x f(ξ_t) + (1−β_t) u_{t−1}                h_t = Π_{C_fy}[β̂_t ∇y f(ξ_t) + (1−β̂_t) h_{t−1}]
//	v_t = α_t ∇y g(ζ_t) + (1−α_t) v_{t−1}                G_t = Π̂_{C_gxy}[α̂_t ∇xy g(ζ_t) + (1−α̂_t) G_{t−1}]
//	H_t = S_[μ,L_g][α̃_t ∇yy g(ζ_t) + (1−α̃_t) H_{t−1}]
//
// then forms w_t = u_t − G_t H_t⁻¹ h_t (line 12) and moves x and y as MGBiO
// does with η_t (lines 4–5). One sample ζ feeds v, G and H and one sample ξ
// feeds u and h, as in the paper. The estimates are kept, projected, in
// State.Vecs ("msgbio.u", "msgbio.h", "msgbio.v", "msgbio.G", "msgbio.H");
// State.V holds H_t⁻¹ h_t.
//
// Oracle calls per iteration: 1 GradF, 1 GradG and 2 dense matrices (as for
// MGBiO), on batches of UpperBatch and LowerBatch samples.
type MSGBiO struct {
	// Gamma (required), Mu, Lg, CFy and CGxy are as for MGBiO.
	Gamma, Mu, Lg, CFy, CGxy float64
	// Lambda is the lower step λ; 0 means min(√m/(2Lk), 1/(4L)), the bound
	// of Theorem 3 (with MSGBiOCubeRoot, that of Theorem 4, see VRMSGBiO).
	Lambda float64
	// Schedule is MSGBiODefault (MSGBiOSqrt, Theorem 3) or MSGBiOCubeRoot.
	Schedule MSGBiOSchedule
	// K and M are k and m of η_t = k/(m+t)^p: 0 means k = 1 and the
	// smallest m the schedule's theorem admits.
	K, M float64
	// C holds c1..c5, the multipliers of the weights of u, h, v, G and H; a
	// 0 entry means 10 with MSGBiOSqrt and 10 + 2/(3k³) with
	// MSGBiOCubeRoot, the bound on c1 of Theorems 3 and 4. Theorem 3 asks
	// c1 ≥ 10, c2 ≥ 10κ², c3 ≥ 1, c4 ≥ 10C_fy²/μ², c5 ≥ 10C_fy²κ²/μ²
	// (κ = C_gxy/μ). Much smaller values make the averages lag the iterates
	// by about γ/c per unit of gradient and can destabilize the run.
	C [5]float64
	// LowerBatch is |ζ_t| and UpperBatch |ξ_t|; 0 means the whole data set.
	LowerBatch, UpperBatch int
}

var _ Method = MSGBiO{}

// Init implements Method. It allocates State.V and the estimates.
func (m MSGBiO) Init(p oracle.Problem, st *State) error {
	c := m.core()
	return mgbioInit(p, st, c, m.Lambda, []error{
		mgbioCheck("MSGBiO", m.Gamma, m.Lambda, m.Mu, m.Lg, m.CFy, m.CGxy, st),
		c.sched.check("MSGBiO", m.K, m.M, m.C),
		checkBatch(p, "MSGBiO.LowerBatch", m.LowerBatch, Lower),
		checkBatch(p, "MSGBiO.UpperBatch", m.UpperBatch, Upper),
	})
}

func (m MSGBiO) core() mgbioCore {
	return mgbioCore{name: "MSGBiO", key: "msgbio.", carry: true,
		mu: m.Mu, lg: m.Lg, cfy: m.CFy, cgxy: m.CGxy, lower: m.LowerBatch, upper: m.UpperBatch,
		sched: newMSGBiOSchedule(m.Schedule, MSGBiOSqrt, m.K, m.M, m.C)}
}

// Iterate implements Method.
func (m MSGBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	c := m.core()
	return c.stochasticIterate(p, st, m.Gamma, m.Lambda)
}

// VRMSGBiO is VR-MSGBiO, the variance-reduced momentum-based stochastic
// gradient bilevel method of paper 001, Algorithm 3. It is MSGBiO with the
// moving averages replaced by STORM estimators (lines 7–11, eq. 27): each
// new sample is evaluated at the current iterate (x_t, y_t) and at the
// previous one (x_{t−1}, y_{t−1}), kept in State.Vecs, and
//
//	u_t = ∇x f(x_t, y_t; ξ_t) + (1−β_t)(u_{t−1} − ∇x f(x_{t−1}, y_{t−1}; ξ_t))
//	h_t = Π_{C_fy}[∇y f(x_t, y_t; ξ_t) + (1−β̂_t)(h_{t−1} − ∇y f(x_{t−1}, y_{t−1}; ξ_t))]
//	v_t = ∇y g(x_t, y_t; ζ_t) + (1−α_t)(v_{t−1} − ∇y g(x_{t−1}, y_{t−1}; ζ_t))
//	G_t = Π̂_{C_gxy}[∇xy g(x_t, y_t; ζ_t) + (1−α̂_t)(G_{t−1} − ∇xy g(x_{t−1}, y_{t−1}; ζ_t))]
//	H_t = S_[μ,L_g][∇yy g(x_t, y_t; ζ_t) + (1−α̃_t)(H_{t−1} − ∇yy g(x_{t−1}, y_{t−1}; ζ_t))]
//
// The recursion runs on the projected estimates. Initialization, w_t and
// the x and y steps are MSGBiO's. The default schedule is MSGBiOCubeRoot
// (Theorem 4). The estimates are in State.Vecs under "vrmsgbio.*".
//
// Oracle calls per iteration: as MSGBiO at k = 0 (1 GradF, 1 GradG,
// 2 dense matrices), then twice that (2 GradF, 2 GradG, 4 dense matrices).
type VRMSGBiO struct {
	// Gamma (required), Mu, Lg, CFy and CGxy are as for MGBiO.
	Gamma, Mu, Lg, CFy, CGxy float64
	// Lambda is the lower step λ; 0 means min(1/(4√2 L), m^{1/3}/(2Lk)),
	// the bound of Theorem 4 (with MSGBiOSqrt, that of Theorem 3).
	Lambda float64
	// Schedule is MSGBiODefault (MSGBiOCubeRoot, Theorem 4) or MSGBiOSqrt.
	Schedule MSGBiOSchedule
	// K, M and C are as for MSGBiO. Theorem 4 asks c_i ≥ 2/(3k³) plus the
	// bounds of Theorem 3 on c_i.
	K, M float64
	C    [5]float64
	// LowerBatch is |ζ_t| and UpperBatch |ξ_t|; 0 means the whole data set.
	LowerBatch, UpperBatch int
}

var _ Method = VRMSGBiO{}

// Init implements Method. It allocates State.V, the estimates and the
// previous iterate.
func (m VRMSGBiO) Init(p oracle.Problem, st *State) error {
	c := m.core()
	return mgbioInit(p, st, c, m.Lambda, []error{
		mgbioCheck("VRMSGBiO", m.Gamma, m.Lambda, m.Mu, m.Lg, m.CFy, m.CGxy, st),
		c.sched.check("VRMSGBiO", m.K, m.M, m.C),
		checkBatch(p, "VRMSGBiO.LowerBatch", m.LowerBatch, Lower),
		checkBatch(p, "VRMSGBiO.UpperBatch", m.UpperBatch, Upper),
	})
}

func (m VRMSGBiO) core() mgbioCore {
	return mgbioCore{name: "VRMSGBiO", key: "vrmsgbio.", carry: true, storm: true,
		mu: m.Mu, lg: m.Lg, cfy: m.CFy, cgxy: m.CGxy, lower: m.LowerBatch, upper: m.UpperBatch,
		sched: newMSGBiOSchedule(m.Schedule, MSGBiOCubeRoot, m.K, m.M, m.C)}
}

// Iterate implements Method.
func (m VRMSGBiO) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	c := m.core()
	return c.stochasticIterate(p, st, m.Gamma, m.Lambda)
}

// msgbioSchedule is a resolved MSGBiOSchedule.
type msgbioSchedule struct {
	which MSGBiOSchedule // MSGBiOSqrt or MSGBiOCubeRoot
	k, m  float64
	c     [5]float64
}

// newMSGBiOSchedule resolves the defaults of a schedule; def is the
// method's own.
func newMSGBiOSchedule(which, def MSGBiOSchedule, k, m float64, c [5]float64) msgbioSchedule {
	if which == MSGBiODefault {
		which = def
	}
	if k == 0 {
		k = 1
	}
	cdef := 10.0 // Theorem 3: c1 ≥ 10
	if which == MSGBiOCubeRoot {
		cdef = 10 + 2/(3*k*k*k) // Theorem 4: c1 ≥ 2/(3k³) + 10
	}
	cmax := 0.0
	for i := range c {
		if c[i] == 0 {
			c[i] = cdef
		}
		cmax = math.Max(cmax, c[i])
	}
	if m == 0 {
		if which == MSGBiOSqrt {
			m = math.Max(k*k, cmax*k*cmax*k) // Theorem 3: m ≥ max(k², (c_i k)²)
		} else {
			m = math.Max(2, math.Max(k*k*k, math.Pow(cmax*k, 3))) // Theorem 4: m ≥ max(2, k³, (c_i k)³)
		}
	}
	return msgbioSchedule{which: which, k: k, m: m, c: c}
}

// eta returns η_t, t ≥ 0 (the paper's index).
func (s msgbioSchedule) eta(t int) float64 {
	p := 0.5
	if s.which == MSGBiOCubeRoot {
		p = 1.0 / 3
	}
	return s.k / math.Pow(s.m+float64(t), p)
}

// weights returns β_{t+1}, β̂_{t+1}, α_{t+1}, α̂_{t+1}, α̃_{t+1}: c_i η_t
// (Theorem 3) or c_i η_t² (Theorem 4).
func (s msgbioSchedule) weights(t int) [5]float64 {
	e := s.eta(t)
	if s.which == MSGBiOCubeRoot {
		e *= e
	}
	var w [5]float64
	for i, c := range s.c {
		w[i] = c * e
	}
	return w
}

// check validates the settings of a schedule (raw: before defaults) and
// that the resolved one has η_t ≤ 1 and every weight ≤ 1 (they decrease
// with t, so t = 1 is checked).
func (s msgbioSchedule) check(name string, k, m float64, c [5]float64) error {
	err := firstErr(checkDenseParam(name+".K", k, "1"), checkDenseParam(name+".M", m, "the theorem's smallest m"))
	if err != nil {
		return err
	}
	if s.which != MSGBiOSqrt && s.which != MSGBiOCubeRoot {
		return fmt.Errorf("%s.Schedule = %d: use MSGBiODefault, MSGBiOSqrt or MSGBiOCubeRoot", name, s.which)
	}
	for i, ci := range c {
		if err := checkDenseParam(fmt.Sprintf("%s.C[%d]", name, i), ci, "1"); err != nil {
			return err
		}
	}
	if e := s.eta(1); e > 1 {
		return fmt.Errorf("%s: η_1 = k/(m+1)^p = %.4g > 1 with k = %v, m = %v: increase M or decrease K", name, e, s.k, s.m)
	}
	for i, w := range s.weights(1) {
		if w > 1 {
			return fmt.Errorf("%s: the weight c%d·e_1 = %.4g > 1 with c%d = %v, k = %v, m = %v: increase M or decrease C[%d]", name, i+1, w, i+1, s.c[i], s.k, s.m, i)
		}
	}
	return nil
}

// mgbioCore is what one iteration of MGBiO, MSGBiO or VRMSGBiO needs.
type mgbioCore struct {
	name  string
	key   string // prefix of the State.Vecs entries
	carry bool   // estimates carry over (MSGBiO, VRMSGBiO)
	storm bool   // STORM estimators (VRMSGBiO)

	mu, lg, cfy, cgxy float64 // raw settings: 0 means the default
	lower, upper      int
	sched             msgbioSchedule
}

// mgbioCheck validates the settings the three methods share.
func mgbioCheck(name string, gamma, lambda, mu, lg, cfy, cgxy float64, st *State) error {
	err := firstErr(
		checkStep(name+".Gamma", gamma),
		checkStep(name+".Lambda", lambda),
		checkDenseParam(name+".Mu", mu, "L/1000"),
		checkDenseParam(name+".Lg", lg, "no upper bound"),
		checkDenseParam(name+".CFy", cfy, "no projection"),
		checkDenseParam(name+".CGxy", cgxy, "no projection"),
		noProjectY(name, st),
	)
	if err != nil {
		return err
	}
	if gamma == 0 {
		return fmt.Errorf("%s.Gamma = 0: set the upper-level step γ > 0; it has no default (the theorems of paper 001 bound it by problem constants)", name)
	}
	if mu > 0 && lg > 0 && lg < mu {
		return fmt.Errorf("%s.Lg = %v < Mu = %v: the eigenvalue interval [μ, L_g] is empty", name, lg, mu)
	}
	return nil
}

// mgbioInit runs the method's checks, estimates L if the lower step lambda
// or μ is a default, and allocates the method's buffers.
func mgbioInit(p oracle.Problem, st *State, c mgbioCore, lambda float64, checks []error) error {
	err := methodInit{name: c.name, checks: checks, steps: []float64{lambda, c.mu}, v: true}.run(p, st)
	if err != nil {
		return err
	}
	if c.mu == 0 && c.lg > 0 && c.lg < st.Scalars[keyCurvature]/1000 {
		return fmt.Errorf("%s.Lg = %v is below the default μ = L/1000 = %v: set Mu", c.name, c.lg, st.Scalars[keyCurvature]/1000)
	}
	nx, ny := p.DimX(), p.DimY()
	if c.carry {
		st.Vec(c.key+"u", nx)
		st.Vec(c.key+"h", ny)
		st.Vec(c.key+"v", ny)
		st.Vec(c.key+"G", nx*ny)
		st.Vec(c.key+"H", ny*ny)
	}
	if c.storm {
		st.Vec(c.key+"xprev", nx)
		st.Vec(c.key+"yprev", ny)
	}
	return nil
}

// stochasticIterate resolves the schedule of iteration k = t−1 and runs it.
func (c mgbioCore) stochasticIterate(p oracle.Problem, st *State, gamma, lambda float64) (Iteration, error) {
	t := st.Iter + 1
	if lambda == 0 {
		l := st.Scalars[keyCurvature]
		if c.sched.which == MSGBiOSqrt { // Theorem 3
			lambda = math.Min(math.Sqrt(c.sched.m)/(2*l*c.sched.k), 1/(4*l))
		} else { // Theorem 4
			lambda = math.Min(1/(4*math.Sqrt2*l), math.Cbrt(c.sched.m)/(2*l*c.sched.k))
		}
	}
	return c.iterate(p, st, gamma, lambda, c.sched.eta(t), c.sched.weights(t-1))
}

// iterate performs iteration k = st.Iter (the paper's t = k+1): it forms
// the estimates at (x_t, y_t) with the weights w (β_t, β̂_t, α_t, α̂_t, α̃_t;
// unused at k = 0 and by MGBiO, whose estimates are the fresh values), then
// w_t, and moves x and y with η = η_t.
func (c mgbioCore) iterate(p oracle.Problem, st *State, gamma, lambda, eta float64, w [5]float64) (Iteration, error) {
	nx, ny := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	mu := c.mu
	if mu == 0 {
		mu = st.Scalars[keyCurvature] / 1000
	}
	e := c.estimates(p, st, w)
	denseClipNorm(e.h, denseRadius(c.cfy))
	if err := denseClipSpectral(e.g, nx, ny, denseRadius(c.cgxy)); err != nil {
		return Iteration{}, err
	}
	hinv := implicit.Spectral{Lo: mu, Hi: c.lg}
	if err := hinv.Factorize(e.hh, e.hh, ny); err != nil {
		return Iteration{}, err
	}
	// w_t = u_t − G_t H_t⁻¹ h_t: eq. 9/15, not the "+" of eq. 12; H_t⁻¹ h_t
	// is kept in V.
	wt, err := estimate(st, st.V, implicit.System{
		Gradient: func(gx, gy []float64) { copy(gx, e.u); copy(gy, e.h) },
		Solve:    spectralSolve(&hinv),
		Cross:    func(dst, v []float64) { denseMulVec(dst, e.g, nx, ny, v) },
	})
	if err != nil {
		return Iteration{}, err
	}
	norm := floats.Norm(wt, 2)

	if c.storm {
		copy(st.Vec(c.key+"xprev", nx), x)
		copy(st.Vec(c.key+"yprev", ny), y)
	}
	xt := st.Work("mgbio.xt", nx)
	for i := range xt {
		xt[i] = x[i] - gamma*wt[i]
	}
	st.ProjectX(xt)
	for i := range x {
		x[i] += eta * (xt[i] - x[i])
	}
	for i := range y {
		yt := y[i] - lambda*e.v[i]
		y[i] += eta * (yt - y[i])
	}
	return Iteration{HypergradNorm: norm}, nil
}

// mgbioEstimates are the estimates u ≈ ∇x f, h ≈ ∇y f, v ≈ ∇y g,
// G ≈ ∇xy g and H ≈ ∇yy g of one iteration, before their projections.
type mgbioEstimates struct{ u, h, v, g, hh []float64 }

// estimates draws ξ_t and ζ_t and forms the estimates at (x_t, y_t): the
// fresh values at k = 0 and for MGBiO, else moving averages (MSGBiO) or
// STORM estimators (VR-MSGBiO) with the weights w, in State.Vecs when they
// carry over.
func (c mgbioCore) estimates(p oracle.Problem, st *State, w [5]float64) mgbioEstimates {
	nx, ny := p.DimX(), p.DimY()
	x, y := st.X, st.Y
	buf := st.Work
	if c.carry {
		buf = st.Vec
	}
	e := mgbioEstimates{u: buf(c.key+"u", nx), h: buf(c.key+"h", ny), v: buf(c.key+"v", ny),
		g: buf(c.key+"G", nx*ny), hh: buf(c.key+"H", ny*ny)}
	xi := st.Batch(p, Upper, c.upper)
	zeta := st.Batch(p, Lower, c.lower)
	fx, fy, gy := st.Work("mgbio.fx", nx), st.Work("mgbio.fy", ny), st.Work("mgbio.gy", ny)
	gc, hc := st.Work("mgbio.G", nx*ny), st.Work("mgbio.H", ny*ny)
	p.GradF(fx, fy, x, y, xi)
	p.GradG(nil, gy, x, y, zeta)
	hessXYInto(p, st, gc, x, y, zeta)
	hessYYInto(p, st, hc, x, y, zeta)
	est, cur := [5][]float64{e.u, e.h, e.v, e.g, e.hh}, [5][]float64{fx, fy, gy, gc, hc}
	switch {
	case st.Iter == 0 || !c.carry: // Algorithm 1, line 3; Algorithms 2–3, line 2
		for i := range est {
			copy(est[i], cur[i])
		}
	case c.storm: // Algorithm 3, lines 7–11: the same ξ_t, ζ_t at (x_{t−1}, y_{t−1})
		xp, yp := st.Vec(c.key+"xprev", nx), st.Vec(c.key+"yprev", ny)
		fxp, fyp, gyp := st.Work("mgbio.fxp", nx), st.Work("mgbio.fyp", ny), st.Work("mgbio.gyp", ny)
		gp, hp := st.Work("mgbio.Gp", nx*ny), st.Work("mgbio.Hp", ny*ny)
		p.GradF(fxp, fyp, xp, yp, xi)
		p.GradG(nil, gyp, xp, yp, zeta)
		hessXYInto(p, st, gp, xp, yp, zeta)
		hessYYInto(p, st, hp, xp, yp, zeta)
		prev := [5][]float64{fxp, fyp, gyp, gp, hp}
		for i := range est {
			stormUpdate(est[i], prev[i], cur[i], w[i])
		}
	default: // Algorithm 2, lines 7–11
		for i := range est {
			emaUpdate(est[i], cur[i], w[i])
		}
	}
	return e
}

// emaUpdate is the moving average of paper 001, eq. 26:
// est ← w·cur + (1−w)·est.
func emaUpdate(est, cur []float64, w float64) {
	for i := range est {
		est[i] = w*cur[i] + (1-w)*est[i]
	}
}
