package optim

// The clients of a federated run, written once for every place a client
// can be. A federated method (FedEAiPOD, FedE2AiPOD, FedNest) is the
// server's side of its algorithm: it keeps what the server knows (x, the
// averages it forms, the random stream), and asks the clients for what
// the algorithm has them compute and send, one round at a time. A round
// sends each participating client a FedTask — the steps of the algorithm
// the client runs on its own data and its own state, with the vectors the
// server broadcasts — and gets back the vector the client sends. The
// clients' side is FedClient.Run, the same code wherever the client runs:
// in this process on a part of the problem's data (Federation), in this
// process on a problem of its own (LocalClients), or in a process of its
// own on another machine (package dist). So runs are the same bit for
// bit whichever holds the clients.
//
// The server draws every random number of the run from its State's
// stream — the minibatches of each client (positions in the client's
// data, which is all the server knows of it: its sizes), the coins of
// ProxSkip, the clients taking part — in the order of the simulation that
// preceded this design, and sends the positions with the task. A run is
// therefore reproducible from the server's State alone, and resumable from
// its checkpoint when the clients' state is in the State too (Federation).

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
)

// FedClients is the server's side of the M clients of a federated run.
type FedClients interface {
	// Clients returns M.
	Clients() int
	// Sizes returns the numbers of lower- and upper-level samples client
	// m holds: what the server knows of a client's data. It draws the
	// positions of the client's minibatches from them.
	Sizes(m int) (lower, upper int)
	// Round runs r: it sends each task to its client and stores the
	// clients' replies in r.Replies, in the order of r.Tasks, and the
	// clients' oracle calls in r.Calls. A client that cannot answer makes
	// the round fail with an error naming it, unless r.Optional: then its
	// reply is nil and the round goes on without it (every wait has a
	// deadline).
	Round(r *FedRound) error
}

// FedLevel says what a round is for: which counter of Rounds it adds to,
// or none.
type FedLevel uint8

const (
	// FedSetup is the broadcast of the starting point to clients that keep
	// their own state: part of no iteration.
	FedSetup FedLevel = iota
	// FedLower, FedImplicit and FedUpper are the rounds Rounds.Lower,
	// Rounds.Implicit and Rounds.Upper count.
	FedLower
	FedImplicit
	FedUpper
	// FedMonitor asks the clients for their copies of y (and x), whose
	// average State.Y (and State.X) holds for monitoring: not a round of
	// the algorithm, which never sends them.
	FedMonitor
	fedLevels
)

var fedLevelNames = [fedLevels]string{"setup", "lower", "implicit", "upper", "monitor"}

func (l FedLevel) String() string {
	if l < fedLevels {
		return fedLevelNames[l]
	}
	return fmt.Sprintf("FedLevel(%d)", int(l))
}

// FedRound is one exchange between the server and the clients of Tasks.
type FedRound struct {
	Level FedLevel
	Tasks []FedTask
	// Optional lets the round go on without the clients that cannot
	// answer (their replies are nil), as partial participation allows.
	Optional bool
	// Replies and Calls are set by Round: each client's reply, and the
	// oracle calls the clients made that the run's problem did not count.
	Replies [][]float64
	Calls   oracle.Calls

	// the run, for the implementations whose clients are parts of it
	p  oracle.Problem
	st *State
}

// FedTask is what one client does in a round: its Steps, in order, on its
// own data and on its vectors, which are named within State (the method's
// namespace, "fedeaipod", say). Its reply is the concatenation of the
// vectors its send steps name.
type FedTask struct {
	Client int
	State  string
	// Run identifies the run (0 for a run that sends no starting point:
	// FedNest). Fresh says that the task sets every vector of the
	// client's state it reads: a client that holds no state of the run
	// (a restarted process, or one that served another run since) runs
	// only a Fresh task, which makes the state the run's; any other task
	// fails with ErrFedStale.
	Run   uint64
	Fresh bool
	Steps []FedStep
}

// ErrFedStale is the error of a client asked for a task that reads the
// state of a run the client does not hold.
var ErrFedStale = errors.New("the client holds no state of this run (its process was restarted, or it served another run since)")

