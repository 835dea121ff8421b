package optim

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadCheckpoint checks that the checkpoint reader never panics, that
// it rejects with a *CheckpointError, and that an accepted checkpoint
// encodes again to one that decodes to the same state. Each input is read
// twice: as a whole file, and as the payload of a file with a correct
// header and checksum, so that the fuzzer reaches the decoding of the
// payload and the state behind the checksum. The seed corpus is in
// testdata/fuzz/FuzzReadCheckpoint (regenerate it with
// BILEVEL_WRITE_FUZZ_CORPUS=1 go test -run TestWriteCheckpointCorpus).
func FuzzReadCheckpoint(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, data := range [][]byte{in, ckWithPayload(in)} {
			var c Checkpoint
			if err := c.UnmarshalBinary(data); err != nil {
				var ce *CheckpointError
				if !errors.As(err, &ce) {
					t.Fatalf("error of type %T, want *CheckpointError: %v", err, err)
				}
				continue
			}
			b, err := c.MarshalBinary()
			if err != nil {
				t.Fatalf("an accepted checkpoint does not encode: %v", err)
			}
			var back Checkpoint
			if err := back.UnmarshalBinary(b); err != nil {
				t.Fatalf("re-reading the re-encoded checkpoint: %v", err)
			}
			if !ckSameState(c.State, back.State) || c.Method != back.Method || c.Records != back.Records || !bytes.Equal(c.Recorder, back.Recorder) {
				t.Fatalf("the checkpoint changed in a round trip")
			}
		}
	})
}

// FuzzRecorderState checks that the recorders' UnmarshalBinary (the
// recorder part of a checkpoint) never panics and that an accepted state
// survives a round trip.
func FuzzRecorderState(f *testing.F) {
	for _, b := range ckRecorderSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var m MemoryRecorder
		if m.UnmarshalBinary(in) == nil {
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var m2 MemoryRecorder
			if err := m2.UnmarshalBinary(b); err != nil || len(m2.Records) != len(m.Records) {
				t.Fatalf("MemoryRecorder round trip: %v", err)
			}
		}
		for _, cols := range [][]string{nil, {"err"}} {
			var buf bytes.Buffer
			c := NewCSVRecorder(&buf, cols...)
			if c.UnmarshalBinary(in) != nil {
				continue
			}
			b, err := c.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			c2 := NewCSVRecorder(&buf, cols...)
			if err := c2.UnmarshalBinary(b); err != nil || c2.rows != c.rows || c2.out.n != c.out.n || c2.header != c.header {
				t.Fatalf("CSVRecorder round trip: %v", err)
			}
		}
	})
}

// ckRecorderSeeds returns recorder states of a short run.
func ckRecorderSeeds(t testing.TB) [][]byte {
	p := testProblem(t)
	mem := &MemoryRecorder{}
	var buf bytes.Buffer
	csvRec := NewCSVRecorder(&buf, "err")
	xs, _ := p.solution()
	for _, r := range []Recorder{mem, csvRec} {
		if _, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 3, EvalEvery: 2, Recorder: r, Metrics: distMetric(xs)},
			AIDBiO{Alpha: 0.5, D: 2, N: 2, Outer: SGD{LR: 0.1}}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := mem.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := csvRec.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{a, b}
}

const ckCorpusDir = "testdata/fuzz/FuzzReadCheckpoint"

