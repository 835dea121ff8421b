package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/optim"
	"github.com/nats-io/nats.go"
	"gonum.org/v1/gonum/mat"
)

// Settings configure New. Model and the sample counts must be given;
// every other zero value is a documented default.
type Settings struct {
	// Model is the name its Constructor was registered under in the
	// workers' program, and Params the bytes passed to it.
	Model  string
	Params []byte
	// NumLower and NumUpper are the numbers of samples of the lower- and
	// upper-level data; 0 means the level has no per-sample data, and its
	// objective is evaluated whole on one worker.
	NumLower, NumUpper int
	// Shards is the number of parts the samples of each level are split
	// into (contiguous ranges of nearly equal size); 0 means
	// Workers/Replicas.
	Shards int
	// LowerSizes and UpperSizes, when set, split the levels into shards
	// of these sizes instead, in order (one per shard, each ≥ 1): the
	// clients of a federated run, each holding its own partition
	// (Problem.Clients). They fix Shards, and NumLower and NumUpper, when
	// not 0, must be their sums.
	LowerSizes, UpperSizes []int
	// Replicas is the number of workers that hold each shard (default 1):
	// when one is lost, its calls go to another at once. With 1, a lost
	// worker's calls wait up to JoinTimeout for a worker to join.
	Replicas int
	// Workers is the number of workers New waits for and uses; 0 means
	// Shards·Replicas. Fewer hold several shards each (shard k's replicas
	// on workers kR, …, kR + R − 1 modulo Workers); workers beyond
	// Shards·Replicas are spares: each takes over the shards of a lost
	// worker.
	Workers int
	// Pool is the subject prefix shared with the workers (default
	// DefaultPool).
	Pool string
	// Threads is the GOMAXPROCS of every worker; 0 keeps the workers'
	// own, which must then be equal (the sums inside an oracle are split
	// across that many cores, so it decides the last bits of a result).
	Threads int
	// JoinTimeout bounds the wait for Workers workers in New and, later,
	// for a worker to join when a shard has lost all of its workers
	// (default 1 minute).
	JoinTimeout time.Duration
	// BuildTimeout bounds a worker's building of its shards: reading its
	// data, compiling, checking (default 10 minutes).
	BuildTimeout time.Duration
	// CallTimeout bounds one oracle call on one worker (default 10
	// minutes).
	CallTimeout time.Duration
	// ProbeInterval is how often a worker that owes an answer is pinged
	// (default 200 ms); ProbeTimeout is the silence after which it is
	// declared lost (default 10 s). A killed worker is usually noticed at
	// the first ping: the server answers that nobody listens.
	ProbeInterval, ProbeTimeout time.Duration
	// Log, if set, receives a line for every worker lost or joined.
	Log func(format string, args ...any)
}

// Stats counts a Problem's oracle calls and messages.
type Stats struct {
	graph.Stats
	// Messages and Bytes count the requests sent and the replies read
	// (pings included), and their sizes.
	MessagesSent, MessagesReceived int64
	BytesSent, BytesReceived       int64
	// Retries counts requests sent again because their worker was lost;
	// Lost the workers declared lost; Joined the workers attached after
	// New; Skipped the parts of optional exchanges (a federated round with
	// partial participation) that went on without their shard.
	Retries, Lost, Joined, Skipped int
	// Wall is the time spent in oracle calls; Compute the sum over calls
	// of the slowest worker's computing time.
	Wall, Compute time.Duration
}

// Problem is a bilevel problem whose samples are split into shards held by
// worker processes: it has the oracles of *graph.Problem, with batches of
// global sample indices, and computes each as the sample-weighted sum of
// the shards' results, reduced in shard order (see the package
// documentation). A Problem is not safe for concurrent use.
//
// Wrong slice lengths, empty batches and out-of-range indices are
// programmer errors and panic, as they do for *graph.Problem. A call that
// cannot be completed — every worker of a shard lost and none joined in
// time, a worker's error, a malformed reply — makes Err non-nil and the
// call's outputs NaN, as are those of every later call: a solver stops
// at its non-finite check, naming the oracle, and Err says why.
type Problem struct {
	nc      *nats.Conn
	s       Settings
	name    string
	session uint64
	inbox   string // subject prefix of replies
	mb      *mailbox
	subs    []*nats.Subscription

	workers []*workerRef
	shards  []*shardRef
	levels  [2]levelSplit // lower, upper
	dimX    int
	dimY    int
	layout  *attachedBody
	started bool // New has returned

	seq      uint64
	buf      []byte
	active   []*request // the requests of the exchange in progress
	xerr     error      // what stopped it
	lostWhy  string     // the last worker lost, and why
	calls    map[uint64]*request
	pings    map[uint64]*workerRef
	attaches map[uint64]*workerRef
	lins     uint64
	checked  map[[2]int]bool
	err      error
	stats    Stats
	fed      [optim.FedMonitor + 1]FedTraffic // by optim.FedLevel
	round    *FedTraffic                      // the level of the federated round in progress, if any
}

