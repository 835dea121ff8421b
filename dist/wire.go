package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/graph"
)

// The wire format of every message between a coordinator and its workers,
// version 2 (version 1 had no payload bytes in calls and results). Integers are little-endian; a string is its length (one byte,
// or two for text) and its bytes; a vector is its length n (four bytes)
// and n float64 bit patterns; an index list is its length and n four-byte
// indices.
//
//	offset  size  content
//	0       4     magic "BLVD"
//	4       1     version, 1
//	5       1     kind (kindHello, …)
//	6       1+k   sender: the process's name, k ≤ maxName bytes of [A-Za-z0-9_-]
//	        8     session: the coordinator's session number
//	        8     seq: the request's number, echoed by its reply
//	        …     the body of the kind (see the body types)
//
// A message is decoded completely or not at all: every length is checked
// against the bytes that remain before anything is allocated, and bytes
// left over after the body are an error, so that a message can never make
// the decoder read out of bounds, allocate more than its own size or
// panic.
const (
	wireMagic   = "BLVD"
	wireVersion = 2
	maxName     = 64
)

// Message kinds.
const (
	kindHello    = 1 + iota // worker → pool: here I am (body helloBody)
	kindDiscover            // coordinator → pool: who is there? (no body)
	kindAttach              // coordinator → worker: hold these shards (attachBody)
	kindAttached            // worker → coordinator: built (attachedBody)
	kindCall                // coordinator → worker: evaluate an oracle (callBody)
	kindResult              // worker → coordinator: its value (resultBody)
	kindError               // either way: a request failed (errorBody)
	kindPing                // coordinator → worker: alive? (no body)
	kindPong                // worker → coordinator (no body)
	kindDetach              // coordinator → worker: forget this session (no body)
	kindCount
)

var kindNames = [kindCount]string{"", "hello", "discover", "attach", "attached", "call", "result", "error", "ping", "pong", "detach"}

// message is one decoded message: the header and the body of its kind
// (nil for the kinds without one).
type message struct {
	kind    uint8
	sender  string
	session uint64
	seq     uint64
	body    any
}

// helloBody announces a worker.
type helloBody struct {
	host    string
	pid     uint32
	threads uint16   // its GOMAXPROCS
	models  []string // the constructors it has registered
}

// shardSpec is one shard a worker is asked to hold.
type shardSpec struct {
	index, count uint32
	lower, upper Range
}

// attachBody asks a worker to hold exactly the listed shards of a model
// for the sender's session.
type attachBody struct {
	model   string
	params  []byte
	threads uint16 // GOMAXPROCS to run with; 0 keeps the worker's
	shards  []shardSpec
}

// attachedBody describes what a worker built; every shard it holds has
// this layout.
type attachedBody struct {
	threads      uint16
	outer, inner []graph.Var
	x0, y0       []float64
}

// callBody asks for one oracle on one shard.
type callBody struct {
	shard uint32
	op    uint8
	flags uint8
	arg   uint64 // linearization id (linear products) or batch size (opCheckBatch)
	x     []float64
	y     []float64
	v     []float64
	batch []int  // local indices; nil (flagBatch unset) for all of the shard's samples
	data  []byte // opFed: the client's task (encodeTask); opMeta: the task (encodeMetaTask)
}

// resultBody answers a callBody.
type resultBody struct {
	shard  uint32
	op     uint8
	nanos  uint64 // time the worker spent computing
	scalar float64
	a, b   []float64
	data   []byte // opFed: the client's oracle calls (encodeCalls)
}

// errorBody says why a request failed.
type errorBody struct {
	shard uint32
	code  uint8
	text  string
}

// Error codes.
const (
	codeFailed  = 1 + iota // the request cannot succeed (an oracle error, a malformed message)
	codeNotHeld            // the worker does not hold the shard for this session: attach it
	codeNoLin              // the worker does not hold the linearization: send its point again
	codeStale              // opFed: the client lost the state the task reads (its process was restarted)
)

// Call flags.
const (
	flagBatch = 1 << iota // batch holds the indices (unset: the whole shard)
	flagDX                // GradF, GradG: ∇x wanted
	flagDY                // GradF, GradG: ∇y wanted
	flagSetup             // linear products: x, y and batch define the linearization
	flagUpper             // opCheckBatch: the upper level
)

// Oracles a callBody can ask for.
const (
	opF = 1 + iota
	opG
	opGradF
	opGradG
	opHVP
	opMixedXY
	opMixedYX
	opLinHVP
	opLinMixedXY
	opHessYY
	opHessXY
	opCheckBatch
	opFed  // a federated client's task (optim.FedTask) on the shard, its data
	opMeta // a meta-learning task's meta-gradient (dist/meta.go)
	opCount
)

var opNames = [opCount]string{"", "F", "G", "GradF", "GradG", "HVP", "MixedXY", "MixedYX", "HVP (linearized)", "MixedXY (linearized)", "HessYY", "HessXY", "CheckBatch", "a client's task", "a meta-learning task"}

