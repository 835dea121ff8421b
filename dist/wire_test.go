package dist

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/graph"
)

// wireSamples has a message of every kind, with every field set.
func wireSamples() []*message {
	vars := []graph.Var{{Name: "W", Shape: []int{2, 3}, Offset: 0, Size: 6}, {Name: "b", Shape: []int{}, Offset: 6, Size: 1}}
	return []*message{
		{kind: kindHello, sender: "w-1", body: &helloBody{host: "node7.example", pid: 4242, threads: 16, models: []string{"logistic", "mlp"}}},
		{kind: kindDiscover, sender: "coordinator-1", session: 9, seq: 1},
		{kind: kindAttach, sender: "c", session: 9, seq: 2, body: &attachBody{model: "logistic", params: []byte(`{"N":3}`), threads: 2,
			shards: []shardSpec{{index: 1, count: 2, lower: Range{5, 10, 10}, upper: Range{}}}}},
		{kind: kindAttached, sender: "w-1", session: 9, seq: 2, body: &attachedBody{threads: 2, outer: vars[:1], inner: vars[1:],
			x0: []float64{1, -2, math.Inf(1), math.Copysign(0, -1), 5, 6}, y0: []float64{math.NaN()}}},
		{kind: kindCall, sender: "c", session: 9, seq: 3, body: &callBody{shard: 1, op: opLinHVP, flags: flagBatch | flagSetup, arg: 7,
			x: []float64{1}, y: []float64{2, 3}, v: []float64{4, 5}, batch: []int{0, 4, 4}}},
		{kind: kindCall, sender: "c", session: 9, seq: 4, body: &callBody{shard: 0, op: opG}},
		{kind: kindCall, sender: "c", session: 9, seq: 6, body: &callBody{shard: 2, op: opFed, data: []byte{1, 2, 3}}},
		{kind: kindResult, sender: "w-1", session: 9, seq: 3, body: &resultBody{shard: 1, op: opLinHVP, nanos: 12345, scalar: -0.5, a: []float64{1, 2}}},
		{kind: kindResult, sender: "w-1", session: 9, seq: 6, body: &resultBody{shard: 2, op: opFed, a: []float64{3}, data: []byte{4}}},
		{kind: kindError, sender: "w-1", session: 9, seq: 6, body: &errorBody{shard: 2, code: codeStale, text: "client 2 lost its state"}},
		{kind: kindError, sender: "w-1", session: 9, seq: 3, body: &errorBody{shard: 1, code: codeNoLin, text: "linearization 7 is not held"}},
		{kind: kindPing, sender: "c", session: 9, seq: 5},
		{kind: kindPong, sender: "w-1", session: 9, seq: 5},
		{kind: kindDetach, sender: "c", session: 9},
	}
}

// TestWireRoundTrip encodes and decodes a message of every kind.
func TestWireRoundTrip(t *testing.T) {
	for _, m := range wireSamples() {
		b := encode(nil, m)
		got, err := decode(b)
		if err != nil {
			t.Fatalf("%s: %v", kindNames[m.kind], err)
		}
		if !bytes.Equal(encode(nil, got), b) {
			t.Errorf("%s: decoding and encoding again changes the bytes", kindNames[m.kind])
		}
		if c, ok := m.body.(*callBody); ok && c.flags&flagBatch == 0 {
			c.batch = nil
		}
		if m.kind == kindAttached { // NaN ≠ NaN: compare the bits, which the re-encoding did
			continue
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: decoded %+v, want %+v", kindNames[m.kind], got.body, m.body)
		}
	}
}

// TestWireErrors checks that malformed messages are errors that say what
// is wrong and, when the header is readable, who sent them.
func TestWireErrors(t *testing.T) {
	call := encode(nil, wireSamples()[4])
	huge := append([]byte{}, call...)
	// The x vector's length field follows the header and shard, op, flags, arg.
	off := len(wireMagic) + 2 + 1 + len("c") + 16 + 4 + 1 + 1 + 8
	huge[off], huge[off+1], huge[off+2], huge[off+3] = 0xff, 0xff, 0xff, 0x7f
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a bilevel dist message"},
		{"foreign", []byte("PUB foo 3\r\nbar"), "not a bilevel dist message"},
		{"version", append([]byte("BLVD\x09"), call[5:]...), "wire version 9"},
		{"truncated", call[:len(call)-3], "call message"},
		{"trailing", append(append([]byte{}, call...), 0), "bytes after the end"},
		{"huge vector", huge, "announces"},
		{"bad sender", append([]byte("BLVD\x02\x05\x03a.b"), call[9:]...), "sender"},
		{"unknown kind", append([]byte("BLVD\x02\x63"), call[6:]...), "unknown message kind 99"},
	} {
		m, err := decode(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
			continue
		}
		if tc.name == "truncated" && (m == nil || m.sender != "c") {
			t.Errorf("%s: the readable header does not name the sender: %+v", tc.name, m)
		}
	}
}

// FuzzDecode checks that any bytes decode to a message or an error, never
// a panic or a read out of bounds, and that a decoded message encodes to
// the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range wireSamples() {
		f.Add(encode(nil, m))
	}
	f.Add([]byte("BLVD"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decode(data)
		if err != nil {
			return
		}
		if b := encode(nil, m); !bytes.Equal(b, data) {
			t.Fatalf("decode then encode changed %x into %x", data, b)
		}
	})
}
