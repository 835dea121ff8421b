package optim

// Federated bilevel learning, paper 004 Section 5 and Appendix E (Xiao,
// Shen, Yin, Chen, shared/papers/004_0b814357b1b03328.txt), simulated on one
// machine:
//
//	min_x (1/M) Σ_m f_m(x_m, y*_m),  y* = argmin_y (1/M) Σ_m g_m(x_m, y_m)
//	subject to the consensus constraints x_1 = … = x_M, y_1 = … = y_M      (eq. 21)
//
// Client m's f_m and g_m are the Problem's F and G restricted to the
// client's shards of the upper and lower data sets (a Federation). The
// consensus sets are affine with V₂ = 1_M/√M ⊗ I (eq. 22), so projecting
// onto them is averaging the clients' vectors (eq. 24) and every projection
// is one communication round; Rounds counts them per level. With shards of
// equal size, (1/M) Σ_m f_m is the Problem's f and likewise for g.

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gobilevel/bilevel/oracle"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// Federation assigns the samples of a Problem's data sets to M clients:
// client m owns the lower-level samples Lower[m] and the upper-level samples
// Upper[m]. Shards must be nonempty and disjoint; they need not cover the
// data sets. A client's "whole data set" (batch size 0) is its shard; its
// minibatches are drawn uniformly with replacement from the shard with the
// run's random stream. Build shards with ShardsEven, ShardsIID,
// ShardsByLabel (non-iid) or ShardsBy.
type Federation struct {
	Lower, Upper [][]int
}

// Clients returns M.
func (f *Federation) Clients() int { return len(f.Lower) }

// validate checks f against p.
func (f *Federation) validate(name string, p oracle.Problem) error {
	if len(f.Lower) == 0 || len(f.Lower) != len(f.Upper) {
		return fmt.Errorf("%s: %d lower and %d upper shards: give every client one shard of each data set", name, len(f.Lower), len(f.Upper))
	}
	for _, c := range []struct {
		set    string
		shards [][]int
		n      int
	}{{"Lower", f.Lower, p.NumLower()}, {"Upper", f.Upper, p.NumUpper()}} {
		owner := make([]int, c.n)
		for m, sh := range c.shards {
			if len(sh) == 0 {
				return fmt.Errorf("%s.%s[%d] is empty: every client needs samples of both data sets", name, c.set, m)
			}
			for _, i := range sh {
				if i < 0 || i >= c.n {
					return fmt.Errorf("%s.%s[%d] holds index %d outside [0, %d)", name, c.set, m, i, c.n)
				}
				if owner[i] != 0 {
					return fmt.Errorf("%s.%s: sample %d belongs to clients %d and %d: shards must be disjoint", name, c.set, i, owner[i]-1, m)
				}
				owner[i] = m + 1
			}
		}
	}
	return nil
}

// minShard returns the size of the smallest shard of the data set.
func (f *Federation) minShard(set DataSet) int {
	shards := f.Lower
	if set == Upper {
		shards = f.Upper
	}
	n := len(shards[0])
	for _, s := range shards[1:] {
		n = min(n, len(s))
	}
	return n
}

// ShardsEven splits the indices 0..n−1 into m contiguous shards whose sizes
// differ by at most one. With m = 1 the shard is 0..n−1 in order, so a
// one-client Federation draws the same batches as a centralized run. It
// panics unless 1 ≤ m ≤ n.
func ShardsEven(n, m int) [][]int {
	if m < 1 || m > n {
		panic(fmt.Sprintf("optim: ShardsEven(%d, %d): need 1 ≤ m ≤ n", n, m))
	}
	out := make([][]int, m)
	for c := range out {
		lo, hi := c*n/m, (c+1)*n/m
		out[c] = make([]int, hi-lo)
		for i := range out[c] {
			out[c][i] = lo + i
		}
	}
	return out
}

// ShardsIID splits the indices 0..n−1 into m shards of sizes differing by at
// most one, uniformly at random (a permutation drawn from seed); each shard
// is sorted. It panics unless 1 ≤ m ≤ n.
func ShardsIID(n, m int, seed uint64) [][]int {
	perm := rand.New(rand.NewPCG(seed, pcgStream)).Perm(n)
	out := ShardsEven(n, m)
	for _, sh := range out {
		for j, i := range sh {
			sh[j] = perm[i]
		}
		slices.Sort(sh)
	}
	return out
}

