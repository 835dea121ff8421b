package dist

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/optim"
	"github.com/nats-io/nats.go"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
)

// DefaultPool is the pool of Settings and WorkerSettings when theirs is "".
const DefaultPool = "bilevel"

// WorkerSettings configure Serve. The zero value names the worker after
// its host and process id and serves DefaultPool.
type WorkerSettings struct {
	// Name identifies the worker in every message and error: 1 to 64
	// letters, digits, '_' or '-', unique in its pool. "" means
	// host-pid.
	Name string
	// Pool is the subject prefix a coordinator and its workers share, so
	// that several jobs can use one NATS server (default DefaultPool).
	Pool string
	// Log, if set, receives a line for every shard built and every message
	// refused.
	Log func(format string, args ...any)
}

// testHookCall, when set (by this package's tests, in a worker process),
// runs before the worker computes each call.
var testHookCall func()

// maxLinearizations is the number of linearizations a worker keeps per
// shard; an older one is forgotten, and a product on it makes the
// coordinator send its point again.
const maxLinearizations = 4

// worker is the state of Serve. Only the work subscription's handler, which
// NATS runs on one goroutine, touches it.
type worker struct {
	nc      *nats.Conn
	name    string
	pool    string
	log     func(format string, args ...any)
	hello   []byte
	threads int // GOMAXPROCS when a coordinator does not set it
	session uint64
	shards  map[uint32]*shard // the session's shards by index
}

// shard is a shard a worker built.
type shard struct {
	key          string
	spec         shardSpec
	p            *graph.Problem
	outer, inner []graph.Var
	x0, y0       []float64
	lins         []linEntry // most recently used first
	// fed is the federated client on the shard, with its state.
	fed *optim.FedClient
	// learner computes the meta-gradients of a MetaModel shard (p is nil).
	learner *meta.Learner
}

type linEntry struct {
	id  uint64
	lin *graph.Linearization
}

