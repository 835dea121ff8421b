package optim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ckSameState reports whether two states hold the same bits in everything
// that determines the rest of a run.
func ckSameState(a, b *State) bool {
	if a.Iter != b.Iter || a.Calls != b.Calls || !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.V, b.V) ||
		a.XOpt.T != b.XOpt.T || !sameBits(a.XOpt.M, b.XOpt.M) || !sameBits(a.XOpt.S, b.XOpt.S) ||
		len(a.Vecs) != len(b.Vecs) || len(a.Scalars) != len(b.Scalars) ||
		math.Float64bits(a.Upper) != math.Float64bits(b.Upper) || a.LowerEpoch.Pos != b.LowerEpoch.Pos {
		return false
	}
	for k, v := range a.Vecs {
		if !sameBits(v, b.Vecs[k]) {
			return false
		}
	}
	for k, v := range a.Scalars {
		if math.Float64bits(v) != math.Float64bits(b.Scalars[k]) {
			return false
		}
	}
	return *a.pcg == *b.pcg
}

// TestCheckpointResume: a run that saves every 3 iterations and stops after
// 7 leaves a checkpoint of iteration 7; LoadCheckpoint and Resume to 20
// iterations give the uninterrupted run bit for bit, and the resumed run's
// MemoryRecorder holds all 20 records.
func TestCheckpointResume(t *testing.T) {
	p := stochasticProblem(t)
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	for _, c := range resumeCases() {
		full := c.s
		full.MaxIter = 20
		fullRec := &MemoryRecorder{}
		full.Recorder = fullRec
		want, err := Solve(p, x0, y0, &full, c.m)
		if err != nil {
			t.Fatal(err)
		}

		path := filepath.Join(t.TempDir(), "run.ckpt")
		part := c.s
		part.MaxIter = 7
		part.Recorder = &MemoryRecorder{}
		part.Checkpoint = CheckpointSettings{Path: path, Every: 3}
		first, err := Solve(p, x0, y0, &part, c.m)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := ReadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if ck.State.Iter != 7 || ck.Records != 7 || ck.Method != methodName(c.m) || !ckSameState(ck.State, first.State) {
			t.Fatalf("%s: checkpoint holds iteration %d, %d records, method %q; want the final state of 7 iterations", c.name, ck.State.Iter, ck.Records, ck.Method)
		}

		st, err := LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		rest := c.s
		rest.MaxIter = 20
		rest.Seed = 12345 // ignored by Resume
		rec := &MemoryRecorder{}
		rest.Recorder = rec
		rest.Checkpoint = part.Checkpoint
		got, err := Resume(p, st, &rest, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if !ckSameState(got.State, want.State) {
			t.Errorf("%s: resumed x = %v, uninterrupted x = %v", c.name, got.X, want.X)
		}
		if len(rec.Records) != 20 {
			t.Fatalf("%s: resumed MemoryRecorder holds %d records, want 20", c.name, len(rec.Records))
		}
		for k, r := range rec.Records {
			w := fullRec.Records[k]
			if r.Iter != k || r.Calls != w.Calls || math.Float64bits(r.HypergradNorm) != math.Float64bits(w.HypergradNorm) {
				t.Fatalf("%s: record %d differs: %+v vs %+v", c.name, k, r, w)
			}
		}
		if last, err := LoadCheckpoint(path); err != nil || last.Iter != 20 {
			t.Errorf("%s: after the resumed run the checkpoint holds iteration %v (err %v), want 20", c.name, last, err)
		}
	}
}

// TestCheckpointCSV: a CSV file continued through a checkpoint, after a
// "crash" that left rows beyond the checkpoint in the file, equals the CSV
// of an uninterrupted run, times aside.
func TestCheckpointCSV(t *testing.T) {
	p := stochasticProblem(t)
	c := resumeCases()[0]
	x0, y0 := []float64{0.1, 0.2, 0.3}, make([]float64, 5)
	xs, _ := p.solution()

	var want bytes.Buffer
	full := c.s
	full.MaxIter, full.EvalEvery, full.Metrics = 12, 2, distMetric(xs)
	full.Recorder = NewCSVRecorder(&want, "err")
	if _, err := Solve(p, x0, y0, &full, c.m); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ckpt, csvPath := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "run.csv")
	f, err := os.Create(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	part := full
	part.MaxIter = 5
	part.Recorder = NewCSVRecorder(f, "err")
	part.Checkpoint = CheckpointSettings{Path: ckpt, Every: 4}
	if _, err := Solve(p, x0, y0, &part, c.m); err != nil {
		t.Fatal(err)
	}
	// The run stopped after 5 iterations, and the file has 5 rows; pretend
	// it was killed after writing more rows and half a row.
	io.WriteString(f, strings.Repeat("5,0.1,99,99,99,99,99,99,99,99,,,\n", 20)+"6,0.1,")
	f.Close()

	st, err := LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(csvPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rest := full
	rest.Recorder = NewCSVRecorder(f, "err")
	rest.Checkpoint = part.Checkpoint
	if _, err := Resume(p, st, &rest, c.m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := ckWithoutTimes(t, got), ckWithoutTimes(t, want.Bytes()); a != b {
		t.Errorf("resumed CSV:\n%s\nuninterrupted CSV:\n%s", a, b)
	}

	// Other metric columns cannot continue this file.
	st, _ = LoadCheckpoint(ckpt)
	rest.Recorder = NewCSVRecorder(io.Discard, "other")
	if _, err := Resume(p, st, &rest, c.m); err == nil || !strings.Contains(err.Error(), "metric columns") {
		t.Errorf("resuming with other CSV columns: error %v", err)
	}
}

// ckWithoutTimes returns the CSV with its time_s column (the second) blanked.
func ckWithoutTimes(t *testing.T, b []byte) string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	var out strings.Builder
	for _, r := range rows {
		r[1] = ""
		out.WriteString(strings.Join(r, ",") + "\n")
	}
	return out.String()
}

// ckValid returns the bytes of a checkpoint after 4 iterations of
// stocBiO with Adam and shuffled epochs, and its state.
func ckValid(t testing.TB) ([]byte, *State) {
	t.Helper()
	p := stochasticProblem(t)
	c := resumeCases()[0]
	s := c.s
	s.MaxIter = 4
	s.Recorder = &MemoryRecorder{}
	res, err := Solve(p, []float64{0.1, 0.2, 0.3}, make([]float64, 5), &s, c.m)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := s.Recorder.(*MemoryRecorder).MarshalBinary()
	b, err := (&Checkpoint{State: res.State, Method: methodName(c.m), Records: 4, Recorder: rb}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b, res.State
}

// ckWithPayload returns a checkpoint file around payload, with a correct
// length and checksum.
func ckWithPayload(payload []byte) []byte {
	out := make([]byte, checkpointHeader, checkpointHeader+len(payload))
	copy(out, checkpointMagic)
	binary.BigEndian.PutUint32(out[8:], checkpointVersion)
	binary.BigEndian.PutUint64(out[12:], uint64(len(payload)))
	sum := sha256.Sum256(payload)
	copy(out[20:], sum[:])
	return append(out, payload...)
}

// ckCorruptions are the damaged checkpoint files the reader must reject,
// with what its error must say.
func ckCorruptions(valid []byte) []struct {
	name string
	data []byte
	want string
} {
	n := len(valid)
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 0x20
		return b
	}
	version := bytes.Clone(valid)
	binary.BigEndian.PutUint32(version[8:], 2)
	length := bytes.Clone(valid)
	binary.BigEndian.PutUint64(length[12:], 1<<62)
	return []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty (0 bytes)"},
		{"truncated in the magic", valid[:5], "truncated: 5 bytes, the header alone has 52"},
		{"truncated in the header", valid[:30], "truncated: 30 bytes, the header alone has 52"},
		{"header only", valid[:checkpointHeader], "truncated: the header announces"},
		{"truncated payload", valid[:n-1], "file holds"},
		{"half the payload", valid[:checkpointHeader+(n-checkpointHeader)/2], "truncated"},
		{"trailing bytes", append(bytes.Clone(valid), 0, 0, 0), "3 unexpected bytes after"},
		{"another file", []byte("iter,time_s,calls_f\n0,0.1,3\n"), `not a checkpoint: it starts with "iter,tim"`},
		{"magic flipped", flip(0), "not a checkpoint"},
		{"version 2", version, "format version 2; this package reads version 1"},
		{"huge length", length, "truncated: the header announces 4611686018427387904 payload bytes"},
		{"checksum flipped", flip(25), "checksum mismatch"},
		{"payload byte flipped", flip(checkpointHeader + (n-checkpointHeader)/2), "checksum mismatch"},
		{"last byte flipped", flip(n - 1), "checksum mismatch"},
		{"garbage payload, valid checksum", ckWithPayload([]byte("not gob at all")), "payload does not decode"},
	}
}

// TestCheckpointCorrupt: every damaged file is rejected with a
// *CheckpointError naming the file and what is wrong; the intact file next
// to it still reads.
func TestCheckpointCorrupt(t *testing.T) {
	valid, st := ckValid(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ckpt")
	if err := os.WriteFile(good, valid, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range ckCorruptions(valid) {
		path := filepath.Join(dir, "bad.ckpt")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadCheckpoint(path)
		t.Logf("%s: %v", c.name, err)
		var ce *CheckpointError
		if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want a *CheckpointError naming %s and saying %q", c.name, err, path, c.want)
		}
	}
	_, err := LoadCheckpoint(filepath.Join(dir, "missing.ckpt"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.ckpt") {
		t.Errorf("missing file: error %v", err)
	}
	back, err := LoadCheckpoint(good)
	if err != nil || !ckSameState(back, st) {
		t.Errorf("the intact checkpoint: err %v", err)
	}
}

// ckFailingWriter writes half of the data and then fails, as a full disk
// does.
func ckFailingWriter(w io.Writer, data []byte) error {
	w.Write(data[:len(data)/2])
	return errors.New("no space left on device (injected)")
}

// TestCheckpointWriteFailure: a checkpoint write that fails — in the
// middle of the data, when the temporary file cannot be created, when the
// rename fails — returns an error and leaves the previous checkpoint as it
// was, with no temporary file behind; a run whose checkpoint fails stops
// with an error naming the iteration.
func TestCheckpointWriteFailure(t *testing.T) {
	_, st := ckValid(t)
	orig := writeCheckpointData
	defer func() { writeCheckpointData = orig }()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	if err := WriteCheckpoint(path, &Checkpoint{State: st, Method: "m"}); err != nil {
		t.Fatal(err)
	}
	later := st.Clone()
	later.Iter = 99
	later.X[0] = 42

	intact := func(what string) {
		t.Helper()
		back, err := LoadCheckpoint(path)
		if err != nil || !ckSameState(back, st) {
			t.Errorf("%s: the previous checkpoint was damaged: %v", what, err)
		}
		if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the temporary file is left behind (%v)", what, err)
		}
	}

	// A write that fails halfway.
	writeCheckpointData = ckFailingWriter
	err := WriteCheckpoint(path, &Checkpoint{State: later})
	writeCheckpointData = orig
	if err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "previous checkpoint, if any, is intact") {
		t.Errorf("failed write: error %v", err)
	}
	intact("failed write")

	// The temporary file cannot be created: a folder has its name.
	if err := os.Mkdir(path+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	err = WriteCheckpoint(path, &Checkpoint{State: later})
	if err == nil || !strings.Contains(err.Error(), "cannot create the temporary file") {
		t.Errorf("temporary file not creatable: error %v", err)
	}
	if back, err := LoadCheckpoint(path); err != nil || !ckSameState(back, st) {
		t.Errorf("temporary file not creatable: the previous checkpoint was damaged: %v", err)
	}
	os.Remove(path + ".tmp")

	// The rename fails: the target is a non-empty folder.
	folder := filepath.Join(dir, "folder")
	os.MkdirAll(filepath.Join(folder, "x"), 0o755)
	if err := WriteCheckpoint(folder, &Checkpoint{State: later}); err == nil || !strings.Contains(err.Error(), "renaming") {
		t.Errorf("rename onto a folder: error %v", err)
	}
	if _, err := os.Stat(folder + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rename onto a folder: the temporary file is left behind")
	}

	// A run whose third checkpoint fails stops after iteration 5 (the
	// saves come after iterations 1, 3, 5) with the second one intact.
	p := stochasticProblem(t)
	c := resumeCases()[1]
	s := c.s
	s.MaxIter = 20
	s.Checkpoint = CheckpointSettings{Path: path, Every: 2}
	saves := 0
	writeCheckpointData = func(w io.Writer, data []byte) error {
		if saves++; saves == 3 {
			return ckFailingWriter(w, data)
		}
		_, err := w.Write(data)
		return err
	}
	res, err := Solve(p, make([]float64, 3), make([]float64, 5), &s, c.m)
	if err == nil || !strings.Contains(err.Error(), "checkpoint after iteration 5") || res.Status != Failure || res.Iter != 6 {
		t.Errorf("run with a failing checkpoint: status %v after %d iterations, error %v", res.Status, res.Iter, err)
	}
	if back, err := LoadCheckpoint(path); err != nil || back.Iter != 4 {
		t.Errorf("after the failed third save the checkpoint holds %v (err %v), want iteration 4", back, err)
	}
}

// ckNaNAt returns NaN from MixedXY at its call number at (AID-BiO calls it
// once per iteration, so call k+1 is iteration k).
type ckNaNAt struct {
	*quadratic
	at, calls int
}

func (p *ckNaNAt) MixedXY(dst, x, y, v []float64, batch []int) {
	p.quadratic.MixedXY(dst, x, y, v, batch)
	if p.calls++; p.calls == p.at+1 {
		dst[0] = math.Inf(-1)
	}
}

// TestCheckpointOnNaN: a NaN stop saves the last finite state, before the
// failing iteration, to the checkpoint path, even between periodic saves;
// the error still is a *NonFiniteError.
func TestCheckpointOnNaN(t *testing.T) {
	p := &ckNaNAt{quadratic: stochasticProblem(t), at: 6}
	path := filepath.Join(t.TempDir(), "run.ckpt")
	s := Settings{MaxIter: 30, Checkpoint: CheckpointSettings{Path: path, Every: 4}}
	res, err := Solve(p, make([]float64, 3), make([]float64, 5), &s, AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.1}})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Iter != 6 || nf.Oracle != "MixedXY" {
		t.Fatalf("error %v, want a *NonFiniteError at iteration 6 from MixedXY", err)
	}
	st, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Iter != 6 || !ckSameState(st, res.State) {
		t.Errorf("checkpoint after the NaN stop holds iteration %d, want the last finite state (iteration 6)", st.Iter)
	}
	if name, _, _ := st.nonFinite(); name != "" {
		t.Errorf("the saved state has a non-finite %s", name)
	}
}