// FedStep is one step of a client's task. Op is the client's procedure;
// Name, Batch, Vec, A and B are its arguments, used as the procedure
// says: a vector name, the positions of a minibatch in the client's data
// (nil: all of it), a vector the server sends, and two scalars (step
// sizes, probabilities).
type FedStep struct {
	Op    FedOp
	Name  string
	Batch []int
	Vec   []float64
	A, B  float64
}

// FedOp names a client procedure. The procedures are the clients' side of
// FedEAiPOD, FedE2AiPOD and FedNest; see the methods.
type FedOp uint8

// The client procedures. x, y, r, u, e are the client's variables of the
// algorithms; the others are its scratch.
const (
	fedSet        FedOp = 1 + iota // Name = Vec (x, y)
	fedZero                        // Name = 0 (r, u, e)
	fedSend                        // the reply gets Name
	fedProxStep                    // ProxSkip step without projection: ŷ = y − A(∇y g(Batch) − r), y = ŷ
	fedProxOut                     // ŷ = y − A(∇y g(Batch) − r), z = ŷ − B·r
	fedProxIn                      // y = Vec, r += A(y − ŷ)
	fedGradF                       // gx, fy = ∇x f, ∇y f on Batch
	fedHVP                         // t = ∇yy g(Batch)·Vec
	fedCross                       // v = Vec, c = ∇xy g(Batch)·v, h = gx − c
	fedLocalX0                     // xl = x − A·h
	fedLocalX                      // gl = ∇x f(xl; Batch) − c, xl −= A·gl
	fedUpperGradY                  // fg = ∇y f on Batch
	fedMediumHat                   // û = u − A(Name + ∇yy g(Batch)·u − e); B = 1 skips the product (u = 0)
	fedMediumKeep                  // u = û
	fedMediumOut                   // z = û − A·e
	fedMediumIn                    // u = Vec, e += A(u − û)
	fedE2Upper                     // h = gx + ∇xy g(Batch)·u, x −= A·h
	fedGradGY                      // q = ∇y g on Batch
	fedSVRGY0                      // qbar = Vec, yl = y − A·qbar
	fedSVRGY                       // yl −= A(∇y g(yl; Batch) − ∇y g(y; Batch) + qbar)
	fedSVRGX0                      // hbar = Vec, xl = x − A·hbar
	fedSVRGXF                      // d = ∇x f(xl; Batch) − ∇x f(x; Batch)
	fedSVRGXG                      // d −= ∇xy g(xl; Batch)·v − ∇xy g(x; Batch)·v, d += hbar, xl −= A·d
	fedOps
)

// fedVecs are the vectors of a client: true for the length of x, false
// for that of y. Set, Zero and Send act only on these names.
var fedVecs = map[string]bool{
	"x": true, "gx": true, "c": true, "h": true, "xl": true, "gl": true, "hbar": true, "d": true, "m0": true, "m1": true,
	"y": false, "r": false, "yhat": false, "z": false, "fy": false, "gy": false, "t": false, "v": false, "fg": false,
	"u": false, "e": false, "uhat": false, "hu": false, "q": false, "qbar": false, "yl": false, "g0": false, "g1": false,
}

// FedClient runs the tasks of one client: the clients' side of the
// federated methods, on the client's own oracles and state. Client
// processes run one per client (package dist); the in-process FedClients
// run them in this process.
type FedClient struct {
	p     oracle.Problem
	dx    int
	dy    int
	vec   func(name string, n int) []float64
	own   map[string][]float64
	calls oracle.Calls
	reply []float64
	// run is the run whose state the client holds, when valid; a view of
	// a Federation, whose state is the run's own, is trusted.
	run            uint64
	valid, trusted bool
}

// NewFedClient returns a client whose oracles are p, a problem on the
// client's own data (batch positions are p's sample indices), and whose
// state it keeps itself.
func NewFedClient(p oracle.Problem) *FedClient {
	c := &FedClient{p: p, dx: p.DimX(), dy: p.DimY(), own: map[string][]float64{}}
	c.vec = func(name string, n int) []float64 {
		v := c.own[name]
		if len(v) != n {
			v = make([]float64, n)
			c.own[name] = v
		}
		return v
	}
	return c
}

