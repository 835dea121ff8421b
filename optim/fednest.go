package optim

import (
	"fmt"
	"slices"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// FedNest is FedNest, the federated bilevel method of Tarzanagh, Li,
// Thrampoulidis and Oymak ("FedNest: Federated Bilevel, Minimax, and
// Compositional Optimization", ICML 2022, arXiv 2205.02215), the baseline
// of paper 004's federated experiments, with its SVRG estimators on both
// levels and its local steps. Iteration k (its Algorithm 1), with the
// server's x_k and y_k:
//
//	inner (Algorithm 4, FedInn, SVRG on y), T times: the participating
//	  clients S send q_i = ∇y g_i(x, y; ζ_i) (a lower round); the server
//	  sends back q = mean_S q_i, and each client runs τ_y local steps from
//	  y_{i,0} = y,
//	    y_{i,ν+1} = y_{i,ν} − β (∇y g_i(x, y_{i,ν}; ζ_ν) − ∇y g_i(x, y; ζ_ν) + q),
//	  and sends y_{i,τ_y} (a lower round); y ← mean_S y_{i,τ_y}.
//	outer (Algorithm 2, FedOut, SVRG on x):
//	  FedIHGP (Algorithm 3): the clients send ∇y f_i (an implicit round),
//	    then the Neumann series p_N ≈ (∇yy g)⁻¹ ∇y f runs on the server on
//	    the averages of the clients' Hessian-vector products, one implicit
//	    round per product — only vectors travel, never a Hessian;
//	  the clients send h_i = ∇x f_i − ∇xy g_i·p_N (an upper round); the
//	    server sends back h = mean_S h_i, and each client runs τ_x local
//	    steps from x_{i,0} = x,
//	    x_{i,ν+1} = x_{i,ν} − α (h_i(x_{i,ν}) − h_i(x) + h),
//	    h_i(x') = ∇x f_i(x', y; ξ_ν) − ∇xy g_i(x', y; ζ_ν)·p_N,
//	  and sends x_{i,τ_x} (an upper round); x ← mean_S x_{i,τ_x}.
//
// Rounds per iteration: 2T lower, 1 + J implicit (J = N' or N − 1
// products, as for FedEAiPOD) and 2 upper, the 2T + J + 3 of FedNest's
// Table 2 (whose N counts the series' products). With Fraction < 1
// each FedInn and each FedOut takes part of the clients, S drawn uniformly
// without replacement (⌊Fraction·M⌋ of them, at least one), as the
// authors' code does; a participating client that cannot answer (a lost
// process) is left out of the rest of that call, which the averages over
// S allow — the run stops only when no participant answers.
//
// Choices where the paper leaves room, stated: the step ν = 0 of each
// local loop is the server's average itself (y_{i,1} = y − βq, x_{i,1} =
// x − αh), since its two gradients are at the same point and cancel, so
// the client skips them; ∇x f_i in h_i is computed on the upper batch of
// FedIHGP's ∇y f_i (one GradF, the same sample as AiPOD's); the Neumann
// series is AiPOD's (η, N, Series), whose random-term estimator is
// FedIHGP's N' ~ U{0, …, N−1}; one set S serves a whole FedIHGP (the
// authors' code draws S once per FedOut). With M = 1, T = S, τ = 1 and
// Fraction 1, FedNest computes the iterates of AiPOD without constraints.
// τ_y = InnerSteps and τ_x = OuterSteps are the authors' local epochs
// (inner_ep) and outer_tau.
//
// Iteration.HypergradNorm is ‖h‖ = ‖mean_S h_i‖, the first local step's
// hypergradient estimate. State.X and State.Y are the server's x and y;
// the clients keep nothing between FedInn and FedOut calls (they receive
// x and y each time), so a lost client that comes back takes part again.
type FedNest struct {
	// Alpha is the outer step α (no default); Beta the inner step β (0:
	// 1/L, L estimated as for AiPOD).
	Alpha, Beta float64
	// T is the number of FedInn calls per iteration (0: 1); InnerSteps
	// and OuterSteps are the local steps τ of each client in FedInn and in
	// FedOut (0: 1).
	T, InnerSteps, OuterSteps int
	// N, Eta and Series are the Neumann estimate of FedIHGP, as in AiPOD
	// (0: 10, 1/L, NeumannRandomTerm).
	N      int
	Eta    float64
	Series NeumannEstimator
	// Fraction is the share of the clients that take part in each FedInn
	// and FedOut call, in (0, 1]; 0 means 1 (every client).
	Fraction float64
	// InnerBatch is the lower batch ζ of q_i and of each inner local
	// step; HessianBatch the lower batch of each Hessian-vector product,
	// of the mixed product of h_i and of each outer local step; UpperBatch
	// the upper batch ξ of ∇y f_i and ∇x f_i and of each outer local step.
	// Per client; 0 means the client's whole data.
	InnerBatch, HessianBatch, UpperBatch int
	// Clients are the clients, as for FedEAiPOD; nil means one client
	// owning both data sets.
	Clients FedClients
}

var _ Method = FedNest{}

// Init implements Method. It estimates L if Beta or Eta is 0.
func (m FedNest) Init(p oracle.Problem, st *State) error {
	var frac error
	if !(m.Fraction >= 0 && m.Fraction <= 1) {
		frac = fmt.Errorf("FedNest.Fraction = %v: set the share of clients per call in (0, 1], or 0 for all", m.Fraction)
	}
	return methodInit{name: "FedNest", checks: []error{
		aipodCheckAlpha("FedNest.Alpha", m.Alpha),
		checkStep("FedNest.Beta", m.Beta),
		checkStep("FedNest.Eta", m.Eta),
		checkCount("FedNest.T", m.T),
		checkCount("FedNest.InnerSteps", m.InnerSteps),
		checkCount("FedNest.OuterSteps", m.OuterSteps),
		checkCount("FedNest.N", m.N),
		fedCheckSeries("FedNest.Series", m.Series),
		frac,
		checkBatch(p, "FedNest.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "FedNest.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "FedNest.UpperBatch", m.UpperBatch, Upper),
		fedCheck("FedNest", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
	}, steps: []float64{m.Beta, m.Eta}}.run(p, st)
}

// Iterate implements Method.
func (m FedNest) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	s := newFedServer(m.Clients, p, st, "fednest")
	beta := stepOrDefault(m.Beta, st)
	for range count(m.T, 1) {
		if err := m.fedInn(s, beta, count(m.InnerSteps, 1)); err != nil {
			return Iteration{}, err
		}
	}
	return m.fedOut(s, count(m.OuterSteps, 1))
}

// participants draws the clients of one FedInn or FedOut call.
func (m FedNest) participants(s *fedServer) []int {
	if m.Fraction == 0 || m.Fraction == 1 {
		return s.all()
	}
	k := max(1, int(m.Fraction*float64(s.m)))
	set := s.st.Rand().Perm(s.m)[:k]
	slices.Sort(set)
	return set
}

// fedInn is Algorithm 4 of FedNest: SVRG on y, two lower rounds.
func (m FedNest) fedInn(s *fedServer, beta float64, tau int) error {
	set := m.participants(s)
	b := make(map[int][]int, len(set))
	for _, c := range set {
		b[c] = s.batch(Lower, c, m.InnerBatch)
	}
	x, y := slices.Clone(s.st.X), slices.Clone(s.st.Y)
	s.fresh = true
	q, err := s.round(FedLower, set, true, func(c int) []FedStep {
		return []FedStep{{Op: fedSet, Name: "x", Vec: x}, {Op: fedSet, Name: "y", Vec: y}, {Op: fedGradGY, Batch: b[c]}, send("q")}
	})
	if err != nil {
		return err
	}
	set = answered(set, q)
	qbar := make([]float64, len(y))
	if _, err := mean(qbar, q); err != nil {
		return fmt.Errorf("FedInn: %w", err)
	}
	yl, err := s.round(FedLower, set, true, func(c int) []FedStep {
		steps := []FedStep{{Op: fedSVRGY0, Vec: qbar, A: beta}}
		for range tau - 1 {
			steps = append(steps, FedStep{Op: fedSVRGY, Batch: s.batch(Lower, c, m.InnerBatch), A: beta})
		}
		return append(steps, send("yl"))
	})
	if err != nil {
		return err
	}
	if _, err := mean(s.st.Y, yl); err != nil {
		return fmt.Errorf("FedInn: %w", err)
	}
	return nil
}

// fedOut is Algorithm 2 of FedNest with FedIHGP (Algorithm 3): SVRG on x.
func (m FedNest) fedOut(s *fedServer, tau int) (Iteration, error) {
	st := s.st
	set := m.participants(s)
	x, y := slices.Clone(st.X), slices.Clone(st.Y)
	for _, c := range set {
		s.pending[c] = []FedStep{{Op: fedSet, Name: "x", Vec: x}, {Op: fedSet, Name: "y", Vec: y}}
	}
	s.fresh = true
	v, set, err := s.neumann(set, true, stepOrDefault(m.Eta, st), count(m.N, 10), m.Series, m.HessianBatch, m.UpperBatch)
	if err != nil {
		return Iteration{}, fmt.Errorf("FedIHGP: %w", err)
	}
	hb := make(map[int][]int, len(set))
	for _, c := range set {
		hb[c] = s.batch(Lower, c, m.HessianBatch)
	}
	h, err := s.round(FedUpper, set, true, func(c int) []FedStep {
		return []FedStep{{Op: fedCross, Batch: hb[c], Vec: v}, send("h")}
	})
	if err != nil {
		return Iteration{}, err
	}
	set = answered(set, h)
	hbar := make([]float64, len(x))
	if _, err := mean(hbar, h); err != nil {
		return Iteration{}, fmt.Errorf("FedOut: %w", err)
	}
	xl, err := s.round(FedUpper, set, true, func(c int) []FedStep {
		steps := []FedStep{{Op: fedSVRGX0, Vec: hbar, A: m.Alpha}}
		for range tau - 1 {
			steps = append(steps, FedStep{Op: fedSVRGXF, Batch: s.batch(Upper, c, m.UpperBatch)},
				FedStep{Op: fedSVRGXG, Batch: s.batch(Lower, c, m.HessianBatch), A: m.Alpha})
		}
		return append(steps, send("xl"))
	})
	if err != nil {
		return Iteration{}, err
	}
	if _, err := mean(st.X, xl); err != nil {
		return Iteration{}, fmt.Errorf("FedOut: %w", err)
	}
	return Iteration{HypergradNorm: floats.Norm(hbar, 2)}, nil
}
