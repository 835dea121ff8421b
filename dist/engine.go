package dist

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The coordinator's side of the protocol: requests go out on the workers'
// subjects, each with a reply subject of its own (inbox.seq), so that the
// server's "no responders" answer to a request names the request and so
// its worker. One goroutine, the caller's, runs everything: messages land
// in a mailbox and are handled by wait, between probes.

// request states
const (
	reqSent      = iota // waiting for the worker's reply
	reqAttaching        // waiting for its worker to build the shard
	reqOrphan           // its shard has no worker; waiting for one to join
	reqDone
)

// request is one part of an exchange on its way.
type request struct {
	pt           *part
	op           uint8
	body         func(pt *part, w *workerRef, again bool) *callBody
	wantA, wantB int
	worker       *workerRef
	seq          uint64
	state        int
	again        bool      // send the linearization's point again
	since        time.Time // when the current state began
	// optional: the exchange may go on without this part (its result
	// then stays nil) when its shard has no live worker, its worker does
	// not finish in time, or a client lost its state.
	optional bool
}

// exchange sends one request per part and waits until each has its result,
// moving a request to another worker of its shard, or to a worker that
// joins, when its worker is lost. body builds the call for a worker; again
// asks it to carry a linearization's point. Results must have wantA (any
// when negative) and wantB entries. With optional, a part whose shard
// cannot answer is left without a result (nil) instead of failing the
// exchange.
func (p *Problem) exchange(op uint8, parts []part, body func(*part, *workerRef, bool) *callBody, wantA, wantB int, optional ...bool) error {
	p.xerr = nil
	p.active = p.active[:0]
	for k := range parts {
		parts[k].res, parts[k].from = nil, nil
		p.active = append(p.active, &request{pt: &parts[k], op: op, body: body, wantA: wantA, wantB: wantB, optional: len(optional) > 0 && optional[0]})
	}
	defer p.endExchange()
	for _, r := range p.active {
		p.dispatch(r)
	}
	err := p.wait(func() bool {
		for _, r := range p.active {
			if r.state != reqDone {
				return false
			}
		}
		return true
	}, p.tick)
	if err != nil {
		return err
	}
	var slowest uint64
	for _, pt := range parts {
		if pt.res != nil {
			slowest = max(slowest, pt.res.nanos)
		}
	}
	p.stats.Compute += time.Duration(slowest)
	return nil
}

// endExchange forgets what an exchange left in flight: late replies are
// then dropped as unknown.
func (p *Problem) endExchange() {
	clear(p.calls)
	clear(p.pings)
	p.active = p.active[:0]
	for seq, w := range p.attaches {
		w.want = nil
		delete(p.attaches, seq)
	}
}

// wait handles messages and probes until done or an error.
func (p *Problem) wait(done func() bool, tick func(time.Time) error) error {
	t := time.NewTicker(p.s.ProbeInterval)
	defer t.Stop()
	for p.xerr == nil && !done() {
		select {
		case <-p.mb.ready:
			for _, m := range p.mb.take() {
				p.receive(m)
			}
		case now := <-t.C:
			if err := tick(now); err != nil && p.xerr == nil {
				p.xerr = err
			}
		}
	}
	return p.xerr
}

func (p *Problem) fail(err error) {
	if p.xerr == nil {
		p.xerr = err
	}
}

// publish sends m on subj with reply subject reply.
func (p *Problem) publish(subj, reply string, m *message) error {
	m.sender, m.session = p.name, p.session
	p.buf = encode(p.buf[:0], m)
	if max := p.nc.MaxPayload(); int64(len(p.buf)) > max {
		return fmt.Errorf("dist: a %s message of %d bytes exceeds the server's max_payload of %d bytes: raise max_payload in the server's configuration (ServerSettings.MaxPayload for the embedded one)", kindNames[m.kind], len(p.buf), max)
	}
	if err := p.nc.PublishRequest(subj, reply, p.buf); err != nil {
		return fmt.Errorf("dist: sending a %s message on %s: %w", kindNames[m.kind], subj, err)
	}
	p.stats.MessagesSent++
	p.stats.BytesSent += int64(len(p.buf))
	return nil
}

func (p *Problem) nextSeq() uint64 {
	p.seq++
	return p.seq
}

// send sends r to w.
func (p *Problem) send(r *request, w *workerRef) {
	now := time.Now()
	r.worker, r.seq, r.state, r.since = w, p.nextSeq(), reqSent, now
	c := r.body(r.pt, w, r.again)
	c.shard = r.pt.shard.spec.index
	if c.batch != nil {
		c.flags |= flagBatch
	}
	w.lastHeard = now
	p.calls[r.seq] = r
	if err := p.publish(subject(p.s.Pool, "w", w.name), p.inbox+"."+strconv.FormatUint(r.seq, 10),
		&message{kind: kindCall, seq: r.seq, body: c}); err != nil {
		p.fail(err)
	}
	if p.round != nil {
		p.round.Requests++
		p.round.BytesOut += int64(len(p.buf))
	}
}