// Run runs t's steps and returns its reply, the vectors its send steps
// name, and the oracle calls it made. The reply is the client's own: a
// later Run may overwrite it. A task that does not fit the client (an
// unknown procedure, a batch position outside its data, a vector of the
// wrong length) is an error, never a panic; so is a panic of an oracle. A
// task of a run whose state the client does not hold is ErrFedStale.
func (c *FedClient) Run(t *FedTask) (reply []float64, calls oracle.Calls, err error) {
	c.calls, c.reply = oracle.Calls{}, c.reply[:0]
	switch {
	case t.Fresh:
		c.run, c.valid = t.Run, true
	case !c.trusted && (!c.valid || c.run != t.Run):
		return nil, oracle.Calls{}, fmt.Errorf("client %d: %w", t.Client, ErrFedStale)
	}
	defer func() {
		if r := recover(); r != nil {
			reply, calls, err = nil, oracle.Calls{}, fmt.Errorf("client %d: %v", t.Client, r)
		}
	}()
	for k := range t.Steps {
		if err := c.step(t.State+".", &t.Steps[k]); err != nil {
			return nil, oracle.Calls{}, fmt.Errorf("client %d, step %d of its task: %w", t.Client, k, err)
		}
	}
	return c.reply, c.calls, nil
}

// check validates a step's arguments against the client.
func (c *FedClient) check(s *FedStep) error {
	if s.Op == 0 || s.Op >= fedOps {
		return fmt.Errorf("unknown procedure %d", s.Op)
	}
	n, set := c.p.NumLower(), "lower"
	switch s.Op {
	case fedGradF, fedLocalX, fedUpperGradY, fedSVRGXF:
		n, set = c.p.NumUpper(), "upper"
	}
	if s.Batch != nil && len(s.Batch) == 0 {
		return errors.New("an empty batch")
	}
	for _, i := range s.Batch {
		if i < 0 || i >= n {
			return fmt.Errorf("batch position %d outside the client's %d %s-level samples", i, n, set)
		}
	}
	want := -1
	switch s.Op {
	case fedSet:
		isX, ok := fedVecs[s.Name]
		if !ok || (s.Name != "x" && s.Name != "y") {
			return fmt.Errorf("cannot set %q", s.Name)
		}
		want = c.dy
		if isX {
			want = c.dx
		}
	case fedProxIn, fedHVP, fedCross, fedMediumIn, fedSVRGY0:
		want = c.dy
	case fedSVRGX0:
		want = c.dx
	case fedZero, fedSend:
		if _, ok := fedVecs[s.Name]; !ok {
			return fmt.Errorf("no vector %q", s.Name)
		}
	case fedMediumHat:
		if s.Name != "fy" && s.Name != "fg" {
			return fmt.Errorf("medium step on %q, not fy or fg", s.Name)
		}
	}
	if want >= 0 && len(s.Vec) != want {
		return fmt.Errorf("a vector of %d entries, want %d", len(s.Vec), want)
	}
	return nil
}

