package dist

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/graph"
	"github.com/nats-io/nats.go"
)

// TestWorkerRefuses sends a worker process malformed, foreign and
// impossible requests: each is answered with an error naming what is
// wrong, and the worker goes on serving.
func TestWorkerRefuses(t *testing.T) {
	c := newCluster(t, 1)
	name := c.ws.Names()[0]
	tp := testParams{N: 20, NVal: 10, D: 3, C: 3, Seed: 1}
	p := c.problem(t, Settings{Model: "logistic", Params: tp.bytes(), NumLower: tp.N, NumUpper: tp.NVal, Workers: 1})
	valid := func(mutate func(*callBody)) []byte {
		b := &callBody{op: opG, x: make([]float64, p.DimX()), y: make([]float64, p.DimY())}
		mutate(b)
		return encode(nil, &message{kind: kindCall, sender: "prober", session: p.session, seq: 1, body: b})
	}
	for _, tc := range []struct {
		name string
		data []byte
		code uint8
		want string
	}{
		{"garbage", []byte("hello?"), codeFailed, "malformed message: not a bilevel dist message"},
		{"truncated", valid(func(*callBody) {})[:40], codeFailed, "malformed message: call message"},
		{"other session", encode(nil, &message{kind: kindCall, sender: "prober", session: 1, body: &callBody{op: opG}}), codeNotHeld, "does not hold shard 0"},
		{"short x", valid(func(b *callBody) { b.x = b.x[:1] }), codeFailed, "x has 1 entries, want 3"},
		{"index", valid(func(b *callBody) { b.flags, b.batch = flagBatch, []int{0, 20} }), codeFailed, "batch index 20 outside the shard's 20 samples"},
		{"empty batch", valid(func(b *callBody) { b.flags, b.batch = flagBatch, []int{} }), codeFailed, "empty batch"},
		{"unknown linearization", valid(func(b *callBody) { b.op, b.x, b.y, b.v, b.arg = opLinHVP, nil, nil, make([]float64, p.DimY()), 99 }), codeNoLin, "linearization 99 is not held"},
		{"pong to a worker", encode(nil, &message{kind: kindPong, sender: "prober"}), codeFailed, "unexpected pong message"},
	} {
		reply, err := c.nc.Request(subject(c.pool, "w", name), tc.data, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m, err := decode(reply.Data)
		if err != nil {
			t.Fatalf("%s: the reply is malformed: %v", tc.name, err)
		}
		e, ok := m.body.(*errorBody)
		if !ok || m.sender != name || e.code != tc.code || !strings.Contains(e.text, tc.want) {
			t.Errorf("%s: reply %s from %s %+v; want error code %d containing %q", tc.name, kindNames[m.kind], m.sender, m.body, tc.code, tc.want)
		}
	}
	if v := p.G(p.X0(nil), p.Y0(nil), nil); math.IsNaN(v) || p.Err() != nil {
		t.Fatalf("the worker no longer serves: G = %v, %v", v, p.Err())
	}
}

// impostor is a fake worker in this process that builds nothing and
// answers calls with reply.
func impostor(t *testing.T, nc *nats.Conn, pool, name string, reply func(req *message) []byte) {
	t.Helper()
	hello := encode(nil, &message{kind: kindHello, sender: name, body: &helloBody{models: []string{"logistic"}}})
	handlers := map[string]nats.MsgHandler{
		subject(pool, "discover"): func(m *nats.Msg) { m.Respond(hello) },
		subject(pool, "p", name): func(m *nats.Msg) {
			if req, err := decode(m.Data); err == nil {
				m.Respond(encode(nil, &message{kind: kindPong, sender: name, session: req.session, seq: req.seq}))
			}
		},
		subject(pool, "w", name): func(m *nats.Msg) {
			req, err := decode(m.Data)
			if err != nil {
				return
			}
			if req.kind == kindAttach {
				m.Respond(encode(nil, &message{kind: kindAttached, sender: name, session: req.session, seq: req.seq, body: &attachedBody{
					outer: []graph.Var{{Name: "x", Shape: []int{1}, Size: 1}}, inner: []graph.Var{{Name: "y", Shape: []int{1}, Size: 1}},
					x0: []float64{0}, y0: []float64{0}}}))
				return
			}
			if req.kind == kindCall {
				m.Respond(reply(req))
			}
		},
	}
	for subj, h := range handlers {
		sub, err := nc.Subscribe(subj, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}
}

// TestCoordinatorRefuses has a fake worker answer calls with malformed or
// foreign replies: each stops the problem with an error naming the worker,
// and the oracle returns NaN; a foreign message on the pool's announcement
// subject is ignored.
func TestCoordinatorRefuses(t *testing.T) {
	srv, err := StartServer(ServerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := Dial(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	result := func(req *message) *message {
		return &message{kind: kindResult, sender: "impostor", session: req.session, seq: req.seq, body: &resultBody{op: opG}}
	}
	for _, tc := range []struct {
		name  string
		reply func(req *message) []byte
		want  string
	}{
		{"garbage", func(*message) []byte { return []byte("bonjour") },
			`the reply to a call sent to worker impostor is malformed (its sender: an unnamed sender`},
		{"truncated", func(req *message) []byte { b := encode(nil, result(req)); return b[:len(b)-1] },
			`the reply to a call sent to worker impostor is malformed (its sender: "impostor"): result message`},
		{"other sender", func(req *message) []byte { m := result(req); m.sender = "mallory"; return encode(nil, m) },
			`the reply to a call sent to worker impostor came from "mallory"`},
		{"other session", func(req *message) []byte { m := result(req); m.session++; return encode(nil, m) },
			"worker impostor replied for session"},
		{"wrong oracle", func(req *message) []byte { m := result(req); m.body.(*resultBody).op = opF; return encode(nil, m) },
			"worker impostor answered G on shard 0 with F"},
		{"worker error", func(req *message) []byte {
			return encode(nil, &message{kind: kindError, sender: "impostor", session: req.session, seq: req.seq, body: &errorBody{code: codeFailed, text: "out of memory"}})
		}, "dist: worker impostor: out of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := "refuses-" + strings.ReplaceAll(tc.name, " ", "-")
			if err := nc.Publish(subject(pool, "hello"), []byte("not a hello")); err != nil {
				t.Fatal(err)
			}
			impostor(t, nc, pool, "impostor", tc.reply)
			p, err := New(nc, Settings{Model: "logistic", NumLower: 4, Workers: 1, Pool: pool, JoinTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if v := p.G([]float64{0}, []float64{0}, nil); !math.IsNaN(v) {
				t.Errorf("G = %v, want NaN", v)
			}
			if err := p.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Err = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}