// dispatch sends r to a worker of its shard, or has a spare worker build
// the shard first, or parks r until a worker joins.
func (p *Problem) dispatch(r *request) {
	sh := r.pt.shard
	if len(sh.holders) > 0 {
		p.send(r, sh.holders[0])
		return
	}
	idx := int(sh.spec.index)
	r.since = time.Now()
	for _, w := range p.workers {
		if w.alive && slices.Contains(w.want, idx) {
			r.worker, r.state = w, reqAttaching
			return
		}
	}
	if ws := p.usable(); len(ws) > 0 {
		r.worker, r.state = ws[0], reqAttaching
		p.attachOrFail(ws[0], []int{idx})
		return
	}
	if r.optional {
		p.skip(r, fmt.Sprintf("shard %d has no live worker", idx))
		return
	}
	r.worker, r.state = nil, reqOrphan
	p.s.Log("dist: shard %d has no worker left; waiting up to %v for one to join pool %s", idx, p.s.JoinTimeout, p.s.Pool)
}

func (p *Problem) attachOrFail(w *workerRef, shards []int) {
	if err := p.attach(w, shards); err != nil {
		p.fail(err)
	}
}

// attach asks w to hold its shards and these.
func (p *Problem) attach(w *workerRef, shards []int) error {
	want := slices.Concat(w.shards, w.want, shards)
	slices.Sort(want)
	want = slices.Compact(want)
	a := &attachBody{model: p.s.Model, params: p.s.Params, threads: uint16(p.s.Threads)}
	for _, k := range want {
		a.shards = append(a.shards, p.shards[k].spec)
	}
	now := time.Now()
	w.want, w.attachSeq, w.attachAt, w.lastHeard = want, p.nextSeq(), now, now
	p.attaches[w.attachSeq] = w
	return p.publish(subject(p.s.Pool, "w", w.name), p.inbox+"."+strconv.FormatUint(w.attachSeq, 10),
		&message{kind: kindAttach, seq: w.attachSeq, body: a})
}

// receive handles one message from the mailbox.
func (p *Problem) receive(msg *nats.Msg) {
	p.stats.MessagesReceived++
	p.stats.BytesReceived += int64(len(msg.Data))
	suffix, ours := strings.CutPrefix(msg.Subject, p.inbox+".")
	if !ours || suffix == "d" {
		p.hello(msg)
		return
	}
	seq, err := strconv.ParseUint(suffix, 10, 64)
	if err != nil {
		p.fail(fmt.Errorf("dist: a message on this coordinator's subject %s, which it never asked for", msg.Subject))
		return
	}
	// Whom the reply is from, as the request its subject names was sent to.
	r, pinged, attaching := p.calls[seq], p.pings[seq], p.attaches[seq]
	var w *workerRef
	var what string
	switch {
	case r != nil:
		w, what = r.worker, "a call"
	case pinged != nil:
		w, what = pinged, "a ping"
	case attaching != nil:
		w, what = attaching, "an attach"
	default:
		return // it answers a request of an earlier exchange
	}
	delete(p.calls, seq)
	delete(p.pings, seq)
	delete(p.attaches, seq)
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		p.lost(w, "nobody listens on its subject (the process is gone)")
		return
	}
	m, err := decode(msg.Data)
	switch {
	case err != nil:
		p.fail(fmt.Errorf("dist: the reply to %s sent to worker %s is malformed (its sender: %s): %v", what, w.name, describeSender(m, msg.Subject, msg.Reply), err))
		return
	case m.sender != w.name:
		p.fail(fmt.Errorf("dist: the reply to %s sent to worker %s came from %q", what, w.name, m.sender))
		return
	case m.session != p.session:
		p.fail(fmt.Errorf("dist: worker %s replied for session %016x, not this coordinator's %016x: another program is using the subjects of pool %s", w.name, m.session, p.session, p.s.Pool))
		return
	}
	w.lastHeard = time.Now()
	switch {
	case r != nil:
		if p.round != nil {
			p.round.Replies++
			p.round.BytesIn += int64(len(msg.Data))
		}
		p.result(r, m)
	case attaching != nil && seq == w.attachSeq: // else a newer attach supersedes it
		p.attached(w, m)
	}
}