// step runs one step; ns is the namespace of the client's vectors.
func (c *FedClient) step(ns string, s *FedStep) error {
	if err := c.check(s); err != nil {
		return err
	}
	x := func(name string) []float64 { return c.vec(ns+name, c.dx) }
	y := func(name string) []float64 { return c.vec(ns+name, c.dy) }
	named := func() []float64 {
		if fedVecs[s.Name] {
			return x(s.Name)
		}
		return y(s.Name)
	}
	b := s.Batch
	switch s.Op {
	case fedSet:
		copy(named(), s.Vec)
	case fedZero:
		clear(named())
	case fedSend:
		c.reply = append(c.reply, named()...)
	case fedProxStep, fedProxOut:
		yv, r, yh, gy := y("y"), y("r"), y("yhat"), y("gy")
		c.gradG(nil, gy, x("x"), yv, b)
		for i := range yh {
			yh[i] = yv[i] - s.A*(gy[i]-r[i]) // paper 004 eq. 10a
		}
		if s.Op == fedProxStep {
			copy(yv, yh)
			break
		}
		z := y("z")
		for i := range z {
			z[i] = yh[i] - s.B*r[i] // the argument of the projection of 10b
		}
	case fedProxIn:
		yv, r, yh := y("y"), y("r"), y("yhat")
		copy(yv, s.Vec)
		for i := range r {
			r[i] += s.A * (yv[i] - yh[i]) // 10c
		}
	case fedGradF:
		c.gradF(x("gx"), y("fy"), x("x"), y("y"), b)
	case fedHVP:
		c.hvp(y("t"), x("x"), y("y"), s.Vec, b)
	case fedCross:
		v, cv, h := y("v"), x("c"), x("h")
		copy(v, s.Vec)
		c.mixed(cv, x("x"), y("y"), v, b)
		copy(h, x("gx"))
		floats.Sub(h, cv)
	case fedLocalX0:
		xl, h := x("xl"), x("h")
		copy(xl, x("x"))
		for i, hi := range h {
			xl[i] -= s.A * hi
		}
	case fedLocalX:
		xl, g := x("xl"), x("gl")
		c.gradF(g, nil, xl, y("y"), b)
		floats.Sub(g, x("c"))
		for i, gi := range g {
			xl[i] -= s.A * gi
		}
	case fedUpperGradY:
		c.gradF(nil, y("fg"), x("x"), y("y"), b)
	case fedMediumHat:
		u, e, uh, hu, gy := y("u"), y("e"), y("uhat"), y("hu"), y(s.Name)
		if s.B == 1 {
			clear(hu)
		} else {
			c.hvp(hu, x("x"), y("y"), u, b)
		}
		for i := range uh {
			uh[i] = u[i] - s.A*(gy[i]+hu[i]-e[i]) // 17a
		}
	case fedMediumKeep:
		copy(y("u"), y("uhat"))
	case fedMediumOut:
		z, uh, e := y("z"), y("uhat"), y("e")
		for i := range z {
			z[i] = uh[i] - s.A*e[i] // the argument of the projection of 17b
		}
	case fedMediumIn:
		u, e, uh := y("u"), y("e"), y("uhat")
		copy(u, s.Vec)
		for i := range e {
			e[i] += s.A * (u[i] - uh[i]) // 17c
		}
	case fedE2Upper:
		w, h, xv := x("c"), x("h"), x("x")
		c.mixed(w, xv, y("y"), y("u"), b)
		for i := range w {
			w[i] = -w[i]
		}
		copy(h, x("gx"))
		floats.Sub(h, w) // 18a: ∇x f + ∇xy g·u
		for i, hi := range h {
			xv[i] -= s.A * hi // 18b
		}
	case fedGradGY:
		c.gradG(nil, y("q"), x("x"), y("y"), b)
	case fedSVRGY0:
		qbar, yl := y("qbar"), y("yl")
		copy(qbar, s.Vec)
		copy(yl, y("y"))
		for i, q := range qbar {
			yl[i] -= s.A * q
		}
	case fedSVRGY:
		yl, g1, g0, qbar := y("yl"), y("g1"), y("g0"), y("qbar")
		c.gradG(nil, g1, x("x"), yl, b)
		c.gradG(nil, g0, x("x"), y("y"), b)
		for i := range yl {
			yl[i] -= s.A * (g1[i] - g0[i] + qbar[i])
		}
	case fedSVRGX0:
		hbar, xl := x("hbar"), x("xl")
		copy(hbar, s.Vec)
		copy(xl, x("x"))
		for i, h := range hbar {
			xl[i] -= s.A * h
		}
	case fedSVRGXF:
		d, f0 := x("d"), x("gl")
		c.gradF(d, nil, x("xl"), y("y"), b)
		c.gradF(f0, nil, x("x"), y("y"), b)
		floats.Sub(d, f0)
	case fedSVRGXG:
		d, m1, m0, xl, hbar := x("d"), x("m1"), x("m0"), x("xl"), x("hbar")
		c.mixed(m1, xl, y("y"), y("v"), b)
		c.mixed(m0, x("x"), y("y"), y("v"), b)
		for i := range d {
			d[i] += hbar[i] - (m1[i] - m0[i])
			xl[i] -= s.A * d[i]
		}
	}
	return nil
}

