package optim

// Federated bilevel learning, paper 004 Section 5 and Appendix E (Xiao,
// Shen, Yin, Chen, shared/papers/004_0b814357b1b03328.txt):
//
//	min_x (1/M) Σ_m f_m(x_m, y*_m),  y* = argmin_y (1/M) Σ_m g_m(x_m, y_m)
//	subject to the consensus constraints x_1 = … = x_M, y_1 = … = y_M      (eq. 21)
//
// Client m's f_m and g_m are its oracles on its own data: the Problem's F
// and G restricted to the client's shards of the upper and lower data sets
// (a Federation, simulated in this process), or a problem of its own
// (LocalClients, or a process of package dist). The consensus sets are
// affine with V₂ = 1_M/√M ⊗ I (eq. 22), so projecting onto them is
// averaging the clients' vectors (eq. 24) and every projection is one
// communication round (a FedRound); Rounds counts them per level. With
// shards of equal size, (1/M) Σ_m f_m is the Problem's f and likewise for
// g. See fedclients.go for how a method talks to its clients.

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gobilevel/bilevel/oracle"
)

// Federation assigns the samples of a Problem's data sets to M clients
// simulated in this process (FedClients): client m owns the lower-level
// samples Lower[m] and the upper-level samples Upper[m]. Shards must be
// nonempty and disjoint; they need not cover the data sets. A client's
// "whole data set" (batch size 0) is its shard; its minibatches are drawn
// uniformly with replacement from the shard with the run's random stream.
// Build shards with ShardsEven, ShardsIID, ShardsByLabel (non-iid) or
// ShardsBy.
type Federation struct {
	Lower, Upper [][]int
}

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