// result handles a worker's reply to a call.
func (p *Problem) result(r *request, m *message) {
	w := r.worker
	switch b := m.body.(type) {
	case *errorBody:
		switch b.code {
		case codeNotHeld: // a new process under the same name, or another coordinator took it
			p.s.Log("dist: worker %s no longer holds shard %d (%s); attaching it again", w.name, b.shard, b.text)
			p.forget(w)
			p.dispatch(r)
		case codeNoLin:
			r.again = true
			p.send(r, w)
		case codeStale:
			if p.round != nil {
				p.round.Refusals++
			}
			if r.optional {
				p.skip(r, fmt.Sprintf("worker %s: %s", w.name, b.text))
				return
			}
			p.fail(fmt.Errorf("dist: worker %s: %s", w.name, b.text))
		default:
			p.fail(fmt.Errorf("dist: worker %s: %s", w.name, b.text))
		}
	case *resultBody:
		if b.shard != r.pt.shard.spec.index || b.op != r.op || (r.wantA >= 0 && len(b.a) != r.wantA) || len(b.b) != r.wantB {
			p.fail(fmt.Errorf("dist: worker %s answered %s on shard %d with %s on shard %d and vectors of %d and %d entries; want %d and %d",
				w.name, opName(r.op), r.pt.shard.spec.index, opName(b.op), b.shard, len(b.a), len(b.b), r.wantA, r.wantB))
			return
		}
		r.pt.res, r.pt.from, r.state = b, w, reqDone
	default:
		p.fail(fmt.Errorf("dist: worker %s answered a call with a %s message", w.name, kindNames[m.kind]))
	}
}

// attached handles a worker's reply to an attach.
func (p *Problem) attached(w *workerRef, m *message) {
	var b *attachedBody
	switch body := m.body.(type) {
	case *errorBody:
		p.fail(fmt.Errorf("dist: worker %s could not build shards %v: %s", w.name, w.want, body.text))
		return
	case *attachedBody:
		b = body
	default:
		p.fail(fmt.Errorf("dist: worker %s answered an attach with a %s message", w.name, kindNames[m.kind]))
		return
	}
	if p.s.Threads > 0 && int(b.threads) != p.s.Threads {
		p.fail(fmt.Errorf("dist: worker %s runs with GOMAXPROCS %d, not Settings.Threads = %d", w.name, b.threads, p.s.Threads))
		return
	}
	if p.layout == nil {
		p.layout, p.dimX, p.dimY = b, len(b.x0), len(b.y0)
	} else {
		if int(b.threads) != int(p.layout.threads) {
			p.fail(fmt.Errorf("dist: worker %s runs with GOMAXPROCS %d, others with %d: the last bits of their results would differ; set Settings.Threads", w.name, b.threads, p.layout.threads))
			return
		}
		if !sameLayout(&shard{outer: b.outer, inner: b.inner, x0: b.x0, y0: b.y0},
			&shard{outer: p.layout.outer, inner: p.layout.inner, x0: p.layout.x0, y0: p.layout.y0}) {
			p.fail(fmt.Errorf("dist: worker %s built other variables or starting values than the other workers: does every worker run the same program and data?", w.name))
			return
		}
		if p.started && len(w.shards) == 0 {
			p.stats.Joined++
		}
	}
	w.shards, w.want = w.want, nil
	for _, k := range w.shards {
		sh := p.shards[k]
		if !slices.Contains(sh.holders, w) {
			sh.holders = append(sh.holders, w)
		}
	}
	for _, r := range p.active {
		if r.state == reqAttaching && r.worker == w {
			p.send(r, w)
		}
	}
}

// hello handles a worker's announcement.
func (p *Problem) hello(msg *nats.Msg) {
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		return // nobody listened to discover yet: the workers announce themselves when they start
	}
	m, err := decode(msg.Data)
	if err != nil || m.kind != kindHello {
		p.s.Log("dist: ignored a message on %s from %s that is not a worker's hello: %v", msg.Subject, describeSender(m, msg.Subject, msg.Reply), err)
		return
	}
	b := m.body.(*helloBody)
	var w *workerRef
	for _, o := range p.workers {
		if o.name == m.sender {
			w = o
		}
	}
	if w == nil {
		w = &workerRef{name: m.sender}
		p.workers = append(p.workers, w)
	} else if w.alive && (len(w.shards) > 0 || len(w.want) > 0) {
		if msg.Subject != p.inbox+".d" {
			p.lost(w, "it announced itself again (a new process under its name)")
		} else {
			return // the answer to discover of a worker already known
		}
	}
	w.alive, w.models, w.threads, w.lastHeard = true, b.models, int(b.threads), time.Now()
	if !slices.Contains(w.models, p.s.Model) {
		return
	}
	var orphans []int
	for _, r := range p.active {
		if r.state == reqOrphan {
			orphans = append(orphans, int(r.pt.shard.spec.index))
		}
	}
	if len(orphans) == 0 || p.layout == nil {
		return
	}
	p.s.Log("dist: worker %s joined; it takes over shards %v", w.name, orphans)
	for _, r := range p.active {
		if r.state == reqOrphan {
			r.worker, r.state, r.since = w, reqAttaching, time.Now()
		}
	}
	p.attachOrFail(w, orphans)
}