func (c *FedClient) gradG(dx, dy, x, y []float64, b []int) {
	c.calls.GradG++
	c.p.GradG(dx, dy, x, y, b)
}

func (c *FedClient) gradF(dx, dy, x, y []float64, b []int) {
	c.calls.GradF++
	c.p.GradF(dx, dy, x, y, b)
}

func (c *FedClient) hvp(dst, x, y, v []float64, b []int) {
	c.calls.HVP++
	c.p.HVP(dst, x, y, v, b)
}

func (c *FedClient) mixed(dst, x, y, v []float64, b []int) {
	c.calls.MixedXY++
	c.p.MixedXY(dst, x, y, v, b)
}

// fedView is client m of a Federation: the run's problem on the client's
// shards, batch positions mapped to the shards' sample indices.
type fedView struct {
	oracle.Problem
	lower, upper []int // nil: the whole data sets (Clients nil)
}

func (v fedView) NumLower() int { return shardLen(v.lower, v.Problem.NumLower()) }
func (v fedView) NumUpper() int { return shardLen(v.upper, v.Problem.NumUpper()) }

func shardLen(sh []int, all int) int {
	if sh == nil {
		return all
	}
	return len(sh)
}

// at returns the sample indices of batch positions b of shard sh.
func at(sh, b []int) []int {
	switch {
	case sh == nil:
		return b
	case b == nil:
		return sh
	}
	g := make([]int, len(b))
	for i, j := range b {
		g[i] = sh[j]
	}
	return g
}

func (v fedView) GradF(dx, dy, x, y []float64, b []int) {
	v.Problem.GradF(dx, dy, x, y, at(v.upper, b))
}
func (v fedView) GradG(dx, dy, x, y []float64, b []int) {
	v.Problem.GradG(dx, dy, x, y, at(v.lower, b))
}
func (v fedView) HVP(dst, x, y, u []float64, b []int) { v.Problem.HVP(dst, x, y, u, at(v.lower, b)) }
func (v fedView) MixedXY(dst, x, y, u []float64, b []int) {
	v.Problem.MixedXY(dst, x, y, u, at(v.lower, b))
}

// Clients returns M; a nil Federation is one client holding both data
// sets.
func (f *Federation) Clients() int {
	if f == nil {
		return 1
	}
	return len(f.Lower)
}

// Sizes returns the sizes of client m's shards.
func (f *Federation) Sizes(m int) (lower, upper int) { return len(f.Lower[m]), len(f.Upper[m]) }

// Round runs the tasks on the clients of f, in this process: client m's
// oracles are the run's problem on its shards (counted by Solve), and its
// vectors are the method's client-major State vectors (State.Vecs, and
// State.Work for scratch), so that a run checkpoints and resumes with its
// clients. A nil Federation is one client holding the whole data sets.
func (f *Federation) Round(r *FedRound) error {
	m := f.Clients()
	r.Replies = make([][]float64, len(r.Tasks))
	for j := range r.Tasks {
		t := &r.Tasks[j]
		view := fedView{Problem: r.p}
		if f != nil {
			view.lower, view.upper = f.Lower[t.Client], f.Upper[t.Client]
		}
		c := &FedClient{p: view, dx: r.p.DimX(), dy: r.p.DimY(), trusted: true, vec: func(name string, n int) []float64 {
			all, ok := r.st.Vecs[name]
			if !ok {
				all = r.st.Work(name, m*n)
			}
			return all[t.Client*n : (t.Client+1)*n : (t.Client+1)*n]
		}}
		reply, _, err := c.Run(t)
		if err != nil {
			return err
		}
		r.Replies[j] = reply
	}
	return nil
}