type workerRef struct {
	name      string
	alive     bool
	models    []string
	threads   int
	shards    []int // attached
	want      []int // asked for by the attach in flight
	attachSeq uint64
	attachAt  time.Time
	lastHeard time.Time
	lastPing  time.Time
}

type shardRef struct {
	spec    shardSpec
	holders []*workerRef // attached and alive, in order of preference
}

// levelSplit is how a level's samples are split: shard s holds
// [starts[s], starts[s+1]). total 0: the level has no per-sample data.
type levelSplit struct {
	total  int
	starts []int
}

// New waits for the workers, has them build their shards and checks what
// they built; the returned Problem is ready for oracle calls. Close it
// when done. New's error names the workers or the shard at fault.
func New(nc *nats.Conn, s Settings) (*Problem, error) {
	if err := s.defaults(); err != nil {
		return nil, err
	}
	p := &Problem{nc: nc, s: s, mb: newMailbox(), calls: map[uint64]*request{}, pings: map[uint64]*workerRef{},
		attaches: map[uint64]*workerRef{}, checked: map[[2]int]bool{}}
	p.session = binary.LittleEndian.Uint64(randomBytes(8))
	p.name = fmt.Sprintf("coordinator-%016x", p.session)
	p.inbox = subject(s.Pool, "c", fmt.Sprintf("%016x", p.session))
	for lv, n := range []int{s.NumLower, s.NumUpper} {
		p.levels[lv] = levelSplit{total: n}
		sizes := [][]int{s.LowerSizes, s.UpperSizes}[lv]
		if n > 0 {
			start := 0
			for k := range s.Shards + 1 {
				if sizes == nil {
					start = k * n / s.Shards
				} else if k > 0 {
					start += sizes[k-1]
				}
				p.levels[lv].starts = append(p.levels[lv].starts, start)
			}
		}
	}
	for k := range s.Shards {
		spec := shardSpec{index: uint32(k), count: uint32(s.Shards)}
		spec.lower, spec.upper = p.levels[0].rangeOf(k), p.levels[1].rangeOf(k)
		p.shards = append(p.shards, &shardRef{spec: spec})
	}
	for _, subj := range []string{p.inbox + ".>", subject(s.Pool, "hello")} {
		sub, err := nc.Subscribe(subj, p.mb.put)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("dist: subscribing to %s: %w", subj, err)
		}
		p.subs = append(p.subs, sub)
	}
	if err := p.start(); err != nil {
		p.Close()
		return nil, err
	}
	p.started = true
	return p, nil
}