// ShardsByLabel is the non-iid split of federated learning (McMahan et al.
// 2017; the recipe of paper 004's hyper-representation experiment): the
// indices are sorted by label (ties by index), cut into m·perClient
// contiguous shards of sizes differing by at most one, and every client
// receives perClient of them, chosen at random from seed. With perClient = 2
// most clients see only two labels. Each client's indices are sorted. It
// returns an error unless 1 ≤ m and m·perClient ≤ len(labels).
func ShardsByLabel(labels []int, m, perClient int, seed uint64) ([][]int, error) {
	n := len(labels)
	if m < 1 || perClient < 1 || m*perClient > n {
		return nil, fmt.Errorf("optim: ShardsByLabel: %d clients × %d shards per client need 1 ≤ m, 1 ≤ perClient and m·perClient ≤ %d samples", m, perClient, n)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(labels[a], labels[b]) })
	pieces := ShardsEven(n, m*perClient)
	order := rand.New(rand.NewPCG(seed, pcgStream)).Perm(m * perClient)
	out := make([][]int, m)
	for c := range out {
		for _, s := range order[c*perClient : (c+1)*perClient] {
			for _, j := range pieces[s] {
				out[c] = append(out[c], idx[j])
			}
		}
		slices.Sort(out[c])
	}
	return out, nil
}

// ShardsBy gives sample i (0 ≤ i < n) to client client(i) in [0, m), for
// any assignment (by label, by writer, by a precomputed table). It returns an
// error if client(i) is outside [0, m) or some client receives nothing.
func ShardsBy(n, m int, client func(i int) int) ([][]int, error) {
	if m < 1 {
		return nil, fmt.Errorf("optim: ShardsBy: m = %d clients, want ≥ 1", m)
	}
	out := make([][]int, m)
	for i := range n {
		c := client(i)
		if c < 0 || c >= m {
			return nil, fmt.Errorf("optim: ShardsBy: sample %d assigned to client %d, outside [0, %d)", i, c, m)
		}
		out[c] = append(out[c], i)
	}
	for c, s := range out {
		if len(s) == 0 {
			return nil, fmt.Errorf("optim: ShardsBy: client %d receives no sample", c)
		}
	}
	return out, nil
}

// FedEAiPOD is E-AiPOD in federated bilevel learning, paper 004 Algorithm 6
// (E-AiPOD branch) with Algorithms 7 and 8. Iteration k, clients in
// parallel, all starting from the server's x_k:
//
//	lower (Algorithm 7): S ProxSkip steps on each client's y_m, r_m with its
//	  own ∇y g_m; with probability p (a coin shared by all clients, as the
//	  server decides a round) the clients send ŷ_m − (β/p) r_m and receive
//	  the average: one lower round.
//	w (Algorithm 8): the clients send ∇y f_m (one implicit round), then for
//	  n = 1..J send ∇yy g_m z (J implicit rounds); w_m = ∇xy g_m u locally.
//	upper: T local steps x_m ← x_m − α(∇x f_m(x_m, y_m) + w_m), then the
//	  server sets x_{k+1} = x_k + δ (mean_m x_m − x_k): one upper round.
//
// This is EAiPOD applied to eq. 21 with the consensus sets of eq. 22, and the
// code is the same (see aipodEnv). Errata of Appendix E followed (see the
// digest, shared/digests/papers-000_004.md II.8): Algorithm 6 evaluates
// ∇x f_m at x_m^k inside the T-loop, but eq. 11b says x^{k,t}, which is used;
// it aggregates with δ Σ_m Δ_m, but eq. 12 implies δ · (1/M) Σ_m Δ_m, which
// is used; its sign "− w_m" with Algorithm 8's w_m = −∇xy g v equals eq. 9b's
// "+ ∇xy g u" used here; Algorithm 7's factor β/β is p/β (eq. 10c);
// Algorithm 8 line 13 evaluates at y_m^k where y_m^{k+1} is meant.
//
// Rounds per iteration: lower ~ Binomial(S, p), implicit 1 + J (J = N' or
// N−1), upper 1. Oracle calls per client as EAiPOD. The client copies are
// State.Vecs "fedeaipod.y" and "fedeaipod.r" (M·DimY, client-major); State.Y
// is their average ȳ (computed for monitoring, not a round) and State.X the
// server's x. Settings.ProjectX and ProjectY must be nil (the consensus is
// the constraint), and Settings.Sampling must be WithReplacement when
// Clients is set.
type FedEAiPOD struct {
	// EAiPOD holds the steps, probabilities, counts and per-client batch
	// sizes (0: the client's whole shard); its Lower must be nil.
	EAiPOD
	// Clients is the federation; nil means one client owning both data
	// sets, which runs EAiPOD without constraints bit for bit.
	Clients *Federation
}