// LocalClients returns clients in this process whose oracles are ps, one
// problem per client on that client's own data, and which keep their state
// themselves, as client processes do (package dist): the in-process twin
// of clients on other machines, bit for bit. Their state is not in the
// run's State: a run on them resumes only on the same clients, while they
// hold its state (experiment's chunked runs), and fails with ErrFedStale
// otherwise.
func LocalClients(ps []oracle.Problem) FedClients {
	lc := make(localClients, len(ps))
	for m, p := range ps {
		lc[m] = NewFedClient(p)
	}
	return lc
}

type localClients []*FedClient

func (lc localClients) Clients() int { return len(lc) }

func (lc localClients) Sizes(m int) (lower, upper int) { return lc[m].p.NumLower(), lc[m].p.NumUpper() }

func (lc localClients) Round(r *FedRound) error {
	r.Replies = make([][]float64, len(r.Tasks))
	for j := range r.Tasks {
		reply, calls, err := lc[r.Tasks[j].Client].Run(&r.Tasks[j])
		if err != nil {
			return err
		}
		r.Replies[j] = slices.Clone(reply)
		r.Calls = r.Calls.Add(calls)
	}
	return nil
}

// fedServer is the server's side of one iteration of a federated method.
type fedServer struct {
	c     FedClients
	p     oracle.Problem
	st    *State
	state string
	m     int
	// pending holds each client's steps that need no communication (the
	// local steps between rounds), sent with its next task.
	pending [][]FedStep
	// fresh marks the next round's tasks Fresh: they set every vector
	// they read.
	fresh bool
}

func newFedServer(c FedClients, p oracle.Problem, st *State, state string) *fedServer {
	if c == nil {
		c = (*Federation)(nil)
	}
	m := c.Clients()
	return &fedServer{c: c, p: p, st: st, state: state, m: m, pending: make([][]FedStep, m)}
}

// inState reports whether the clients keep their vectors in the run's
// State (and so checkpoint and resume with it).
func inState(c FedClients) bool {
	_, ok := c.(*Federation)
	return c == nil || ok
}

// all returns 0, …, M−1.
func (s *fedServer) all() []int {
	set := make([]int, s.m)
	for i := range set {
		set[i] = i
	}
	return set
}

// batch draws the positions of client m's batch of size samples of the
// data set, uniformly with replacement (nil, all of them, for size 0).
// One client holding the whole data sets (Clients nil) draws as State.Batch
// does, so that it is the centralized method.
func (s *fedServer) batch(set DataSet, m, size int) []int {
	if f, ok := s.c.(*Federation); s.c == nil || ok && f == nil {
		return s.st.Batch(s.p, set, size)
	}
	if size == 0 {
		return nil
	}
	lower, upper := s.c.Sizes(m)
	n := lower
	if set == Upper {
		n = upper
	}
	b := make([]int, size)
	rnd := s.st.Rand()
	for i := range b {
		b[i] = rnd.IntN(n)
	}
	return b
}

// local adds steps to the pending steps of every client.
func (s *fedServer) local(steps func(m int) []FedStep) {
	for m := range s.m {
		s.pending[m] = append(s.pending[m], steps(m)...)
	}
}

// round sends each client of set (nil: all) its pending steps and then
// steps(m), counts the round and the clients' oracle calls, and returns
// the replies in set order (nil for a client an optional round went on
// without). The error names the clients.
func (s *fedServer) round(level FedLevel, set []int, optional bool, steps func(m int) []FedStep) ([][]float64, error) {
	if set == nil {
		set = s.all()
	}
	r := &FedRound{Level: level, Optional: optional, p: s.p, st: s.st}
	for _, m := range set {
		r.Tasks = append(r.Tasks, FedTask{Client: m, State: s.state, Run: s.run(), Fresh: s.fresh, Steps: append(s.pending[m], steps(m)...)})
		s.pending[m] = nil
	}
	s.fresh = false
	if err := s.c.Round(r); err != nil {
		return nil, fmt.Errorf("%s round: %w", level, err)
	}
	if len(r.Replies) != len(set) {
		return nil, fmt.Errorf("%s round: %d replies for %d clients", level, len(r.Replies), len(set))
	}
	s.st.Calls = s.st.Calls.Add(r.Calls)
	switch level {
	case FedLower:
		s.st.Scalars[keyRoundsLower]++
	case FedImplicit:
		s.st.Scalars[keyRoundsImplicit]++
	case FedUpper:
		s.st.Scalars[keyRoundsUpper]++
	}
	return r.Replies, nil
}