func (s *Settings) defaults() error {
	if s.Pool == "" {
		s.Pool = DefaultPool
	}
	if err := checkName(s.Pool); err != nil {
		return fmt.Errorf("dist: Settings.Pool: %w", err)
	}
	if err := checkName(s.Model); err != nil {
		return fmt.Errorf("dist: Settings.Model: %w", err)
	}
	if s.Replicas == 0 {
		s.Replicas = 1
	}
	if err := s.sizes(); err != nil {
		return err
	}
	switch {
	case s.Replicas < 0 || s.Shards < 0 || s.Workers < 0 || s.Threads < 0 || s.Threads > math.MaxUint16:
		return fmt.Errorf("dist: Settings: Shards = %d, Replicas = %d, Workers = %d, Threads = %d: none may be negative", s.Shards, s.Replicas, s.Workers, s.Threads)
	case s.Shards == 0 && s.Workers == 0:
		return errors.New("dist: Settings: set Workers (or Shards)")
	case s.Shards == 0:
		s.Shards = s.Workers / s.Replicas
	case s.Workers == 0:
		s.Workers = s.Shards * s.Replicas
	}
	if s.Shards < 1 || s.Workers < s.Replicas {
		return fmt.Errorf("dist: Settings: %d workers cannot hold %d shards %d times each", s.Workers, max(s.Shards, 1), s.Replicas)
	}
	if s.Shards > math.MaxUint16 {
		return fmt.Errorf("dist: Settings.Shards = %d: at most %d", s.Shards, math.MaxUint16)
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"NumLower", s.NumLower}, {"NumUpper", s.NumUpper}} {
		if l.n < 0 || l.n > math.MaxUint32 {
			return fmt.Errorf("dist: Settings.%s = %d: want 0 (no per-sample data) to 2³²−1", l.name, l.n)
		}
		if l.n > 0 && l.n < s.Shards {
			return fmt.Errorf("dist: Settings.%s = %d samples cannot fill %d shards", l.name, l.n, s.Shards)
		}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"JoinTimeout", &s.JoinTimeout, time.Minute}, {"BuildTimeout", &s.BuildTimeout, 10 * time.Minute},
		{"CallTimeout", &s.CallTimeout, 10 * time.Minute}, {"ProbeInterval", &s.ProbeInterval, 200 * time.Millisecond},
		{"ProbeTimeout", &s.ProbeTimeout, 10 * time.Second}} {
		if *d.v < 0 {
			return fmt.Errorf("dist: Settings.%s = %v: want > 0, or 0 for %v", d.name, *d.v, d.def)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if s.Log == nil {
		s.Log = func(string, ...any) {}
	}
	return nil
}

// sizes applies LowerSizes and UpperSizes to Shards, NumLower and
// NumUpper.
func (s *Settings) sizes() error {
	for _, l := range []struct {
		name, num string
		sizes     []int
		n         *int
	}{{"LowerSizes", "NumLower", s.LowerSizes, &s.NumLower}, {"UpperSizes", "NumUpper", s.UpperSizes, &s.NumUpper}} {
		if l.sizes == nil {
			continue
		}
		if s.Shards != 0 && s.Shards != len(l.sizes) {
			return fmt.Errorf("dist: Settings.%s has %d shards, Settings.Shards = %d", l.name, len(l.sizes), s.Shards)
		}
		s.Shards = len(l.sizes)
		sum := 0
		for k, n := range l.sizes {
			if n < 1 || n > math.MaxUint32 {
				return fmt.Errorf("dist: Settings.%s[%d] = %d: every shard needs 1 to 2³²−1 samples", l.name, k, n)
			}
			sum += n
		}
		if *l.n != 0 && *l.n != sum {
			return fmt.Errorf("dist: Settings.%s = %d, but Settings.%s adds up to %d", l.num, *l.n, l.name, sum)
		}
		*l.n = sum
	}
	return nil
}

func (l levelSplit) rangeOf(k int) Range {
	if l.total == 0 {
		return Range{}
	}
	return Range{Start: l.starts[k], End: l.starts[k+1], Total: l.total}
}

// start finds the workers, attaches the shards and checks the layouts.
func (p *Problem) start() error {
	if err := p.publish(subject(p.s.Pool, "discover"), p.inbox+".d", &message{kind: kindDiscover}); err != nil {
		return err
	}
	deadline := time.Now().Add(p.s.JoinTimeout)
	err := p.wait(func() bool { return len(p.usable()) >= p.s.Workers }, func(now time.Time) error {
		if now.After(deadline) {
			return p.joinError()
		}
		return nil
	})
	if err != nil {
		return err
	}
	ws := p.usable()
	slices.SortFunc(ws, func(a, b *workerRef) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	ws = ws[:p.s.Workers]
	for k := range p.s.Shards * p.s.Replicas {
		w := ws[k%len(ws)]
		w.want = append(w.want, k/p.s.Replicas)
	}
	for _, w := range ws {
		if len(w.want) > 0 {
			if err := p.attach(w, w.want); err != nil {
				return err
			}
		}
	}
	err = p.wait(func() bool { return len(p.attaches) == 0 }, p.tick)
	if err != nil {
		return err
	}
	for _, sh := range p.shards {
		if len(sh.holders) == 0 {
			return fmt.Errorf("dist: no worker holds shard %d: %s while building it", sh.spec.index, p.lostWhy)
		}
	}
	return nil
}

// usable lists the live workers that know the model and hold nothing.
func (p *Problem) usable() []*workerRef {
	var r []*workerRef
	for _, w := range p.workers {
		if w.alive && len(w.shards) == 0 && len(w.want) == 0 && slices.Contains(w.models, p.s.Model) {
			r = append(r, w)
		}
	}
	return r
}

func (p *Problem) joinError() error {
	var names, others []string
	for _, w := range p.workers {
		if !w.alive {
			continue
		}
		if slices.Contains(w.models, p.s.Model) {
			names = append(names, w.name)
		} else {
			others = append(others, fmt.Sprintf("%s (has %v)", w.name, w.models))
		}
	}
	msg := fmt.Sprintf("dist: %d of %d workers joined pool %s within %v: %v", len(names), p.s.Workers, p.s.Pool, p.s.JoinTimeout, names)
	if len(others) > 0 {
		msg += fmt.Sprintf("; these do not know model %s: %v", p.s.Model, others)
	}
	return errors.New(msg + "; start the workers (dist/cmd/worker, or your program with dist.ServeIfWorker) with the same server and pool")
}

// Close tells the workers to forget this problem (they keep running, for
// the next coordinator) and stops listening. It does not close the NATS
// connection.
func (p *Problem) Close() error {
	for _, w := range p.workers {
		if w.alive && len(w.shards)+len(w.want) > 0 {
			_ = p.publish(subject(p.s.Pool, "w", w.name), "", &message{kind: kindDetach})
		}
	}
	var first error
	for _, s := range p.subs {
		if err := s.Unsubscribe(); err != nil && first == nil && !errors.Is(err, nats.ErrConnectionClosed) {
			first = err
		}
	}
	p.subs = nil
	if p.err == nil {
		p.err = errClosed
	}
	if err := p.nc.Flush(); err != nil && first == nil && !errors.Is(err, nats.ErrConnectionClosed) {
		first = err
	}
	return first
}

// Err returns the error that stopped the problem, or nil: a *CallError
// after a failed oracle call.
func (p *Problem) Err() error { return p.err }

// CallError reports an oracle call that could not be completed: every
// worker of a shard lost and none joined in time, a worker's error, a
// malformed reply. Err says which shard and worker, and why.
type CallError struct {
	// Oracle names the call ("GradG", "HVP (linearized)", …).
	Oracle string
	Err    error
}

func (e *CallError) Error() string { return fmt.Sprintf("dist: %s failed: %v", e.Oracle, e.Err) }

// Unwrap returns Err.
func (e *CallError) Unwrap() error { return e.Err }

// Stats returns the calls and messages so far.
func (p *Problem) Stats() Stats { return p.stats }

// DimX returns the length of x.
func (p *Problem) DimX() int { return p.dimX }

// DimY returns the length of y.
func (p *Problem) DimY() int { return p.dimY }

// NumLower returns the number of lower-level samples (1 when g has no
// per-sample data).
func (p *Problem) NumLower() int { return max(p.levels[0].total, 1) }

// NumUpper returns the number of upper-level samples (1 when f has no
// per-sample data).
func (p *Problem) NumUpper() int { return max(p.levels[1].total, 1) }

// OuterVars describes the layout of x.
func (p *Problem) OuterVars() []graph.Var { return p.layout.outer }

// InnerVars describes the layout of y.
func (p *Problem) InnerVars() []graph.Var { return p.layout.inner }

// X0 copies the starting x into dst, allocating it when nil, and returns
// it.
func (p *Problem) X0(dst []float64) []float64 { return copyOut(dst, p.layout.x0) }

// Y0 copies the starting y into dst, allocating it when nil, and returns
// it.
func (p *Problem) Y0(dst []float64) []float64 { return copyOut(dst, p.layout.y0) }

func copyOut(dst, src []float64) []float64 {
	if dst == nil {
		dst = make([]float64, len(src))
	}
	if len(dst) != len(src) {
		panic(fmt.Sprintf("dist: destination has length %d, want %d", len(dst), len(src)))
	}
	copy(dst, src)
	return dst
}

// part is one shard's share of an oracle call.
type part struct {
	shard  *shardRef
	batch  []int   // local indices; nil: all of the shard's samples
	weight float64 // its share of the batch
	res    *resultBody
	from   *workerRef // who sent res
}

// split divides a batch of global indices of a level between the shards.
func (p *Problem) split(upper bool, batch []int) []part {
	lv := b2i(upper)
	l := p.levels[lv]
	n := max(l.total, 1)
	if batch != nil {
		if len(batch) == 0 {
			panic("dist: empty batch; pass nil for all samples")
		}
		for _, i := range batch {
			if i < 0 || i >= n {
				panic(fmt.Sprintf("dist: batch index %d out of range for %d samples of the %s level", i, n, [2]string{"lower", "upper"}[lv]))
			}
		}
	}
	if l.total == 0 { // no per-sample data: the whole objective on shard 0
		return []part{{shard: p.shards[0], batch: batch, weight: 1}}
	}
	parts := make([]part, 0, len(p.shards))
	for k, sh := range p.shards {
		lo, hi := l.starts[k], l.starts[k+1]
		if batch == nil {
			parts = append(parts, part{shard: sh, weight: float64(hi-lo) / float64(l.total)})
			continue
		}
		var local []int
		for _, i := range batch {
			if i >= lo && i < hi {
				local = append(local, i-lo)
			}
		}
		if len(local) > 0 {
			parts = append(parts, part{shard: sh, batch: local, weight: float64(len(local)) / float64(len(batch))})
		}
	}
	return parts
}

// scalar returns Σ weight·scalar over the parts, in shard order.
func scalar(parts []part) float64 {
	s := 0.0
	for _, pt := range parts {
		s += pt.weight * pt.res.scalar
	}
	return s
}

// reduce stores Σ weight·vec(result) over the parts, in shard order, in
// dst.
func reduce(dst []float64, parts []part, vec func(*resultBody) []float64) {
	for k, pt := range parts {
		v := vec(pt.res)
		if k == 0 {
			for i := range dst {
				dst[i] = pt.weight * v[i]
			}
			continue
		}
		for i := range dst {
			dst[i] += pt.weight * v[i]
		}
	}
}

func fillNaN(vs ...[]float64) {
	for _, v := range vs {
		for i := range v {
			v[i] = math.NaN()
		}
	}
}

func resA(r *resultBody) []float64 { return r.a }
func resB(r *resultBody) []float64 { return r.b }

func (p *Problem) checkLen(v []float64, n int, name string) {
	if len(v) != n {
		panic(fmt.Sprintf("dist: %s has length %d, want %d", name, len(v), n))
	}
}

// evaluate runs a call of op on the parts, built by body, and reports
// whether every part has its result; results are checked to have the
// lengths want gives.
func (p *Problem) evaluate(op uint8, parts []part, body func(*part) *callBody, wantA, wantB int) bool {
	if p.err != nil {
		return false
	}
	t := time.Now()
	err := p.exchange(op, parts, func(pt *part, _ *workerRef, _ bool) *callBody { return body(pt) }, wantA, wantB)
	p.stats.Wall += time.Since(t)
	if err != nil {
		p.err = &CallError{Oracle: opName(op), Err: err}
		return false
	}
	return true
}

// F returns f(x, y) on the upper-level batch.
func (p *Problem) F(x, y []float64, batch []int) float64 {
	p.stats.UpperEvaluations++
	return p.value(opF, true, x, y, batch)
}

// G returns g(x, y) on the lower-level batch.
func (p *Problem) G(x, y []float64, batch []int) float64 {
	p.stats.LowerEvaluations++
	return p.value(opG, false, x, y, batch)
}

func (p *Problem) value(op uint8, upper bool, x, y []float64, batch []int) float64 {
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	parts := p.split(upper, batch)
	if !p.evaluate(op, parts, func(pt *part) *callBody { return &callBody{op: op, x: x, y: y, batch: pt.batch} }, 0, 0) {
		return math.NaN()
	}
	return scalar(parts)
}

// GradF stores ∇x f in dx and ∇y f in dy on the upper-level batch; either
// may be nil to skip it.
func (p *Problem) GradF(dx, dy, x, y []float64, batch []int) {
	p.stats.UpperGradients++
	p.grad(opGradF, true, dx, dy, x, y, batch)
}

// GradG stores ∇x g in dx and ∇y g in dy on the lower-level batch; either
// may be nil to skip it.
func (p *Problem) GradG(dx, dy, x, y []float64, batch []int) {
	p.stats.LowerGradients++
	p.grad(opGradG, false, dx, dy, x, y, batch)
}

func (p *Problem) grad(op uint8, upper bool, dx, dy, x, y []float64, batch []int) {
	if dx == nil && dy == nil {
		return
	}
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	var flags uint8
	wantA, wantB := 0, 0
	if dx != nil {
		p.checkLen(dx, p.dimX, "dx")
		flags, wantA = flags|flagDX, p.dimX
	}
	if dy != nil {
		p.checkLen(dy, p.dimY, "dy")
		flags, wantB = flags|flagDY, p.dimY
	}
	parts := p.split(upper, batch)
	if !p.evaluate(op, parts, func(pt *part) *callBody {
		return &callBody{op: op, flags: flags, x: x, y: y, batch: pt.batch}
	}, wantA, wantB) {
		fillNaN(dx, dy)
		return
	}
	if dx != nil {
		reduce(dx, parts, resA)
	}
	if dy != nil {
		reduce(dy, parts, resB)
	}
}

// HVP stores ∇yy g(x, y)·v in dst on the lower-level batch.
func (p *Problem) HVP(dst, x, y, v []float64, batch []int) {
	p.stats.HessVecProducts++
	p.product(opHVP, dst, p.dimY, x, y, v, p.dimY, batch)
}

// MixedXY stores ∇xy g(x, y)·v = ∇x⟨∇y g, v⟩ in dst on the lower-level
// batch.
func (p *Problem) MixedXY(dst, x, y, v []float64, batch []int) {
	p.stats.MixedXYProducts++
	p.product(opMixedXY, dst, p.dimX, x, y, v, p.dimY, batch)
}

// MixedYX stores ∇yx g(x, y)·u = ∇y⟨∇x g, u⟩ in dst on the lower-level
// batch.
func (p *Problem) MixedYX(dst, x, y, u []float64, batch []int) {
	p.stats.MixedYXProducts++
	p.product(opMixedYX, dst, p.dimY, x, y, u, p.dimX, batch)
}

func (p *Problem) product(op uint8, dst []float64, n int, x, y, v []float64, nv int, batch []int) {
	p.checkLen(dst, n, "dst")
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	p.checkLen(v, nv, "the vector")
	parts := p.split(false, batch)
	if !p.evaluate(op, parts, func(pt *part) *callBody { return &callBody{op: op, x: x, y: y, v: v, batch: pt.batch} }, n, 0) {
		fillNaN(dst)
		return
	}
	reduce(dst, parts, resA)
}

// HessYY stores the dense ∇yy g(x, y) (DimY × DimY) in dst, which is
// resized when empty: each shard assembles its own and sends it whole, so
// it is meant for small DimY.
func (p *Problem) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	n := p.dimY
	if dst.IsEmpty() {
		dst.ReuseAsSym(n)
	}
	if dst.SymmetricDim() != n {
		panic("dist: HessYY destination has the wrong size")
	}
	h := make([]float64, n*n)
	p.dense(opHessYY, h, x, y, batch)
	for i := range n {
		for j := i; j < n; j++ {
			dst.SetSym(i, j, h[i*n+j])
		}
	}
}

// HessXY stores the dense ∇xy g(x, y) (DimX × DimY) in dst, which is
// resized when empty; meant for small DimY, as HessYY.
func (p *Problem) HessXY(dst *mat.Dense, x, y []float64, batch []int) {
	if dst.IsEmpty() {
		dst.ReuseAs(p.dimX, p.dimY)
	}
	if r, c := dst.Dims(); r != p.dimX || c != p.dimY {
		panic("dist: HessXY destination has the wrong size")
	}
	h := make([]float64, p.dimX*p.dimY)
	p.dense(opHessXY, h, x, y, batch)
	for i := range p.dimX {
		dst.SetRow(i, h[i*p.dimY:(i+1)*p.dimY])
	}
}

func (p *Problem) dense(op uint8, dst, x, y []float64, batch []int) {
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	parts := p.split(false, batch)
	if !p.evaluate(op, parts, func(pt *part) *callBody { return &callBody{op: op, x: x, y: y, batch: pt.batch} }, len(dst), 0) {
		fillNaN(dst)
		return
	}
	reduce(dst, parts, resA)
}

// CheckBatch reports whether the oracles of the upper (or lower) level can
// be evaluated on batches of size samples: every shard compiles the part
// of such a batch it may see.
func (p *Problem) CheckBatch(upper bool, size int) error {
	lv := b2i(upper)
	name := [2]string{"lower", "upper"}[lv]
	l := p.levels[lv]
	if n := max(l.total, 1); size < 1 || size > n {
		return fmt.Errorf("dist: batch of %d samples for the %s level, which has %d samples", size, name, n)
	}
	if p.checked[[2]int{lv, size}] {
		return nil
	}
	if p.err != nil {
		return p.err
	}
	parts := []part{{shard: p.shards[0]}}
	if l.total > 0 {
		parts = parts[:0]
		for _, sh := range p.shards {
			parts = append(parts, part{shard: sh})
		}
	}
	var flags uint8
	if upper {
		flags = flagUpper
	}
	err := p.exchange(opCheckBatch, parts, func(pt *part, _ *workerRef, _ bool) *callBody {
		r := pt.shard.spec.lower
		if upper {
			r = pt.shard.spec.upper
		}
		return &callBody{op: opCheckBatch, flags: flags, arg: uint64(min(size, max(r.Len(), 1)))}
	}, 0, 0)
	if err != nil {
		return err
	}
	p.checked[[2]int{lv, size}] = true
	return nil
}

// Linearization fixes (x, y) and a lower-level batch for many Hessian and
// mixed products, as graph.Linearization does: each worker linearizes its
// part once, at the first product it computes, and later products send
// only the vector. It holds copies of x, y and the batch.
type Linearization struct {
	p     *Problem
	id    uint64
	x, y  []float64
	parts []part
	held  map[*workerRef]map[uint32]bool // who holds it, for which shards
}

// Linearize returns the linearization of g at (x, y) on the lower-level
// batch. Nothing is sent until its first product.
func (p *Problem) Linearize(x, y []float64, batch []int) *Linearization {
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	p.lins++
	return &Linearization{p: p, id: p.lins, x: slices.Clone(x), y: slices.Clone(y),
		parts: p.split(false, slices.Clone(batch)), held: map[*workerRef]map[uint32]bool{}}
}

// HVPAt returns the operator v ↦ ∇yy g(x, y)·v on the lower-level batch,
// through a Linearization: the operator implicit.HVPOperator uses, and so
// AID's CG and Neumann loops.
func (p *Problem) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	return p.Linearize(x, y, batch).HVP
}