// Serve makes this process a worker of s.Pool on nc: it announces itself,
// builds the shards a coordinator attaches (with the models registered in
// this program) and answers their oracle calls, one at a time, until ctx
// is done (it returns nil) or nc closes (an error); it takes over nc's
// closed handler. A malformed or foreign message is logged and refused
// with an error reply naming it; it never stops the worker.
func Serve(ctx context.Context, nc *nats.Conn, s WorkerSettings) error {
	w, err := newWorker(nc, s)
	if err != nil {
		return err
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if nc.IsClosed() {
		return errors.New("dist: Serve: the NATS connection is closed")
	}
	prefix := subject(w.pool, "w", w.name)
	subs := []struct {
		subj string
		h    nats.MsgHandler
	}{
		{prefix, w.work},
		{subject(w.pool, "p", w.name), w.ping},
		{subject(w.pool, "discover"), w.discover},
	}
	for _, sub := range subs {
		ns, err := nc.Subscribe(sub.subj, sub.h)
		if err != nil {
			return fmt.Errorf("dist: worker %s: subscribing to %s: %w", w.name, sub.subj, err)
		}
		defer ns.Unsubscribe()
	}
	if err := nc.Publish(subject(w.pool, "hello"), w.hello); err != nil {
		return fmt.Errorf("dist: worker %s: announcing itself: %w", w.name, err)
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("dist: worker %s: announcing itself: %w", w.name, err)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-closed:
		return fmt.Errorf("dist: worker %s: the connection to %s closed: %v", w.name, nc.ConnectedUrlRedacted(), nc.LastError())
	}
}

func newWorker(nc *nats.Conn, s WorkerSettings) (*worker, error) {
	if s.Pool == "" {
		s.Pool = DefaultPool
	}
	if err := checkName(s.Pool); err != nil {
		return nil, fmt.Errorf("dist: WorkerSettings.Pool: %w", err)
	}
	host, _ := os.Hostname()
	if s.Name == "" {
		s.Name = defaultName(host)
	}
	if err := checkName(s.Name); err != nil {
		return nil, fmt.Errorf("dist: WorkerSettings.Name: %w", err)
	}
	if s.Log == nil {
		s.Log = func(string, ...any) {}
	}
	w := &worker{nc: nc, name: s.Name, pool: s.Pool, log: s.Log, threads: runtime.GOMAXPROCS(0), shards: map[uint32]*shard{}}
	w.hello = encode(nil, &message{kind: kindHello, sender: w.name, body: &helloBody{
		host: host, pid: uint32(os.Getpid()), threads: uint16(min(w.threads, math.MaxUint16)), models: append(Models(), MetaModel)}})
	return w, nil
}

// defaultName is host-pid with the host's characters outside names
// replaced by '-'.
func defaultName(host string) string {
	h := []byte(host)
	for i, c := range h {
		if checkName(string(c)) != nil {
			h[i] = '-'
		}
	}
	name := strings.Trim(string(h), "-")
	if name == "" {
		name = "worker"
	}
	pid := strconv.Itoa(os.Getpid())
	return name[:min(len(name), maxName-len(pid)-1)] + "-" + pid
}

// reply sends m to the request's reply subject, if it has one; a reply
// too large for the server becomes an error saying so.
func (w *worker) reply(req *nats.Msg, m *message) {
	if req.Reply == "" {
		return
	}
	m.sender = w.name
	b := encode(nil, m)
	if limit := w.nc.MaxPayload(); int64(len(b)) > limit {
		var shard uint32
		if r, ok := m.body.(*resultBody); ok {
			shard = r.shard
		}
		b = encode(nil, &message{kind: kindError, sender: w.name, session: m.session, seq: m.seq, body: &errorBody{shard: shard, code: codeFailed,
			text: fmt.Sprintf("its %s reply of %d bytes exceeds the server's max_payload of %d bytes: raise max_payload in the server's configuration", kindNames[m.kind], len(b), limit)}})
	}
	_ = w.nc.Publish(req.Reply, b) // a lost connection shows as a silent worker
}

// describeSender names the sender of a message that could not be used.
func describeSender(m *message, subj, reply string) string {
	if m != nil && m.sender != "" {
		return strconv.Quote(m.sender)
	}
	return fmt.Sprintf("an unnamed sender (no readable bilevel header; subject %s, reply to %q)", subj, reply)
}

func (w *worker) refuse(req *nats.Msg, m *message, shard uint32, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	w.log("dist: worker %s: refused a message from %s: %s", w.name, describeSender(m, req.Subject, req.Reply), text)
	var session, seq uint64
	if m != nil {
		session, seq = m.session, m.seq
	}
	w.reply(req, &message{kind: kindError, session: session, seq: seq, body: &errorBody{shard: shard, code: codeFailed, text: text}})
}

func (w *worker) ping(req *nats.Msg) {
	m, err := decode(req.Data)
	if err != nil || m.kind != kindPing {
		return
	}
	w.reply(req, &message{kind: kindPong, session: m.session, seq: m.seq})
}

func (w *worker) discover(req *nats.Msg) {
	if m, err := decode(req.Data); err == nil && m.kind == kindDiscover && req.Reply != "" {
		_ = w.nc.Publish(req.Reply, w.hello)
	}
}

// work handles the messages on the worker's own subject.
func (w *worker) work(req *nats.Msg) {
	m, err := decode(req.Data)
	if err != nil {
		w.refuse(req, m, math.MaxUint32, "malformed message: %v", err)
		return
	}
	switch m.kind {
	case kindAttach:
		a := m.body.(*attachBody)
		if err := w.attach(m.session, a); err != nil {
			w.refuse(req, m, math.MaxUint32, "%v", err)
			return
		}
		s := w.shards[a.shards[0].index]
		w.reply(req, &message{kind: kindAttached, session: m.session, seq: m.seq, body: &attachedBody{
			threads: uint16(min(runtime.GOMAXPROCS(0), math.MaxUint16)), outer: s.outer, inner: s.inner, x0: s.x0, y0: s.y0}})
	case kindCall:
		c := m.body.(*callBody)
		s := w.shards[c.shard]
		if m.session != w.session || s == nil {
			w.reply(req, &message{kind: kindError, session: m.session, seq: m.seq, body: &errorBody{shard: c.shard, code: codeNotHeld,
				text: fmt.Sprintf("worker %s does not hold shard %d for session %x", w.name, c.shard, m.session)}})
			return
		}
		if testHookCall != nil {
			testHookCall()
		}
		start := time.Now()
		res, code, err := s.call(c)
		if err != nil {
			w.reply(req, &message{kind: kindError, session: m.session, seq: m.seq, body: &errorBody{shard: c.shard, code: code,
				text: fmt.Sprintf("%s on shard %d: %v", opName(c.op), c.shard, err)}})
			return
		}
		res.shard, res.op, res.nanos = c.shard, c.op, uint64(time.Since(start))
		w.reply(req, &message{kind: kindResult, session: m.session, seq: m.seq, body: res})
	case kindDetach:
		if m.session == w.session {
			w.shards = map[uint32]*shard{}
		}
	default:
		w.refuse(req, m, math.MaxUint32, "unexpected %s message on a worker's subject", kindNames[m.kind])
	}
}

// attach makes the worker hold exactly a's shards for session, reusing
// the shards it already built with the same model, parameters and rows.
func (w *worker) attach(session uint64, a *attachBody) error {
	if len(a.shards) == 0 {
		return errors.New("attach lists no shard")
	}
	var build Constructor
	var err error
	if a.model != MetaModel {
		if build, err = lookup(a.model); err != nil {
			return err
		}
	}
	threads := w.threads
	if a.threads > 0 {
		threads = int(a.threads)
	}
	runtime.GOMAXPROCS(threads)
	sum := sha256.Sum256(a.params)
	byKey := map[string]*shard{}
	for _, s := range w.shards {
		byKey[s.key] = s
	}
	held := map[uint32]*shard{}
	for _, spec := range a.shards {
		key := fmt.Sprintf("%s/%x/%d/%d/%v/%v", a.model, sum, spec.index, spec.count, spec.lower, spec.upper)
		s := byKey[key]
		if s != nil && session != w.session {
			s.lins = nil // a new coordinator numbers its linearizations afresh
			s.fed = nil
		}
		if s == nil {
			t := time.Now()
			if build == nil {
				s, err = newMetaShard(a.params, spec)
			} else {
				s, err = newShard(build, a.model, a.params, spec)
			}
			if err != nil {
				return err
			}
			s.key = key
			w.log("dist: worker %s: built shard %d of %d of %s (lower samples [%d, %d), upper [%d, %d)) in %v",
				w.name, spec.index, spec.count, a.model, spec.lower.Start, spec.lower.End, spec.upper.Start, spec.upper.End, time.Since(t).Round(time.Millisecond))
		}
		if first := held[a.shards[0].index]; first != nil && !sameLayout(first, s) {
			return fmt.Errorf("model %s builds different variables on shard %d and shard %d: a Constructor must build the same variables with the same starting values on every shard", a.model, first.spec.index, spec.index)
		}
		held[spec.index] = s
	}
	w.session, w.shards = session, held
	return nil
}

func sameLayout(a, b *shard) bool {
	eq := func(u, v []graph.Var) bool {
		return slices.EqualFunc(u, v, func(p, q graph.Var) bool { return p.Name == q.Name && slices.Equal(p.Shape, q.Shape) })
	}
	bits := func(u, v []float64) bool {
		return slices.EqualFunc(u, v, func(p, q float64) bool { return math.Float64bits(p) == math.Float64bits(q) })
	}
	return eq(a.outer, b.outer) && eq(a.inner, b.inner) && bits(a.x0, b.x0) && bits(a.y0, b.y0)
}

// newShard builds, compiles and checks one shard.
func newShard(build Constructor, model string, params []byte, spec shardSpec) (s *shard, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("model %s panicked while building shard %d: %v", model, spec.index, r)
		}
	}()
	sh := Shard{Index: int(spec.index), Count: int(spec.count), Lower: spec.lower, Upper: spec.upper}
	obj, err := build(params, sh)
	if err != nil {
		return nil, fmt.Errorf("model %s, shard %d: %w", model, spec.index, err)
	}
	if err := checkLevels(obj, sh); err != nil {
		return nil, fmt.Errorf("model %s, shard %d: %w", model, spec.index, err)
	}
	p, err := graph.Compile(obj)
	if err != nil {
		return nil, fmt.Errorf("model %s, shard %d: %w", model, spec.index, err)
	}
	for _, l := range []struct {
		what string
		r    Range
		n    int
	}{{"lower", sh.Lower, p.NumLower()}, {"upper", sh.Upper, p.NumUpper()}} {
		if l.r.Total > 0 && l.n != l.r.Len() {
			return nil, fmt.Errorf("model %s built %d %s-level samples for shard %d, which holds the %d samples [%d, %d)",
				model, l.n, l.what, spec.index, l.r.Len(), l.r.Start, l.r.End)
		}
	}
	s = &shard{spec: spec, p: p, outer: p.OuterVars(), inner: p.InnerVars(), x0: p.X0(nil), y0: p.Y0(nil)}
	if err := s.checkMean(); err != nil {
		return nil, fmt.Errorf("model %s: %w", model, err)
	}
	return s, nil
}