// forget drops what w holds: it no longer has it.
func (p *Problem) forget(w *workerRef) {
	for _, sh := range p.shards {
		sh.holders = slices.DeleteFunc(sh.holders, func(o *workerRef) bool { return o == w })
	}
	w.shards, w.want = nil, nil
	for seq, o := range p.attaches {
		if o == w {
			delete(p.attaches, seq)
		}
	}
}

// lost declares w gone and moves its requests elsewhere.
func (p *Problem) lost(w *workerRef, why string) {
	if !w.alive {
		return
	}
	w.alive = false
	p.stats.Lost++
	p.s.Log("dist: worker %s is lost: %s", w.name, why)
	p.lostWhy = fmt.Sprintf("worker %s was lost: %s", w.name, why)
	p.forget(w)
	for _, r := range p.active {
		if (r.state == reqSent || r.state == reqAttaching) && r.worker == w {
			delete(p.calls, r.seq)
			p.stats.Retries++
			p.dispatch(r)
		}
	}
}

// skip ends r without a result, as its optional exchange allows.
func (p *Problem) skip(r *request, why string) {
	r.worker, r.state, r.pt.res = nil, reqDone, nil
	p.stats.Skipped++
	p.s.Log("dist: the exchange goes on without shard %d: %s", r.pt.shard.spec.index, why)
}

// tick probes the workers that owe answers and enforces the deadlines.
func (p *Problem) tick(now time.Time) error {
	owing := map[*workerRef]bool{}
	for _, r := range p.active {
		switch r.state {
		case reqSent:
			if now.Sub(r.since) > p.s.CallTimeout && r.optional {
				delete(p.calls, r.seq)
				p.skip(r, fmt.Sprintf("worker %s did not finish within Settings.CallTimeout = %v", r.worker.name, p.s.CallTimeout))
				continue
			}
			if now.Sub(r.since) > p.s.CallTimeout {
				return fmt.Errorf("dist: worker %s did not finish %s on shard %d within Settings.CallTimeout = %v (it answers pings)", r.worker.name, opName(r.op), r.pt.shard.spec.index, p.s.CallTimeout)
			}
			owing[r.worker] = true
		case reqOrphan:
			if now.Sub(r.since) > p.s.JoinTimeout {
				sh := r.pt.shard.spec
				return fmt.Errorf("dist: shard %d (lower samples [%d, %d), upper [%d, %d)) has no worker: %s, and no worker joined pool %s within Settings.JoinTimeout = %v",
					sh.index, sh.lower.Start, sh.lower.End, sh.upper.Start, sh.upper.End, p.lostWhy, p.s.Pool, p.s.JoinTimeout)
			}
		}
	}
	for _, w := range p.attaches {
		if now.Sub(w.attachAt) > p.s.BuildTimeout {
			return fmt.Errorf("dist: worker %s did not build shards %v within Settings.BuildTimeout = %v", w.name, w.want, p.s.BuildTimeout)
		}
		owing[w] = true
	}
	for _, w := range p.workers {
		if !owing[w] || !w.alive {
			continue
		}
		if now.Sub(w.lastHeard) > p.s.ProbeTimeout {
			p.lost(w, fmt.Sprintf("silent for %v (Settings.ProbeTimeout)", now.Sub(w.lastHeard).Round(time.Millisecond)))
			continue
		}
		if now.Sub(w.lastPing) >= p.s.ProbeInterval {
			w.lastPing = now
			seq := p.nextSeq()
			p.pings[seq] = w
			if err := p.publish(subject(p.s.Pool, "p", w.name), p.inbox+"."+strconv.FormatUint(seq, 10), &message{kind: kindPing, seq: seq}); err != nil {
				return err
			}
		}
	}
	return nil
}

// mailbox queues the messages of the coordinator's subscriptions for the
// caller's goroutine.
type mailbox struct {
	mu    sync.Mutex
	q     []*nats.Msg
	ready chan struct{}
}

// maxQueued bounds a mailbox: beyond it messages are dropped (a flood of
// foreign messages cannot exhaust memory; a dropped reply shows as a
// silent worker).
const maxQueued = 1 << 16

func newMailbox() *mailbox { return &mailbox{ready: make(chan struct{}, 1)} }

func (mb *mailbox) put(m *nats.Msg) {
	mb.mu.Lock()
	if len(mb.q) < maxQueued {
		mb.q = append(mb.q, m)
	}
	mb.mu.Unlock()
	select {
	case mb.ready <- struct{}{}:
	default:
	}
}

func (mb *mailbox) take() []*nats.Msg {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	q := mb.q
	mb.q = nil
	return q
}

// errClosed is the Err of a closed Problem.
var errClosed = errors.New("dist: the Problem is closed")