// TestWriteCheckpointCorpus regenerates the seed corpora of
// FuzzReadCheckpoint, FuzzStateUnmarshal and FuzzRecorderState under
// testdata/fuzz when BILEVEL_WRITE_FUZZ_CORPUS=1. For FuzzReadCheckpoint,
// valid-* files are checkpoints, payload-* files are payloads that are
// valid once wrapped in a header, broken-* files are the damaged
// checkpoints of TestCheckpointCorrupt.
func TestWriteCheckpointCorpus(t *testing.T) {
	if os.Getenv("BILEVEL_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set BILEVEL_WRITE_FUZZ_CORPUS=1 to regenerate testdata/fuzz/FuzzReadCheckpoint")
	}
	writeIn := func(dir, name string, b []byte) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, b []byte) { writeIn(ckCorpusDir, name, b) }
	valid, st := ckValid(t)
	stBytes, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	writeIn("testdata/fuzz/FuzzStateUnmarshal", "valid-stocbio-adam-shuffled", stBytes)
	writeIn("testdata/fuzz/FuzzStateUnmarshal", "broken-truncated", stBytes[:len(stBytes)/2])
	for i, b := range ckRecorderSeeds(t) {
		writeIn("testdata/fuzz/FuzzRecorderState", []string{"valid-memory-recorder", "valid-csv-recorder"}[i], b)
	}
	write("valid-stocbio-adam-shuffled", valid)
	write("payload-stocbio-adam-shuffled", valid[checkpointHeader:])
	// A small one: a fresh State, no recorder.
	small, err := (&Checkpoint{State: NewState([]float64{1}, []float64{2, 3}, 9)}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	write("valid-fresh-state", small)
	write("payload-fresh-state", small[checkpointHeader:])
	for _, c := range ckCorruptions(small) {
		write("broken-"+strings.ReplaceAll(strings.ReplaceAll(c.name, " ", "-"), ",", ""), c.data)
	}
}

// TestFuzzReadCheckpointCorpus checks the committed seed corpus: valid-*
// files are accepted, payload-* files are accepted once wrapped in a
// header, broken-* files are rejected.
func TestFuzzReadCheckpointCorpus(t *testing.T) {
	entries, err := os.ReadDir(ckCorpusDir)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range entries {
		text, err := os.ReadFile(filepath.Join(ckCorpusDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(text)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s: not a one-value corpus file", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		in := []byte(s)
		kind, _, _ := strings.Cut(e.Name(), "-")
		count[kind]++
		var c Checkpoint
		switch kind {
		case "valid":
			err = c.UnmarshalBinary(in)
		case "payload":
			err = c.UnmarshalBinary(ckWithPayload(in))
		case "broken":
			if c.UnmarshalBinary(in) == nil {
				t.Errorf("%s: accepted", e.Name())
			}
			continue
		default:
			t.Errorf("%s: name does not start with valid-, payload- or broken-", e.Name())
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
	if count["valid"] < 2 || count["payload"] < 2 || count["broken"] < 10 {
		t.Errorf("corpus has %v files, want at least 2 valid, 2 payload and 10 broken", count)
	}
}

// TestStateDecodeHugeMapClaim: a State in the old wire format (version 1,
// with gob maps) whose map claims 4 million entries in a few bytes is
// rejected without allocating for them. gob sizes a map by the count the
// input claims; with maps in the wire format such 30 bytes made the decoder
// allocate gigabytes (found by FuzzReadCheckpoint), which is why
// stateWire and the recorders' wire formats hold lists.
func TestStateDecodeHugeMapClaim(t *testing.T) {
	type oldWire struct {
		Version int
		Scalars map[string]float64
	}
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := enc.Encode(&oldWire{Version: 1, Scalars: map[string]float64{"abcdefgh": 1}}); err != nil {
		t.Fatal(err)
	}
	first := bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := enc.Encode(&oldWire{Version: 1, Scalars: map[string]float64{"abcdefgh": 1}}); err != nil {
		t.Fatal(err)
	}
	value := buf.Bytes() // the value message alone: length, then content
	types := first[:len(first)-len(value)]
	i := bytes.Index(value, []byte("\x01\x08abcdefgh"))
	if i < 0 || value[0] >= 0x80 {
		t.Fatalf("unexpected gob encoding %x", value)
	}
	content := append(append(bytes.Clone(value[1:i]), 0xFC, 0x00, 0x40, 0x00, 0x00), value[i+1:]...)
	evil := append(append(bytes.Clone(types), byte(len(content))), content...)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var st State
	err := st.UnmarshalBinary(evil)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("decoding the crafted State succeeded")
	}
	if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 16 {
		t.Errorf("decoding %d crafted bytes allocated %d MB", len(evil), mb)
	}
	t.Log(err)
}