// checkLevels refuses an objective whose data do not match the shard's
// ranges or that reads the other level's data, which a shard holds only
// in part.
func checkLevels(obj graph.Objective, sh Shard) error {
	levels := []struct {
		name, other string
		root        *G.Node
		data, foe   []*G.Node
		r           Range
		setting     string
	}{
		{"lower objective g", "upper", obj.Lower, obj.LowerData, obj.UpperData, sh.Lower, "NumLower"},
		{"upper objective f", "lower", obj.Upper, obj.UpperData, obj.LowerData, sh.Upper, "NumUpper"},
	}
	for _, l := range levels {
		if l.r.Total == 0 && len(l.data) > 0 {
			return fmt.Errorf("the %s declares per-sample data (%q), but Settings.%s is 0: give the number of samples", l.name, l.data[0].Name(), l.setting)
		}
		if l.r.Total > 0 && len(l.data) == 0 {
			return fmt.Errorf("Settings.%s is %d, but the %s declares no per-sample data", l.setting, l.r.Total, l.name)
		}
		if l.root == nil {
			continue // graph.Compile names it
		}
		if n := firstRead(l.root, l.foe); n != nil {
			return fmt.Errorf("the %s reads %q, data of the %s level: a shard holds only its part of them, so the %s would change from shard to shard; declare such a node as data of the level that reads it, or as a constant", l.name, n.Name(), l.other, l.name)
		}
	}
	return nil
}