// FedE2AiPOD is E2-AiPOD in federated bilevel learning, paper 004 Algorithm
// 6 (E2-AiPOD branch) with Algorithms 7 and 9. Iteration k, clients in
// parallel from their own x_m:
//
//	lower: S ProxSkip steps as in FedEAiPOD (Algorithm 7).
//	medium (Algorithm 9): N ProxSkip steps on u_m, e_m with the local
//	  ∇y f_m + ∇yy g_m u_m; with probability q (shared coin) the clients
//	  send û_m − (ρ/q) e_m and receive the average: one implicit round.
//	upper: x_m ← x_m − α(∇x f_m + ∇xy g_m u_m); if k mod T = 0 the server
//	  averages the x_m: one upper round.
//
// Algorithm 9 draws one coin per client (θ̃_m); a round is a server
// decision, so one shared coin is used (as Algorithm 7 does), which is what
// the averaging of eq. 17b needs. Algorithm 6 writes "K mod T" for k mod T.
// Rounds per iteration: lower ~ Binomial(S, p), implicit ~ Binomial(N, q),
// upper 1 every T iterations. Client copies: State.Vecs "fede2aipod.x",
// "fede2aipod.y", "fede2aipod.r" (and "fede2aipod.u", "fede2aipod.e" with
// WarmStart); State.X and State.Y are the averages x̄, ȳ (the virtual
// iterates of the analysis, line 401), computed for monitoring.
type FedE2AiPOD struct {
	// E2AiPOD holds the settings, per client; its Lower must be nil.
	E2AiPOD
	// Clients is the federation; nil means one client owning both data
	// sets, which runs E2AiPOD without constraints bit for bit.
	Clients *Federation
}

// FedNestBaseline is a simplified FedNest-style baseline for comparison
// with FedEAiPOD and FedE2AiPOD. FedNest (Tarzanagh, Li, Thrampoulidis,
// Oymak, "FedNest: Federated Bilevel, Minimax, and Compositional
// Optimization", ICML 2022) is not among shared/papers; this follows its
// structure as paper 004 describes it (Section 5, Table 2: SGD-type lower
// and upper updates, hypergradient by communicated Hessian-vector products,
// line 1758) and omits FedNest's SVRG corrections and local steps.
// Iteration k, with consensus x_k, y_k:
//
//	lower, S rounds: y ← y − β mean_m ∇y g_m(x_k, y; φ_m)         (one lower round each)
//	w: Algorithm 8 as in FedEAiPOD                                 (1 + J implicit rounds)
//	upper: x_{k+1} = x_k − α mean_m (∇x f_m + ∇xy g_m u)            (one upper round)
//
// It is federated AiPOD with communication at every lower step: with
// whole-shard batches, FedEAiPOD with p = 1, T = 1 and δ = 1 computes the
// same iterates up to rounding (with minibatches its coin draws shift the
// random stream).
// Iteration.HypergradNorm is ‖mean_m (∇x f_m + ∇xy g_m u)‖.
type FedNestBaseline struct {
	// Alpha is the upper step α (no default); Beta the lower step β (0:
	// 1/L as in AiPOD); S the lower rounds per iteration (0: 5); N, Eta and
	// Series the Neumann estimate as in AiPOD (0: 10, 1/L, RandomTerm).
	Alpha, Beta float64
	S, N        int
	Eta         float64
	Series      NeumannEstimator
	// InnerBatch, HessianBatch and UpperBatch are per-client batch sizes
	// as in AiPOD; 0 means the client's whole shard.
	InnerBatch, HessianBatch, UpperBatch int
	// Clients is the federation; nil means one client owning both data sets.
	Clients *Federation
}

var (
	_ Method = FedEAiPOD{}
	_ Method = FedE2AiPOD{}
	_ Method = FedNestBaseline{}
)