// send returns a step that sends the named vector.
func send(name string) FedStep { return FedStep{Op: fedSend, Name: name} }

// mean stores the average of the replies that are not nil, each of
// length len(dst), in dst (aipodMean: with one reply an exact copy), and
// returns how many there were.
func mean(dst []float64, replies [][]float64) (int, error) {
	var got [][]float64
	for _, r := range replies {
		if r == nil {
			continue
		}
		if len(r) != len(dst) {
			return 0, fmt.Errorf("a client sent %d numbers, want %d", len(r), len(dst))
		}
		got = append(got, r)
	}
	if len(got) == 0 {
		return 0, errors.New("no client answered")
	}
	aipodMean(dst, got)
	return len(got), nil
}

// run returns the identity of the run, kept in the State (0 when the
// clients' state is the State's own).
func (s *fedServer) run() uint64 { return uint64(s.st.Scalars[s.state+".run"]) }

// setup starts the run on clients that keep their own state: it gives the
// run an identity (in State.Scalars, so that a resumed State carries it)
// and sends the starting point. A resumed run sends nothing: the clients
// still hold its state, or refuse its tasks.
func (s *fedServer) setup(name string, steps []FedStep) error {
	if inState(s.c) || s.st.Iter > 0 && s.run() != 0 {
		return nil
	}
	s.st.Scalars[s.state+".run"] = float64(1 + binary.LittleEndian.Uint64(randomBits())>>12) // exact in a float64
	r := &FedRound{Level: FedSetup, p: s.p, st: s.st}
	for m := range s.m {
		r.Tasks = append(r.Tasks, FedTask{Client: m, State: s.state, Run: s.run(), Fresh: true, Steps: steps})
	}
	if err := s.c.Round(r); err != nil {
		return fmt.Errorf("%s: sending the starting point: %w", name, err)
	}
	return nil
}

// neumann runs Algorithm 8 of paper 004 on the server (FedIHGP, Algorithm
// 3 of FedNest, is the same): a round in which the clients of set send
// ∇y f_m on an upper batch of size ub (keeping ∇x f_m), then the Neumann
// series on the averages of the clients' Hessian-vector products, one
// round per product on fresh lower batches of size hb, as neumannSeries
// (N terms, step eta, series). It returns v ≈ (∇yy g)⁻¹ ∇y f (the
// paper's −u) and the clients that answered every round.
func (s *fedServer) neumann(set []int, optional bool, eta float64, n int, series NeumannEstimator, hb, ub int) ([]float64, []int, error) {
	dy := s.p.DimY()
	if set == nil {
		set = s.all()
	}
	ubs := make(map[int][]int, len(set))
	for _, m := range set {
		ubs[m] = s.batch(Upper, m, ub)
	}
	fy, err := s.round(FedImplicit, set, optional, func(m int) []FedStep {
		return []FedStep{{Op: fedGradF, Batch: ubs[m]}, send("fy")}
	})
	if err != nil {
		return nil, nil, err
	}
	set = answered(set, fy)
	gy := s.st.Work(s.state+"/server.gy", dy)
	if _, err := mean(gy, fy); err != nil {
		return nil, nil, fmt.Errorf("implicit round: %w", err)
	}
	v := s.st.Work(s.state+"/server.v", dy)
	clear(v) // a cold start
	var truncate func(int) int
	if series == NeumannRandomTerm {
		truncate = s.st.Rand().IntN
	}
	var rerr error
	ops := func(int) implicit.Operator {
		hbs := make(map[int][]int, len(set))
		for _, m := range set {
			hbs[m] = s.batch(Lower, m, hb)
		}
		return func(dst, z []float64) {
			if rerr != nil {
				fillNaN(dst)
				return
			}
			z = slices.Clone(z)
			t, err := s.round(FedImplicit, set, optional, func(m int) []FedStep {
				return []FedStep{{Op: fedHVP, Batch: hbs[m], Vec: z}, send("t")}
			})
			if err == nil {
				set = answered(set, t)
				_, err = mean(dst, t)
			}
			if err != nil {
				rerr = err
				fillNaN(dst)
			}
		}
	}
	_, err = neumannSeries(n, eta, math.Inf(1), truncate, ops)(v, gy)
	if rerr != nil {
		return nil, nil, rerr
	}
	return v, set, err
}

