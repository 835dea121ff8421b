package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// Federated clients as processes. The shards of a Problem built with
// Settings.LowerSizes and UpperSizes are the clients of a federated run:
// shard m is client m's partition, built in a worker by the model's
// Constructor and held by that worker alone. Clients returns them as
// optim.FedClients: a round sends each participating client's task (the
// steps of the algorithm it runs on its own data and state, with the
// vectors the server broadcasts) as one call to the worker holding the
// client, which runs it with optim.FedClient on the shard's problem and
// replies with the vector the client sends. So the run is the one of
// optim.LocalClients on the same problems, bit for bit, and every message
// is counted by the round it belongs to (FedTraffic).

// FedTraffic counts the messages of a federated run's rounds of one level
// (optim.FedLevel): the rounds, the requests to clients and their replies,
// and their bytes as sent (headers included).
type FedTraffic struct {
	Rounds              int64
	Requests, Replies   int64
	BytesOut, BytesIn   int64
	Skipped, Refusals   int64 // clients left out of optional rounds; of those, the ones that lost their state
	PayloadOut, Payload int64 // the vectors and batch positions alone, in bytes (8 per number, 4 per position)
}

// Clients returns the shards of p as the clients of a federated run
// (optim.FedClients): shard m is client m. Make p with Settings.LowerSizes
// and UpperSizes, the sizes of the clients' partitions, and Replicas 1: a
// client's data and state are its own. Rounds run on p's workers with p's
// deadlines: a client whose worker is lost, and for which no worker joins
// within Settings.JoinTimeout, fails the round with an error naming it,
// or, in an optional round (partial participation), is left out of it at
// once. A client whose process was restarted has lost the state the
// algorithm keeps in it: a task that reads that state fails (or, optional,
// leaves it out), naming it.
func (p *Problem) Clients() optim.FedClients { return fedClients{p} }

// FedTraffic returns the messages of the federated rounds so far, by
// level (indexed by optim.FedLevel).
func (p *Problem) FedTraffic() []FedTraffic { return append([]FedTraffic(nil), p.fed[:]...) }

type fedClients struct{ p *Problem }

func (c fedClients) Clients() int { return len(c.p.shards) }

func (c fedClients) Sizes(m int) (lower, upper int) {
	sp := c.p.shards[m].spec
	return max(sp.lower.Len(), 1), max(sp.upper.Len(), 1)
}

// Round implements optim.FedClients.
func (c fedClients) Round(r *optim.FedRound) error {
	p := c.p
	if p.err != nil {
		return p.err
	}
	if int(r.Level) >= len(p.fed) {
		return fmt.Errorf("dist: round of unknown level %v", r.Level)
	}
	parts := make([]part, len(r.Tasks))
	bodies := make([][]byte, len(r.Tasks))
	for j := range r.Tasks {
		t := &r.Tasks[j]
		if t.Client < 0 || t.Client >= len(p.shards) {
			return fmt.Errorf("dist: a task for client %d of %d", t.Client, len(p.shards))
		}
		parts[j] = part{shard: p.shards[t.Client]}
		bodies[j] = encodeTask(nil, t)
	}
	tr := &p.fed[r.Level]
	p.round = tr
	defer func() { p.round = nil }()
	skipped := p.stats.Skipped
	err := p.exchange(opFed, parts, func(pt *part, _ *workerRef, _ bool) *callBody {
		j := partIndex(parts, pt)
		tr.PayloadOut += taskPayload(&r.Tasks[j])
		return &callBody{op: opFed, data: bodies[j]}
	}, -1, 0, r.Optional)
	if err != nil {
		p.err = &CallError{Oracle: fmt.Sprintf("the %v round of a federated run (shard k holds client k)", r.Level), Err: err}
		return p.err
	}
	tr.Rounds++
	tr.Skipped += int64(p.stats.Skipped - skipped)
	r.Replies = make([][]float64, len(parts))
	for j, pt := range parts {
		if pt.res == nil {
			continue
		}
		calls, err := decodeCalls(pt.res.data)
		if err != nil {
			return fmt.Errorf("dist: client %d's reply: %w", r.Tasks[j].Client, err)
		}
		r.Replies[j] = pt.res.a
		if r.Replies[j] == nil {
			r.Replies[j] = []float64{} // an empty reply, not a missing one
		}
		r.Calls = r.Calls.Add(calls)
		tr.Payload += int64(8 * len(pt.res.a))
	}
	return nil
}