// firstRead returns the first of nodes that root depends on, or nil.
func firstRead(root *G.Node, nodes []*G.Node) *G.Node {
	want := map[*G.Node]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	seen := map[*G.Node]bool{}
	stack := []*G.Node{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		if want[n] {
			return n
		}
		it := n.Graph().From(n.ID())
		for it.Next() {
			stack = append(stack, it.Node().(*G.Node))
		}
	}
	return nil
}

// checkMean refuses an objective that is not a mean over samples plus
// sample-independent terms, which is what lets shards' results be
// combined with weights: on up to four of the shard's samples B, split
// into halves B1 and B2, the value and gradient on B must be the
// sample-weighted mean of those on B1 and B2, at a point near the start.
func (s *shard) checkMean() error {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := s.p.X0(nil), s.p.Y0(nil)
	for i := range x {
		x[i] += 0.2 * (rng.Float64() - 0.5)
	}
	for i := range y {
		y[i] += 0.2 * (rng.Float64() - 0.5)
	}
	type eval struct {
		f      float64
		dx, dy []float64
	}
	for _, l := range []struct {
		name  string
		r     Range
		value func(x, y []float64, b []int) float64
		grad  func(dx, dy, x, y []float64, b []int)
	}{
		{"lower objective g", s.spec.lower, s.p.G, s.p.GradG},
		{"upper objective f", s.spec.upper, s.p.F, s.p.GradF},
	} {
		n := l.r.Len()
		if n < 2 {
			continue
		}
		k := min(n, 4)
		batch, global := make([]int, k), make([]int, k)
		for j := range batch {
			batch[j] = j * (n - 1) / (k - 1)
			global[j] = l.r.Start + batch[j]
		}
		at := func(b []int) eval {
			e := eval{f: l.value(x, y, b), dx: make([]float64, len(x)), dy: make([]float64, len(y))}
			l.grad(e.dx, e.dy, x, y, b)
			return e
		}
		h := k / 2
		b1, b2 := batch[:h], batch[h:]
		all, e1, e2 := at(batch), at(b1), at(b2)
		w1, w2 := float64(h)/float64(k), float64(k-h)/float64(k)
		mixed := func(a, b, c float64) (float64, bool) {
			m := w1*b + w2*c
			return m, math.Abs(a-m) <= 1e-9*(math.Abs(a)+math.Abs(b)+math.Abs(c))+1e-300
		}
		bad := func(what string, a, m float64) error {
			return fmt.Errorf("the %s is not a mean over samples plus terms that do not depend on them: on samples %v of shard %d its %s is %.17g, but the sample-weighted mean of its values on %v and on %v is %.17g. Statistics of the batch (graph.BatchNorm, a normalization by the batch) couple the samples, so the result would depend on how a batch is split between shards: run such a model in one process",
				l.name, global, s.spec.index, what, a, global[:h], global[h:], m)
		}
		if m, ok := mixed(all.f, e1.f, e2.f); !ok {
			return bad("value", all.f, m)
		}
		for _, g := range []struct {
			what      string
			a, b, c   []float64
			variables []graph.Var
			outer     bool
		}{{"gradient in x", all.dx, e1.dx, e2.dx, s.outer, true}, {"gradient in y", all.dy, e1.dy, e2.dy, s.inner, false}} {
			for i := range g.a {
				if m, ok := mixed(g.a[i], g.b[i], g.c[i]); !ok {
					return bad(fmt.Sprintf("%s, element %s,", g.what, s.p.ElementName(g.outer, i)), g.a[i], m)
				}
			}
		}
	}
	return nil
}