// fedCheckSeries accepts the estimators the federated methods compute:
// the two Neumann series of Algorithm 8 (FedIHGP), whose every product is a
// round.
func fedCheckSeries(name string, series NeumannEstimator) error {
	if series != NeumannRandomTerm && series != NeumannPartialSum {
		return fmt.Errorf("%s = %v: the federated methods estimate the inverse-Hessian product by NeumannRandomTerm or NeumannPartialSum", name, series)
	}
	return nil
}

// answered returns the clients of set whose replies are not nil.
func answered(set []int, replies [][]float64) []int {
	var out []int
	for j, m := range set {
		if replies[j] != nil {
			out = append(out, m)
		}
	}
	return out
}

func fillNaN(v []float64) {
	for i := range v {
		v[i] = math.NaN()
	}
}

// proxSkip runs the lower level of Algorithm 7 of paper 004 (ProxSkip,
// eqs. 10a–c) on the clients: steps steps of size beta on each client's y
// and r, each on a lower batch of size size; with probability p (one coin
// shared by all clients: the server decides a round) the clients send
// ŷ − (β/p) r and receive the average, one lower round. The steps without
// a round are sent with the next task. Algorithm 7 line 7 prints the
// factor of 10c as β/β; it is p/β (paper 004 line 1803). Line 4 evaluates
// ∇y g at x_m^{k,s}; x does not move in the lower loop, so that is x_m^k.
func (s *fedServer) proxSkip(beta, p float64, steps, size int) error {
	bp, pb := beta/p, p/beta
	for range steps {
		b := make([][]int, s.m)
		for m := range s.m {
			b[m] = s.batch(Lower, m, size)
		}
		if s.st.Rand().Float64() >= p {
			s.local(func(m int) []FedStep { return []FedStep{{Op: fedProxStep, Batch: b[m], A: beta}} })
			continue
		}
		z, err := s.round(FedLower, nil, false, func(m int) []FedStep {
			return []FedStep{{Op: fedProxOut, Batch: b[m], A: beta, B: bp}, send("z")}
		})
		if err != nil {
			return err
		}
		ybar := make([]float64, s.p.DimY())
		if _, err := mean(ybar, z); err != nil {
			return err
		}
		s.local(func(int) []FedStep { return []FedStep{{Op: fedProxIn, Vec: ybar, A: pb}} })
	}
	return nil
}

// monitor asks the clients for their y (and x when withX) after the
// pending steps, and stores the averages in State.Y (and State.X) for
// monitoring.
func (s *fedServer) monitor(withX bool) error {
	steps := []FedStep{send("y")}
	if withX {
		steps = []FedStep{send("x"), send("y")}
	}
	vs, err := s.round(FedMonitor, nil, false, func(int) []FedStep { return steps })
	if err != nil {
		return err
	}
	dx, dy := len(s.st.X), len(s.st.Y)
	xs, ys := make([][]float64, len(vs)), make([][]float64, len(vs))
	for j, v := range vs {
		want := dy
		if withX {
			want += dx
		}
		if len(v) != want {
			return fmt.Errorf("monitor: client %d sent %d numbers, want %d", j, len(v), want)
		}
		if withX {
			xs[j], v = v[:dx], v[dx:]
		}
		ys[j] = v
	}
	if withX {
		aipodMean(s.st.X, xs)
	}
	aipodMean(s.st.Y, ys)
	return nil
}

// randomBits returns 8 random bytes, not from the run's stream: a run's
// identity must not change its random numbers.
func randomBits() []byte {
	b := make([]byte, 8)
	crand.Read(b) // never fails (crypto/rand's contract)
	return b
}