// fedCheck validates what every federated method needs: no projections,
// a valid federation, batch sizes within the smallest shard, and sampling
// with replacement when there are shards.
func fedCheck(name string, f *Federation, p oracle.Problem, st *State, inner, hessian, upper int) error {
	if px, py := st.Projections(); px != nil || py != nil {
		return fmt.Errorf("%s: remove Settings.ProjectX and ProjectY: the constraints of the federated problem are the consensus sets (paper 004 eq. 22)", name)
	}
	if f == nil {
		return nil
	}
	if err := f.validate(name+".Clients", p); err != nil {
		return err
	}
	if st.run != nil && st.run.sampling != WithReplacement {
		return fmt.Errorf("%s: clients sample their shards with replacement: set Settings.Sampling to WithReplacement", name)
	}
	for _, b := range []struct {
		field string
		size  int
		set   DataSet
	}{{"InnerBatch", inner, Lower}, {"HessianBatch", hessian, Lower}, {"UpperBatch", upper, Upper}} {
		if n := f.minShard(b.set); b.size > n {
			return fmt.Errorf("%s.%s = %d exceeds the smallest client shard (%d samples): set it ≤ %d, or 0 for each client's whole shard", name, b.field, b.size, n, n)
		}
	}
	return nil
}

// fedEnv returns the environment of a federated run with M clients.
func fedEnv(p oracle.Problem, st *State, f *Federation) *aipodEnv {
	e := &aipodEnv{p: p, st: st, m: 1}
	if f != nil {
		e.m, e.lower, e.upper = f.Clients(), f.Lower, f.Upper
	}
	return e
}

// fedClients returns the number of clients of f (1 for nil).
func fedClients(f *Federation) int {
	if f == nil {
		return 1
	}
	return f.Clients()
}

// fedCopies makes sure the State vector name holds M client copies,
// creating it with every client at v.
func fedCopies(st *State, name string, v []float64, m int) error {
	if s, ok := st.Vecs[name]; ok {
		if len(s) != m*len(v) {
			return fmt.Errorf("the State holds %q of length %d, not %d clients × %d: resume with the Federation of the run that made it", name, len(s), m, len(v))
		}
		return nil
	}
	s := st.Vec(name, m*len(v))
	for c := range m {
		copy(s[c*len(v):], v)
	}
	return nil
}

// fedZeros makes sure the State vector name exists with m·n entries,
// creating it with zeros.
func fedZeros(st *State, name string, m, n int) error {
	if s, ok := st.Vecs[name]; ok && len(s) != m*n {
		return fmt.Errorf("the State holds %q of length %d, not %d clients × %d: resume with the Federation of the run that made it", name, len(s), m, n)
	}
	st.Vec(name, m*n)
	return nil
}

// Init implements Method. It creates the client copies of y (at y0) and r
// (zeros) if missing and estimates L if Beta or Eta is 0.
func (m FedEAiPOD) Init(p oracle.Problem, st *State) error {
	n := fedClients(m.Clients)
	return methodInit{name: "FedEAiPOD", checks: []error{
		m.EAiPOD.check("FedEAiPOD", p),
		fedNoLower("FedEAiPOD", m.Lower),
		checkDelta("FedEAiPOD.Delta", m.Delta, nil),
		fedCheck("FedEAiPOD", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
		fedCopies(st, "fedeaipod.y", st.Y, n),
		fedZeros(st, "fedeaipod.r", n, p.DimY()),
	}, steps: []float64{m.Beta, m.Eta}}.run(p, st)
}

// fedNoLower rejects a lower set: the federated problem's lower constraint
// is the consensus set.
func fedNoLower(name string, l *LowerEquality) error {
	if l != nil {
		return errors.New(name + ".Lower must be nil: the lower constraint of the federated problem is the consensus set")
	}
	return nil
}

// Iterate implements Method.
func (m FedEAiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dy := p.DimY()
	e := fedEnv(p, st, m.Clients)
	e.x = aipodSame(st.X, e.m)
	e.y = aipodViews(st.Vecs["fedeaipod.y"], e.m, dy)
	it, err := m.EAiPOD.iterate(e, aipodViews(st.Vecs["fedeaipod.r"], e.m, dy))
	aipodMean(st.Y, e.y)
	return it, err
}

// Init implements Method. It creates the client copies of x, y (at x0, y0),
// r (and u, e with WarmStart) if missing and estimates L if Beta or Rho is 0.
func (m FedE2AiPOD) Init(p oracle.Problem, st *State) error {
	n, dy := fedClients(m.Clients), p.DimY()
	checks := []error{
		m.E2AiPOD.check("FedE2AiPOD", p),
		fedNoLower("FedE2AiPOD", m.Lower),
		fedCheck("FedE2AiPOD", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
	}
	if firstErr(checks...) == nil {
		checks = append(checks, fedCopies(st, "fede2aipod.x", st.X, n), fedCopies(st, "fede2aipod.y", st.Y, n), fedZeros(st, "fede2aipod.r", n, dy))
		if m.WarmStart {
			checks = append(checks, fedZeros(st, "fede2aipod.u", n, dy), fedZeros(st, "fede2aipod.e", n, dy))
		}
	}
	return methodInit{name: "FedE2AiPOD", checks: checks, steps: []float64{m.Beta, m.Rho}}.run(p, st)
}

// Iterate implements Method.
func (m FedE2AiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	e := fedEnv(p, st, m.Clients)
	e.x = aipodViews(st.Vecs["fede2aipod.x"], e.m, dx)
	e.y = aipodViews(st.Vecs["fede2aipod.y"], e.m, dy)
	var u, ev []float64
	if m.WarmStart {
		u, ev = st.Vecs["fede2aipod.u"], st.Vecs["fede2aipod.e"]
	} else {
		u, ev = st.Work("fede2aipod.u", e.m*dy), st.Work("fede2aipod.e", e.m*dy)
	}
	old := st.Work("fede2aipod.xold", dx)
	copy(old, st.X)
	err := m.E2AiPOD.iterate(e, aipodViews(st.Vecs["fede2aipod.r"], e.m, dy), u, ev)
	aipodMean(st.X, e.x)
	aipodMean(st.Y, e.y)
	if err != nil {
		return Iteration{}, err
	}
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, m.Alpha)}, nil
}