func opName(op uint8) string {
	if op < opCount {
		return opNames[op]
	}
	return fmt.Sprintf("oracle %d", op)
}

// encoder appends a message to a buffer.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) f64(v float64) {
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
}

// str8 writes a string of at most 255 bytes; longer ones are cut, which
// only names can be, and names are validated before they get here.
func (e *encoder) str8(s string) {
	s = s[:min(len(s), math.MaxUint8)]
	e.u8(uint8(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) str16(s string) {
	s = s[:min(len(s), math.MaxUint16)]
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes32(p []byte) {
	e.u32(uint32(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) f64s(v []float64) {
	e.u32(uint32(len(v)))
	e.b = growBy(e.b, 8*len(v))
	for _, x := range v {
		e.f64(x)
	}
}

func (e *encoder) ints(v []int) {
	e.u32(uint32(len(v)))
	e.b = growBy(e.b, 4*len(v))
	for _, x := range v {
		e.u32(uint32(x))
	}
}

func growBy(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n+len(b)/4)
		copy(nb, b)
		return nb
	}
	return b
}

func (e *encoder) vars(vs []graph.Var) {
	e.u16(uint16(len(vs)))
	for _, v := range vs {
		e.str8(v.Name)
		e.u8(uint8(len(v.Shape)))
		for _, d := range v.Shape {
			e.u32(uint32(d))
		}
	}
}

func (e *encoder) rng(r Range) {
	e.u64(uint64(r.Start))
	e.u64(uint64(r.End))
	e.u64(uint64(r.Total))
}

// encode appends m to buf and returns the result.
func encode(buf []byte, m *message) []byte {
	e := encoder{b: buf}
	e.b = append(e.b, wireMagic...)
	e.u8(wireVersion)
	e.u8(m.kind)
	e.str8(m.sender)
	e.u64(m.session)
	e.u64(m.seq)
	switch b := m.body.(type) {
	case *helloBody:
		e.str8(b.host)
		e.u32(b.pid)
		e.u16(b.threads)
		e.u16(uint16(len(b.models)))
		for _, s := range b.models {
			e.str8(s)
		}
	case *attachBody:
		e.str8(b.model)
		e.bytes32(b.params)
		e.u16(b.threads)
		e.u16(uint16(len(b.shards)))
		for _, s := range b.shards {
			e.u32(s.index)
			e.u32(s.count)
			e.rng(s.lower)
			e.rng(s.upper)
		}
	case *attachedBody:
		e.u16(b.threads)
		e.vars(b.outer)
		e.vars(b.inner)
		e.f64s(b.x0)
		e.f64s(b.y0)
	case *callBody:
		e.u32(b.shard)
		e.u8(b.op)
		e.u8(b.flags)
		e.u64(b.arg)
		e.f64s(b.x)
		e.f64s(b.y)
		e.f64s(b.v)
		e.ints(b.batch)
		e.bytes32(b.data)
	case *resultBody:
		e.u32(b.shard)
		e.u8(b.op)
		e.u64(b.nanos)
		e.f64(b.scalar)
		e.f64s(b.a)
		e.f64s(b.b)
		e.bytes32(b.data)
	case *errorBody:
		e.u32(b.shard)
		e.u8(b.code)
		e.str16(b.text)
	}
	return e.b
}

// decoder reads a message; the first problem sticks in err and every
// later read returns zero values.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: "+format, append([]any{d.off}, args...)...)
	}
}

// take returns the next n bytes, or nil after a failure.
func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail("%s needs %d bytes, %d remain", what, n, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if p := d.take(2, what); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) f64(what string) float64 { return math.Float64frombits(d.u64(what)) }

func (d *decoder) str8(what string) string { return string(d.take(int(d.u8(what)), what)) }

func (d *decoder) str16(what string) string { return string(d.take(int(d.u16(what)), what)) }

func (d *decoder) bytes32(what string) []byte {
	n := d.u32(what)
	if p := d.take(int(min(n, math.MaxInt32)), what); len(p) > 0 {
		return append([]byte{}, p...)
	}
	return nil
}

// count reads a length of elements of size bytes and checks that they fit
// in what remains.
func (d *decoder) count(size int, what string) int {
	n := int(d.u32(what + " length"))
	if d.err == nil && n > (len(d.b)-d.off)/size {
		d.fail("%s announces %d entries, only %d bytes remain", what, n, len(d.b)-d.off)
		return 0
	}
	return n
}

func (d *decoder) f64s(what string) []float64 {
	n := d.count(8, what)
	p := d.take(8*n, what)
	if p == nil || n == 0 {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
	}
	return v
}

func (d *decoder) ints(what string) []int {
	n := d.count(4, what)
	p := d.take(4*n, what)
	if p == nil {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = int(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return v
}

func (d *decoder) vars(what string) []graph.Var {
	n := int(d.u16(what))
	var vs []graph.Var
	off := 0
	for i := 0; i < n && d.err == nil; i++ {
		v := graph.Var{Name: d.str8(what + " name"), Offset: off, Size: 1}
		dims := int(d.u8(what + " rank"))
		for j := 0; j < dims && d.err == nil; j++ {
			s := int(d.u32(what + " shape"))
			v.Shape = append(v.Shape, s)
			if v.Size > 0 && s > math.MaxInt32/v.Size {
				d.fail("%s %q has more than 2³¹ elements", what, v.Name)
			}
			v.Size *= s
		}
		if off > math.MaxInt32-v.Size {
			d.fail("%s: more than 2³¹ elements", what)
		}
		off += v.Size
		vs = append(vs, v)
	}
	return vs
}

func (d *decoder) rng(what string) Range {
	r := Range{Start: int(d.u64(what)), End: int(d.u64(what)), Total: int(d.u64(what))}
	if d.err == nil && !(0 <= r.Start && r.Start <= r.End && r.End <= r.Total) {
		d.fail("%s [%d, %d) of %d samples is not a range", what, r.Start, r.End, r.Total)
	}
	return r
}

// errNotOurs marks bytes that do not start as a message of this package.
var errNotOurs = errors.New("not a bilevel dist message")

// decode reads one message. On error it also returns the sender's name
// when the header was readable, so that the error can name it.
func decode(data []byte) (*message, error) {
	if len(data) < len(wireMagic)+2 || string(data[:len(wireMagic)]) != wireMagic {
		return nil, errNotOurs
	}
	d := decoder{b: data, off: len(wireMagic)}
	m := &message{}
	if v := d.u8("version"); v != wireVersion {
		return nil, fmt.Errorf("wire version %d, this program speaks %d: run the same build of the program on every machine", v, wireVersion)
	}
	m.kind = d.u8("kind")
	m.sender = d.str8("sender")
	if err := checkName(m.sender); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	m.session = d.u64("session")
	m.seq = d.u64("seq")
	if d.err != nil {
		return nil, d.err
	}
	switch m.kind {
	case kindHello:
		b := &helloBody{host: d.str8("host"), pid: d.u32("pid"), threads: d.u16("threads")}
		n := int(d.u16("models"))
		for i := 0; i < n && d.err == nil; i++ {
			b.models = append(b.models, d.str8("model"))
		}
		m.body = b
	case kindAttach:
		b := &attachBody{model: d.str8("model"), params: d.bytes32("params"), threads: d.u16("threads")}
		n := int(d.u16("shards"))
		for i := 0; i < n && d.err == nil; i++ {
			s := shardSpec{index: d.u32("shard index"), count: d.u32("shard count")}
			s.lower, s.upper = d.rng("lower range"), d.rng("upper range")
			if d.err == nil && s.index >= s.count {
				d.fail("shard %d of %d", s.index, s.count)
			}
			b.shards = append(b.shards, s)
		}
		m.body = b
	case kindAttached:
		m.body = &attachedBody{threads: d.u16("threads"), outer: d.vars("outer variables"), inner: d.vars("inner variables"),
			x0: d.f64s("x0"), y0: d.f64s("y0")}
	case kindCall:
		b := &callBody{shard: d.u32("shard"), op: d.u8("op"), flags: d.u8("flags"), arg: d.u64("arg"),
			x: d.f64s("x"), y: d.f64s("y"), v: d.f64s("v"), batch: d.ints("batch"), data: d.bytes32("data")}
		if d.err == nil && (b.op == 0 || b.op >= opCount) {
			d.fail("unknown oracle %d", b.op)
		}
		if b.flags&flagBatch == 0 {
			if len(b.batch) > 0 {
				d.fail("a batch of %d indices without the batch flag", len(b.batch))
			}
			b.batch = nil
		} else if b.batch == nil {
			b.batch = []int{}
		}
		m.body = b
	case kindResult:
		m.body = &resultBody{shard: d.u32("shard"), op: d.u8("op"), nanos: d.u64("nanos"), scalar: d.f64("scalar"),
			a: d.f64s("first vector"), b: d.f64s("second vector"), data: d.bytes32("data")}
	case kindError:
		b := &errorBody{shard: d.u32("shard"), code: d.u8("code"), text: d.str16("text")}
		if d.err == nil && (b.code < codeFailed || b.code > codeStale) {
			d.fail("unknown error code %d", b.code)
		}
		m.body = b
	case kindDiscover, kindPing, kindPong, kindDetach:
	default:
		return nil, fmt.Errorf("unknown message kind %d (from %s)", m.kind, m.sender)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the end of the %s message", len(d.b)-d.off, kindNames[m.kind])
	}
	if d.err != nil {
		return m, fmt.Errorf("%s message: %w", kindNames[m.kind], d.err)
	}
	return m, nil
}

// checkName reports whether s can name a process, a pool or a model: 1 to
// maxName bytes of letters, digits, '_' and '-', so that it is one NATS
// subject token.
func checkName(s string) error {
	if len(s) == 0 || len(s) > maxName {
		return fmt.Errorf("name %q: want 1 to %d characters", s, maxName)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %q: character %q is not a letter, digit, '_' or '-'", s, c)
		}
	}
	return nil
}