// HVP stores ∇yy g·v at the linearization point in dst.
func (l *Linearization) HVP(dst, v []float64) {
	l.p.stats.HessVecProducts++
	l.product(opLinHVP, dst, l.p.dimY, v)
}

// MixedXY stores ∇xy g·v at the linearization point in dst.
func (l *Linearization) MixedXY(dst, v []float64) {
	l.p.stats.MixedXYProducts++
	l.product(opLinMixedXY, dst, l.p.dimX, v)
}

func (l *Linearization) product(op uint8, dst []float64, n int, v []float64) {
	p := l.p
	p.checkLen(dst, n, "dst")
	p.checkLen(v, p.dimY, "v")
	parts := l.parts
	if p.err != nil {
		fillNaN(dst)
		return
	}
	t := time.Now()
	err := p.exchange(op, parts, func(pt *part, w *workerRef, again bool) *callBody {
		c := &callBody{op: op, arg: l.id, v: v}
		if again || !l.held[w][pt.shard.spec.index] {
			c.flags, c.x, c.y, c.batch = flagSetup, l.x, l.y, pt.batch
		}
		return c
	}, n, 0)
	p.stats.Wall += time.Since(t)
	if err != nil {
		p.err = &CallError{Oracle: opName(op), Err: err}
		fillNaN(dst)
		return
	}
	for _, pt := range parts {
		w := pt.from
		if l.held[w] == nil {
			l.held[w] = map[uint32]bool{}
		}
		l.held[w][pt.shard.spec.index] = true
	}
	reduce(dst, parts, resA)
}