// minClient returns the size of the smallest client data set of set.
func minClient(c FedClients, set DataSet) int {
	n := -1
	for m := range c.Clients() {
		lower, upper := c.Sizes(m)
		k := lower
		if set == Upper {
			k = upper
		}
		if n < 0 || k < n {
			n = k
		}
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
// This is EAiPOD applied to eq. 21 with the consensus sets of eq. 22, and it
// computes what EAiPOD computes (the clients' steps are EAiPOD's
// formulas; see fedclients.go). Errata of Appendix E followed (see the
// digest, shared/digests/papers-000_004.md II.8): Algorithm 6 evaluates
// ∇x f_m at x_m^k inside the T-loop, but eq. 11b says x^{k,t}, which is used;
// it aggregates with δ Σ_m Δ_m, but eq. 12 implies δ · (1/M) Σ_m Δ_m, which
// is used; its sign "− w_m" with Algorithm 8's w_m = −∇xy g v equals eq. 9b's
// "+ ∇xy g u" used here; Algorithm 7's factor β/β is p/β (eq. 10c);
// Algorithm 8 line 13 evaluates at y_m^k where y_m^{k+1} is meant. Every
// client takes part in every round (Algorithms 6–9 have no sampling of
// clients): a client that does not answer stops the run with an error
// naming it.
//
// Rounds per iteration: lower ~ Binomial(S, p), implicit 1 + J (J = N' or
// N−1), upper 1; each sends M vectors to the server (d_y floats for the
// lower and implicit rounds, d_x for the upper one) and M back (the
// average; the upper round's is x_{k+1}, sent with the next iteration's
// first task). Oracle calls per client as EAiPOD. The client copies are
// State.Vecs "fedeaipod.y" and "fedeaipod.r" (M·DimY, client-major) when
// Clients is a Federation, and in the clients otherwise; State.Y is their
// average ȳ (asked of the clients after each iteration for monitoring,
// not a round of the algorithm) and State.X the server's x.
// Settings.ProjectX and ProjectY must be nil (the consensus is the
// constraint), and Settings.Sampling must be WithReplacement when Clients
// is set.
type FedEAiPOD struct {
	// EAiPOD holds the steps, probabilities, counts and per-client batch
	// sizes (0: the client's whole data); its Lower must be nil.
	EAiPOD
	// Clients are the clients: a *Federation (simulated in this process
	// on the Problem's data), LocalClients, or clients on other machines
	// (package dist). Nil means one client owning both data sets, which
	// runs EAiPOD without constraints bit for bit.
	Clients FedClients
}

// FedE2AiPOD is E2-AiPOD in federated bilevel learning, paper 004 Algorithm
// 6 (E2-AiPOD branch) with Algorithms 7 and 9. Iteration k, clients in
// parallel from their own x_m:
//
//	lower: S ProxSkip steps as in FedEAiPOD (Algorithm 7).
//	medium (Algorithm 9): N ProxSkip steps on u_m, e_m with the local
//	  ∇y f_m + ∇yy g_m u_m; with probability q (shared coin) the clients
//	  send û_m − (ρ/q) e_m and receive the average: one implicit round.
//	upper: x_m ← x_m − α(∇x f_m + ∇xy g_m u_m); if k mod T = 0 the clients
//	  send x_m and receive the average: one upper round.
//
// Algorithm 9 draws one coin per client (θ̃_m); a round is a server
// decision, so one shared coin is used (as Algorithm 7 does), which is what
// the averaging of eq. 17b needs. Algorithm 6 writes "K mod T" for k mod T.
// Every client takes part in every round, as in FedEAiPOD.
// Rounds per iteration: lower ~ Binomial(S, p), implicit ~ Binomial(N, q),
// upper 1 every T iterations. Client copies: State.Vecs "fede2aipod.x",
// "fede2aipod.y", "fede2aipod.r" (and "fede2aipod.u", "fede2aipod.e" with
// WarmStart) for a Federation, in the clients otherwise; State.X and
// State.Y are the averages x̄, ȳ (the virtual iterates of the analysis,
// line 401), asked of the clients for monitoring.
type FedE2AiPOD struct {
	// E2AiPOD holds the settings, per client; its Lower must be nil.
	E2AiPOD
	// Clients are the clients, as for FedEAiPOD; nil means one client
	// owning both data sets, which runs E2AiPOD without constraints bit
	// for bit.
	Clients FedClients
}

var (
	_ Method = FedEAiPOD{}
	_ Method = FedE2AiPOD{}
)

// fedCheck validates what every federated method needs: no projections,
// a valid federation, batch sizes within the smallest client's data, and
// sampling with replacement when there are several clients.
func fedCheck(name string, c FedClients, p oracle.Problem, st *State, inner, hessian, upper int) error {
	if px, py := st.Projections(); px != nil || py != nil {
		return fmt.Errorf("%s: remove Settings.ProjectX and ProjectY: the constraints of the federated problem are the consensus sets (paper 004 eq. 22)", name)
	}
	if f, ok := c.(*Federation); c == nil || ok && f == nil {
		return nil
	} else if ok {
		if err := f.validate(name+".Clients", p); err != nil {
			return err
		}
	}
	if c.Clients() < 1 {
		return fmt.Errorf("%s.Clients has no client", name)
	}
	if st.run != nil && st.run.sampling != WithReplacement {
		return fmt.Errorf("%s: clients sample their data with replacement: set Settings.Sampling to WithReplacement", name)
	}
	for _, b := range []struct {
		field string
		size  int
		set   DataSet
	}{{"InnerBatch", inner, Lower}, {"HessianBatch", hessian, Lower}, {"UpperBatch", upper, Upper}} {
		if n := minClient(c, b.set); b.size > n {
			return fmt.Errorf("%s.%s = %d exceeds the smallest client's data (%d samples): set it ≤ %d, or 0 for each client's whole data", name, b.field, b.size, n, n)
		}
	}
	return nil
}

// fedClients returns the number of clients of c (1 for nil).
func fedClients(c FedClients) int {
	if c == nil {
		return 1
	}
	return c.Clients()
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
// (zeros) — in the State for a Federation, by a setup round otherwise —
// and estimates L if Beta or Eta is 0.
func (m FedEAiPOD) Init(p oracle.Problem, st *State) error {
	n := fedClients(m.Clients)
	checks := []error{
		m.EAiPOD.check("FedEAiPOD", p),
		fedCheckSeries("FedEAiPOD.Series", m.Series),
		fedNoLower("FedEAiPOD", m.Lower),
		checkDelta("FedEAiPOD.Delta", m.Delta, nil),
		fedCheck("FedEAiPOD", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
	}
	if firstErr(checks...) == nil && inState(m.Clients) {
		checks = append(checks, fedCopies(st, "fedeaipod.y", st.Y, n), fedZeros(st, "fedeaipod.r", n, p.DimY()))
	}
	if err := (methodInit{name: "FedEAiPOD", checks: checks, steps: []float64{m.Beta, m.Eta}}).run(p, st); err != nil {
		return err
	}
	return newFedServer(m.Clients, p, st, "fedeaipod").setup("FedEAiPOD", []FedStep{{Op: fedSet, Name: "y", Vec: st.Y}, {Op: fedZero, Name: "r"}})
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
	s := newFedServer(m.Clients, p, st, "fedeaipod")
	s.local(func(int) []FedStep { return []FedStep{{Op: fedSet, Name: "x", Vec: st.X}} })
	if err := s.proxSkip(stepOrDefault(m.Beta, st), aipodFloat(m.P, 0.3), count(m.S, 5), m.InnerBatch); err != nil {
		return Iteration{}, err
	}
	v, _, err := s.neumann(nil, false, stepOrDefault(m.Eta, st), count(m.N, 10), m.Series, m.HessianBatch, m.UpperBatch)
	if err != nil {
		return Iteration{}, err
	}
	// 11a, 11b: T local steps from x_k with the delayed cross term C·v of
	// x_k, on a fresh upper batch for t ≥ 1; then the upper round.
	alpha, t := m.Alpha, count(m.T, 1)
	hb := make([][]int, s.m)
	for c := range s.m {
		hb[c] = s.batch(Lower, c, m.HessianBatch)
	}
	xl, err := s.round(FedUpper, nil, false, func(c int) []FedStep {
		steps := []FedStep{{Op: fedCross, Batch: hb[c], Vec: v}, {Op: fedLocalX0, A: alpha}}
		for range t - 1 {
			steps = append(steps, FedStep{Op: fedLocalX, Batch: s.batch(Upper, c, m.UpperBatch), A: alpha})
		}
		return append(steps, send("xl"))
	})
	if err != nil {
		return Iteration{}, err
	}
	// 12: x_{k+1} = x_k + δ (mean_m x_m^{k,T} − x_k).
	dx := p.DimX()
	xbar, old := st.Work("fedeaipod/server.xbar", dx), st.Work("fedeaipod/server.xold", dx)
	if _, err := mean(xbar, xl); err != nil {
		return Iteration{}, err
	}
	copy(old, st.X)
	delta := aipodFloat(m.Delta, 1)
	for i, xb := range xbar {
		st.X[i] += delta * (xb - st.X[i])
	}
	if err := s.monitor(false); err != nil {
		return Iteration{}, err
	}
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, alpha*delta*float64(t))}, nil
}

// Init implements Method. It creates the client copies of x, y (at x0, y0),
// r (and u, e with WarmStart) — in the State for a Federation, by a setup
// round otherwise — and estimates L if Beta or Rho is 0.
func (m FedE2AiPOD) Init(p oracle.Problem, st *State) error {
	n, dy := fedClients(m.Clients), p.DimY()
	checks := []error{
		m.E2AiPOD.check("FedE2AiPOD", p),
		fedNoLower("FedE2AiPOD", m.Lower),
		fedCheck("FedE2AiPOD", m.Clients, p, st, m.InnerBatch, m.HessianBatch, m.UpperBatch),
	}
	if firstErr(checks...) == nil && inState(m.Clients) {
		checks = append(checks, fedCopies(st, "fede2aipod.x", st.X, n), fedCopies(st, "fede2aipod.y", st.Y, n), fedZeros(st, "fede2aipod.r", n, dy))
		if m.WarmStart {
			checks = append(checks, fedZeros(st, "fede2aipod.u", n, dy), fedZeros(st, "fede2aipod.e", n, dy))
		}
	}
	if err := (methodInit{name: "FedE2AiPOD", checks: checks, steps: []float64{m.Beta, m.Rho}}).run(p, st); err != nil {
		return err
	}
	return newFedServer(m.Clients, p, st, "fede2aipod").setup("FedE2AiPOD", []FedStep{{Op: fedSet, Name: "x", Vec: st.X},
		{Op: fedSet, Name: "y", Vec: st.Y}, {Op: fedZero, Name: "r"}, {Op: fedZero, Name: "u"}, {Op: fedZero, Name: "e"}})
}

// Iterate implements Method.
func (m FedE2AiPOD) Iterate(p oracle.Problem, st *State) (Iteration, error) {
	s := newFedServer(m.Clients, p, st, "fede2aipod")
	old := st.Work("fede2aipod/server.xold", p.DimX())
	copy(old, st.X)
	if err := s.proxSkip(stepOrDefault(m.Beta, st), aipodFloat(m.P, 0.3), count(m.S, 5), m.InnerBatch); err != nil {
		return Iteration{}, err
	}
	// 18a's ∇x f_m and 17a's first ∇y f_m on one upper batch, kept by the
	// clients; then the medium level (Algorithm 9) from u = e = 0 (or,
	// WarmStart, the last iteration's).
	s.local(func(c int) []FedStep {
		steps := []FedStep{{Op: fedGradF, Batch: s.batch(Upper, c, m.UpperBatch)}}
		if !m.WarmStart {
			steps = append(steps, FedStep{Op: fedZero, Name: "u"}, FedStep{Op: fedZero, Name: "e"})
		}
		return steps
	})
	if err := s.medium(stepOrDefault(m.Rho, st), aipodFloat(m.Q, 0.3), count(m.N, 10), m.HessianBatch, m.UpperBatch, !m.WarmStart); err != nil {
		return Iteration{}, err
	}
	// 18a, 18b: the local x-step, and every T iterations the upper round.
	s.local(func(c int) []FedStep {
		return []FedStep{{Op: fedE2Upper, Batch: s.batch(Lower, c, m.HessianBatch), A: m.Alpha}}
	})
	if st.Iter%count(m.T, 1) == 0 {
		xs, err := s.round(FedUpper, nil, false, func(int) []FedStep { return []FedStep{send("x")} })
		if err != nil {
			return Iteration{}, err
		}
		xbar := make([]float64, p.DimX())
		if _, err := mean(xbar, xs); err != nil {
			return Iteration{}, err
		}
		s.local(func(int) []FedStep { return []FedStep{{Op: fedSet, Name: "x", Vec: xbar}} })
	}
	if err := s.monitor(true); err != nil {
		return Iteration{}, err
	}
	return Iteration{HypergradNorm: aipodStepNorm(old, st.X, m.Alpha)}, nil
}

// medium runs n steps of the medium-level ProxSkip of E2-AiPOD (Algorithm
// 9 of paper 004, eqs. 17a–c) on the clients' u_m and e_m:
//
//	û_m = u_m − ρ (∇y f_m(ξ_(n)) + ∇yy g_m(φ_(n)) u_m − e_m)        (17a)
//	with probability q (one shared coin):
//	  the clients send û_m − (ρ/q) e_m and receive the average ū,
//	  u_m = ū,  e_m += (q/ρ)(u_m − û_m)                            (17b, 17c)
//	otherwise u_m = û_m,
//
// one implicit round per coin. Step 0 uses the ∇y f_m the clients kept
// (on ξ^k); steps n ≥ 1 draw fresh upper batches of size ob, or reuse it
// when ob = 0 (the whole data gives the same vector). When cold (u_m = 0
// at step 0) the first product is skipped.
func (s *fedServer) medium(rho, q float64, n, hb, ob int, cold bool) error {
	rq, qr := rho/q, q/rho
	for step := range n {
		steps := make([][]FedStep, s.m)
		for c := range s.m {
			src := "fy"
			if step > 0 && ob > 0 {
				steps[c] = append(steps[c], FedStep{Op: fedUpperGradY, Batch: s.batch(Upper, c, ob)})
				src = "fg"
			}
			hat := FedStep{Op: fedMediumHat, Name: src, A: rho, B: 1}
			if step > 0 || !cold {
				hat.Batch, hat.B = s.batch(Lower, c, hb), 0
			}
			steps[c] = append(steps[c], hat)
		}
		if s.st.Rand().Float64() >= q {
			s.local(func(c int) []FedStep { return append(steps[c], FedStep{Op: fedMediumKeep}) })
			continue
		}
		z, err := s.round(FedImplicit, nil, false, func(c int) []FedStep {
			return append(steps[c], FedStep{Op: fedMediumOut, A: rq}, send("z"))
		})
		if err != nil {
			return err
		}
		ubar := make([]float64, s.p.DimY())
		if _, err := mean(ubar, z); err != nil {
			return err
		}
		s.local(func(int) []FedStep { return []FedStep{{Op: fedMediumIn, Vec: ubar, A: qr}} })
	}
	return nil
}