// TestCheckpointBadSettings: checkpoint settings and empty batches are
// rejected before any oracle call, saying what to change; a State from a
// checkpoint resumes only with its method and a problem it fits.
func TestCheckpointBadSettings(t *testing.T) {
	p := stochasticProblem(t)
	dir := t.TempDir()
	m := AIDBiO{Alpha: 0.5, D: 2, N: 2, Outer: SGD{LR: 0.1}}
	for _, c := range []struct {
		name string
		s    Settings
		want string
	}{
		{"negative Every", Settings{Checkpoint: CheckpointSettings{Path: filepath.Join(dir, "a"), Every: -1}}, "Checkpoint.Every = -1: set it ≥ 1"},
		{"Every without Path", Settings{Checkpoint: CheckpointSettings{Every: 5}}, "set Settings.Checkpoint.Path"},
		{"missing folder", Settings{Checkpoint: CheckpointSettings{Path: filepath.Join(dir, "no", "such", "run.ckpt")}}, "does not exist: create it first"},
		{"Path is a folder", Settings{Checkpoint: CheckpointSettings{Path: dir}}, "is a folder"},
		{"empty EvalBatch", Settings{EvalBatch: []int{}}, "EvalBatch is empty"},
	} {
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &c.s, m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if res != nil {
			t.Errorf("%s: a Result %+v: the run started", c.name, res)
		}
	}

	path := filepath.Join(dir, "run.ckpt")
	if _, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 3, Checkpoint: CheckpointSettings{Path: path}}, m); err != nil {
		t.Fatal(err)
	}
	load := func() *State {
		st, err := LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := load()
	if _, err := Resume(p, st, &Settings{MaxIter: 5}, ITDBiO{Outer: SGD{LR: 0.1}}); err == nil ||
		!strings.Contains(err.Error(), "written by a run of optim.AIDBiO, not optim.ITDBiO") || !strings.Contains(err.Error(), path) {
		t.Errorf("other method: error %v", err)
	}
	if _, err := Resume(newQuadratic(t, 3, 4, 10, 10, 0.1, 1, 2, 0.5, 1), load(), &Settings{MaxIter: 5}, m); err == nil || !strings.Contains(err.Error(), "DimY() = 4") {
		t.Errorf("other problem: error %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(st *State)
		want   string
	}{
		{"V", func(st *State) { st.V = st.V[:2] }, "len(V) = 2"},
		{"optimizer memory", func(st *State) { st.XOpt.M = []float64{1} }, "XOpt has T"},
		{"epoch of another data set", func(st *State) { st.LowerEpoch = Epoch{Perm: []int{1, 0}} }, "permutes 2 samples, the data set has 200"},
		{"epoch not a permutation", func(st *State) {
			st.UpperEpoch = Epoch{Perm: make([]int, 100)}
		}, "twice or out of"},
		{"epoch position", func(st *State) { st.LowerEpoch = Epoch{Pos: 3} }, "position 3 without a permutation"},
	} {
		st := load()
		c.change(st)
		if _, err := Resume(p, st, &Settings{MaxIter: 5}, m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// The method and recorder position are used once: a resumed run's
	// final State resumes like any other.
	st = load()
	res, err := Resume(p, st, &Settings{MaxIter: 4}, m)
	if err != nil || st.resume != nil || res.Iter != 4 {
		t.Errorf("resume: %v, %d iterations", err, res.Iter)
	}
}