// clientMean is the lower-level gradient of FedNestBaseline's lower step:
// the mean of the clients' ∇y g_m, each on a fresh batch of size samples
// of its shard, one lower round per call.
type clientMean struct {
	e    *aipodEnv
	size int
}

func (c clientMean) GradG(_, dy, x, y []float64, _ []int) {
	gy := c.e.works("fednest.gy", len(dy))
	for m := range c.e.m {
		c.e.p.GradG(nil, gy[m], x, y, c.e.batch(Lower, m, c.size))
	}
	aipodMean(dy, gy)
	c.e.count(keyRoundsLower)
}

// Init implements Method. It estimates L if Beta or Eta is 0.
func (m FedNestBaseline) Init(p oracle.Problem, st *State) error {
	return methodInit{name: "FedNestBaseline", checks: []error{
		aipodCheckAlpha("FedNestBaseline.Alpha", m.Alpha),
		checkStep("FedNestBaseline.Beta", m.Beta),
		checkStep("FedNestBaseline.Eta", m.Eta),
		checkCount("FedNestBaseline.S", m.S),
		checkCount("FedNestBaseline.N", m.N),
		aipodCheckSeries("FedNestBaseline.Series", m.Series),
		checkBatch(p, "FedNestBaseline.InnerBatch", m.InnerBatch, Lower),
		checkBatch(p, "FedNestBaseline.HessianBatch", m.HessianBatch, Lower),
		checkBatch(p, "FedNestBaseline.UpperBatch", m.UpperBatch, Upper),
		fedCheck("FedNestBaseline", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
	}, steps: []float64{m.Beta, m.Eta}}.run(p, st)
}

// Iterate implements Method.
func (m FedNestBaseline) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	dx, dy := p.DimX(), p.DimY()
	e := fedEnv(p, st, m.Clients)
	e.x, e.y = aipodSame(st.X, e.m), aipodSame(st.Y, e.m)
	// S lower rounds: gradient descent on the clients' mean ∇y g.
	mean := clientMean{e: e, size: m.InnerBatch}
	if err := unroll.Descend(mean, st.X, st.Y, count(m.S, 5), stepOrDefault(m.Beta, st), nil, st.Work("fednest.gbar", dy)); err != nil {
		return Iteration{}, err
	}
	h, c := st.Work("fednest.h", e.m*dx), st.Work("fednest.c", e.m*dx)
	if err := e.hypergradient(h, c, stepOrDefault(m.Eta, st), count(m.N, 10), m.Series, m.HessianBatch, m.UpperBatch); err != nil {
		return Iteration{}, err
	}
	hbar := st.Work("fednest.hbar", dx)
	aipodMean(hbar, aipodViews(h, e.m, dx))
	e.count(keyRoundsUpper)
	floats.AddScaled(st.X, -m.Alpha, hbar)
	return Iteration{HypergradNorm: floats.Norm(hbar, 2)}, nil
}