// levelSize is the number of samples an oracle of the level sees on this
// shard: its range, or 1 for a level without per-sample data.
func (s *shard) levelSize(upper bool) int {
	r := s.spec.lower
	if upper {
		r = s.spec.upper
	}
	if r.Total == 0 {
		return 1
	}
	return r.Len()
}

// call evaluates c on the shard. Every length and index is checked before
// the problem sees it, and a panic of the problem (a programmer error in
// a model, or in graph) is returned as an error: a message never stops
// the worker.
func (s *shard) call(c *callBody) (res *resultBody, code uint8, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, code, err = nil, codeFailed, fmt.Errorf("panic: %v", r)
		}
	}()
	switch {
	case (c.op == opMeta) != (s.learner != nil):
		return nil, codeFailed, fmt.Errorf("%s on a shard of another kind", opName(c.op))
	case c.op == opMeta:
		return s.metaCall(c)
	case c.op == opFed:
		return s.fedCall(c)
	}
	dx, dy := s.p.DimX(), s.p.DimY()
	upper := c.op == opF || c.op == opGradF || (c.op == opCheckBatch && c.flags&flagUpper != 0)
	if err := s.checkBatch(c.batch, upper); err != nil {
		return nil, codeFailed, err
	}
	lenV := map[uint8]int{opHVP: dy, opMixedXY: dy, opMixedYX: dx, opLinHVP: dy, opLinMixedXY: dy}
	needXY := c.op != opCheckBatch && !((c.op == opLinHVP || c.op == opLinMixedXY) && c.flags&flagSetup == 0)
	for _, a := range []struct {
		name string
		v    []float64
		want int
	}{{"x", c.x, dx * b2i(needXY)}, {"y", c.y, dy * b2i(needXY)}, {"v", c.v, lenV[c.op]}} {
		if len(a.v) != a.want {
			return nil, codeFailed, fmt.Errorf("%s has %d entries, want %d", a.name, len(a.v), a.want)
		}
	}
	res = &resultBody{}
	switch c.op {
	case opF:
		res.scalar = s.p.F(c.x, c.y, c.batch)
	case opG:
		res.scalar = s.p.G(c.x, c.y, c.batch)
	case opGradF, opGradG:
		if c.flags&(flagDX|flagDY) == 0 {
			return nil, codeFailed, errors.New("neither ∇x nor ∇y asked for")
		}
		if c.flags&flagDX != 0 {
			res.a = make([]float64, dx)
		}
		if c.flags&flagDY != 0 {
			res.b = make([]float64, dy)
		}
		if c.op == opGradF {
			s.p.GradF(res.a, res.b, c.x, c.y, c.batch)
		} else {
			s.p.GradG(res.a, res.b, c.x, c.y, c.batch)
		}
	case opHVP:
		res.a = make([]float64, dy)
		s.p.HVP(res.a, c.x, c.y, c.v, c.batch)
	case opMixedXY:
		res.a = make([]float64, dx)
		s.p.MixedXY(res.a, c.x, c.y, c.v, c.batch)
	case opMixedYX:
		res.a = make([]float64, dy)
		s.p.MixedYX(res.a, c.x, c.y, c.v, c.batch)
	case opLinHVP, opLinMixedXY:
		lin := s.linearization(c)
		if lin == nil {
			return nil, codeNoLin, fmt.Errorf("linearization %d is not held", c.arg)
		}
		if c.op == opLinHVP {
			res.a = make([]float64, dy)
			lin.HVP(res.a, c.v)
		} else {
			res.a = make([]float64, dx)
			lin.MixedXY(res.a, c.v)
		}
	case opHessYY:
		h := mat.NewSymDense(dy, nil)
		s.p.HessYY(h, c.x, c.y, c.batch)
		res.a = make([]float64, dy*dy)
		for i := range dy {
			for j := range dy {
				res.a[i*dy+j] = h.At(i, j)
			}
		}
	case opHessXY:
		h := mat.NewDense(dx, dy, nil)
		s.p.HessXY(h, c.x, c.y, c.batch)
		res.a = h.RawMatrix().Data
	case opCheckBatch:
		if c.arg < 1 || c.arg > uint64(s.levelSize(upper)) {
			return nil, codeFailed, fmt.Errorf("batch size %d outside [1, %d]", c.arg, s.levelSize(upper))
		}
		if err := s.p.CheckBatch(upper, int(c.arg)); err != nil {
			return nil, codeFailed, err
		}
	default:
		return nil, codeFailed, fmt.Errorf("unknown oracle %d", c.op)
	}
	return res, 0, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *shard) checkBatch(batch []int, upper bool) error {
	if batch == nil {
		return nil
	}
	if len(batch) == 0 {
		return errors.New("empty batch")
	}
	n := s.levelSize(upper)
	for _, i := range batch {
		if i < 0 || i >= n {
			return fmt.Errorf("batch index %d outside the shard's %d samples", i, n)
		}
	}
	return nil
}

// linearization returns the linearization c uses, making it when c carries
// its point, or nil when the shard does not hold it.
func (s *shard) linearization(c *callBody) *graph.Linearization {
	for i, e := range s.lins {
		if e.id == c.arg {
			copy(s.lins[1:i+1], s.lins[:i])
			s.lins[0] = e
			return e.lin
		}
	}
	if c.flags&flagSetup == 0 {
		return nil
	}
	lin := s.p.Linearize(c.x, c.y, c.batch)
	if len(s.lins) < maxLinearizations {
		s.lins = append(s.lins, linEntry{})
	}
	copy(s.lins[1:], s.lins)
	s.lins[0] = linEntry{id: c.arg, lin: lin}
	return lin
}