// taskPayload is the size of what a task carries for the algorithm: its
// vectors and batch positions.
func taskPayload(t *optim.FedTask) int64 {
	var n int64
	for _, s := range t.Steps {
		n += int64(8*len(s.Vec) + 4*len(s.Batch))
	}
	return n
}

// The encoding of a task in a call's data (wire version 2): client (4
// bytes), namespace (string), run (8), fresh (1), the number of steps (4) and each
// step: procedure (1), name (string), batch (index list), vector, A and B
// (8 each).
func encodeTask(buf []byte, t *optim.FedTask) []byte {
	e := encoder{b: buf}
	e.u32(uint32(t.Client))
	e.str8(t.State)
	e.u64(t.Run)
	e.u8(uint8(b2i(t.Fresh)))
	e.u32(uint32(len(t.Steps)))
	for _, s := range t.Steps {
		e.u8(uint8(s.Op))
		e.str8(s.Name)
		e.u8(uint8(b2i(s.Batch != nil)))
		e.ints(s.Batch)
		e.f64s(s.Vec)
		e.f64(s.A)
		e.f64(s.B)
	}
	return e.b
}

// minStep is the smallest encoded step.
const minStep = 1 + 1 + 1 + 4 + 4 + 8 + 8

func decodeTask(data []byte) (*optim.FedTask, error) {
	d := decoder{b: data}
	t := &optim.FedTask{Client: int(d.u32("client")), State: d.str8("namespace"), Run: d.u64("run"), Fresh: d.flag("fresh")}
	n := d.count(minStep, "steps")
	for i := 0; i < n && d.err == nil; i++ {
		s := optim.FedStep{Op: optim.FedOp(d.u8("procedure")), Name: d.str8("name")}
		hasBatch := d.flag("batch flag")
		s.Batch = d.ints("batch")
		switch {
		case hasBatch && s.Batch == nil:
			s.Batch = []int{}
		case !hasBatch && len(s.Batch) > 0:
			d.fail("a batch of %d positions without the batch flag", len(s.Batch))
		case !hasBatch:
			s.Batch = nil
		}
		s.Vec, s.A, s.B = d.f64s("vector"), d.f64("A"), d.f64("B")
		t.Steps = append(t.Steps, s)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the task", len(d.b)-d.off)
	}
	if d.err != nil {
		return nil, fmt.Errorf("a client's task: %w", d.err)
	}
	return t, nil
}

// flag reads a byte that must be 0 or 1.
func (d *decoder) flag(what string) bool {
	v := d.u8(what)
	if d.err == nil && v > 1 {
		d.fail("%s is %d, not 0 or 1", what, v)
	}
	return v == 1
}

// encodeCalls writes the counts of c, 8 bytes each.
func encodeCalls(c oracle.Calls) []byte {
	var b []byte
	for _, v := range []int64{c.F, c.G, c.GradF, c.GradG, c.HVP, c.MixedXY, c.MixedYX, c.Dense} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeCalls(b []byte) (oracle.Calls, error) {
	if len(b) != 64 {
		return oracle.Calls{}, fmt.Errorf("oracle counts of %d bytes, want 64", len(b))
	}
	v := make([]int64, 8)
	for i := range v {
		u := binary.LittleEndian.Uint64(b[8*i:])
		if u > math.MaxInt64 {
			return oracle.Calls{}, errors.New("an oracle count out of range")
		}
		v[i] = int64(u)
	}
	return oracle.Calls{F: v[0], G: v[1], GradF: v[2], GradG: v[3], HVP: v[4], MixedXY: v[5], MixedYX: v[6], Dense: v[7]}, nil
}

// fedCall runs a client's task on the shard, whose problem is the
// client's own data. The client's state lives with the shard: a shard
// built by this process after a restart holds none, and the client refuses
// a task that reads it (optim.ErrFedStale).
func (s *shard) fedCall(c *callBody) (*resultBody, uint8, error) {
	t, err := decodeTask(c.data)
	if err != nil {
		return nil, codeFailed, err
	}
	if t.Client != int(s.spec.index) {
		return nil, codeFailed, fmt.Errorf("a task for client %d sent to shard %d", t.Client, s.spec.index)
	}
	if s.fed == nil {
		s.fed = optim.NewFedClient(s.p)
	}
	reply, calls, err := s.fed.Run(t)
	if errors.Is(err, optim.ErrFedStale) {
		return nil, codeStale, err
	}
	if err != nil {
		return nil, codeFailed, err
	}
	return &resultBody{a: append([]float64(nil), reply...), data: encodeCalls(calls)}, 0, nil
}
