package optim

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CheckpointSettings make Solve and Resume save the run to a file, so that a
// run killed at any moment loses at most Every iterations. The zero value
// saves nothing.
//
// With Path set, the run is saved after every iteration k with
// State.Iter % Every == 0, when it stops (for any reason but a failing
// Recorder or checkpoint write), and — the last finite state, Result.State —
// when an iteration fails (NaN or ±Inf, a method error). A save writes
// Path + ".tmp", syncs it to disk and renames it over Path, so Path always
// holds a complete checkpoint, old or new, even if the process is killed or
// the disk fills up during the write. Before each save the Recorder is
// flushed, so its output up to the checkpoint is on disk too. The time spent
// saving is not counted in State.Elapsed.
//
// Resume the run with LoadCheckpoint and Resume, passing the same Problem,
// Method and Settings.
type CheckpointSettings struct {
	// Path is the checkpoint file; "" disables checkpoints. Its folder must
	// exist.
	Path string
	// Every is the number of iterations between saves; 0 saves only when
	// the run stops.
	Every int
}

// Checkpoint is the content of a checkpoint file: the State and what is
// needed to check and continue a resumed run.
type Checkpoint struct {
	// State is the run's state after State.Iter iterations.
	State *State
	// Method is the Go type of the run's Method ("optim.StocBiO"); Resume
	// refuses a State read from a checkpoint with another method.
	Method string
	// Records is the number of Records the run had passed to its Recorder
	// (counting those of the runs it resumed from a checkpoint).
	Records int
	// Recorder is the state of the run's Recorder if it implements
	// encoding.BinaryMarshaler (MemoryRecorder and CSVRecorder do), nil
	// otherwise. Resume hands it to the new run's Recorder if that implements
	// encoding.BinaryUnmarshaler, so a CSV file or the list of records
	// continues where the checkpoint left it.
	Recorder []byte
}

// The checkpoint file format, version 1. All integers are big-endian.
//
//	offset  size  content
//	0       8     magic "BLVLCKPT"
//	8       4     format version (uint32), 1
//	12      8     payload length n (uint64)
//	20      32    SHA-256 of the payload
//	52      n     payload: gob encoding of checkpointWire
//
// The file ends with the payload: a file that is shorter (truncated), longer,
// or whose payload does not match its checksum is rejected, naming what is
// wrong.
const (
	checkpointMagic   = "BLVLCKPT"
	checkpointVersion = 1
	checkpointHeader  = 8 + 4 + 8 + sha256.Size
)

// checkpointWire is the payload of a checkpoint file.
type checkpointWire struct {
	State    []byte // State.MarshalBinary
	Method   string
	Records  int
	Recorder []byte
}

// resumeInfo is what a State read from a checkpoint carries for Resume.
type resumeInfo struct {
	path     string
	method   string
	records  int
	recorder []byte
}

// CheckpointError reports a checkpoint file that cannot be read or
// written. Path is "" for bytes decoded with Checkpoint.UnmarshalBinary.
type CheckpointError struct {
	Path string
	// Problem says what is wrong, e.g. "truncated: the header announces
	// 812 payload bytes, the file holds 400".
	Problem string
	// Err is the underlying error, if any (an *os.PathError, say).
	Err error
}

func (e *CheckpointError) Error() string {
	where := "optim: checkpoint"
	if e.Path != "" {
		where += " file " + e.Path
	}
	msg := where + ": " + e.Problem
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// MarshalBinary encodes c in the checkpoint file format.
func (c *Checkpoint) MarshalBinary() ([]byte, error) {
	if c.State == nil {
		return nil, errors.New("optim: Checkpoint.MarshalBinary: nil State")
	}
	if c.State.pcg == nil {
		return nil, errors.New("optim: Checkpoint.MarshalBinary: State has no random stream: make it with NewState")
	}
	st, err := c.State.MarshalBinary()
	if err != nil {
		return nil, err
	}
	var payload bytes.Buffer
	w := checkpointWire{State: st, Method: c.Method, Records: c.Records, Recorder: c.Recorder}
	if err := gob.NewEncoder(&payload).Encode(&w); err != nil {
		return nil, fmt.Errorf("optim: encoding a checkpoint: %w", err)
	}
	p := payload.Bytes()
	out := make([]byte, checkpointHeader, checkpointHeader+len(p))
	copy(out, checkpointMagic)
	binary.BigEndian.PutUint32(out[8:], checkpointVersion)
	binary.BigEndian.PutUint64(out[12:], uint64(len(p)))
	sum := sha256.Sum256(p)
	copy(out[20:], sum[:])
	return append(out, p...), nil
}

// UnmarshalBinary replaces c by the checkpoint encoded in data. It fails
// with a *CheckpointError saying what is wrong for anything but a complete,
// intact checkpoint of a version this package reads. The State it decodes
// carries the Method, Records and Recorder for Resume.
func (c *Checkpoint) UnmarshalBinary(data []byte) error {
	bad := func(format string, args ...any) error {
		return &CheckpointError{Problem: fmt.Sprintf(format, args...)}
	}
	n := len(data)
	switch {
	case n == 0:
		return bad("empty (0 bytes)")
	case n < len(checkpointMagic) && bytes.HasPrefix([]byte(checkpointMagic), data):
		return bad("truncated: %d bytes, the header alone has %d", n, checkpointHeader)
	case n < len(checkpointMagic) || string(data[:8]) != checkpointMagic:
		return bad("not a checkpoint: it starts with %q, a checkpoint with %q", data[:min(n, 8)], checkpointMagic)
	case n < checkpointHeader:
		return bad("truncated: %d bytes, the header alone has %d", n, checkpointHeader)
	}
	if v := binary.BigEndian.Uint32(data[8:]); v != checkpointVersion {
		return bad("format version %d; this package reads version %d", v, checkpointVersion)
	}
	length := binary.BigEndian.Uint64(data[12:])
	have := uint64(n - checkpointHeader)
	switch {
	case have < length:
		return bad("truncated: the header announces %d payload bytes, the file holds %d", length, have)
	case have > length:
		return bad("%d unexpected bytes after the %d-byte payload", have-length, length)
	}
	payload := data[checkpointHeader:]
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], data[20:checkpointHeader]) {
		return bad("checksum mismatch: the %d-byte payload is corrupt (SHA-256 %x, the header says %x)", length, sum[:6], data[20:26])
	}
	var w checkpointWire
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&w); err != nil {
		return &CheckpointError{Problem: "payload does not decode", Err: err}
	}
	if w.Records < 0 {
		return bad("negative record count %d", w.Records)
	}
	st := new(State)
	if err := st.UnmarshalBinary(w.State); err != nil {
		return &CheckpointError{Problem: "state does not decode", Err: err}
	}
	if err := st.checkConsistent(); err != nil {
		return &CheckpointError{Problem: "inconsistent state", Err: err}
	}
	st.resume = &resumeInfo{method: w.Method, records: w.Records, recorder: w.Recorder}
	*c = Checkpoint{State: st, Method: w.Method, Records: w.Records, Recorder: w.Recorder}
	return nil
}

// checkConsistent rejects decoded states that no run can have produced;
// the checks that need the Problem are in Resume.
func (st *State) checkConsistent() error {
	switch {
	case st.Iter < 0:
		return fmt.Errorf("Iter = %d < 0", st.Iter)
	case st.Elapsed < 0:
		return fmt.Errorf("Elapsed = %v < 0", st.Elapsed)
	}
	for _, e := range []struct {
		name string
		ep   Epoch
	}{{"LowerEpoch", st.LowerEpoch}, {"UpperEpoch", st.UpperEpoch}} {
		if err := e.ep.check(len(e.ep.Perm)); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return nil
}

// check verifies that e is unused (no permutation) or a permutation of
// 0..n−1 with a position in [0, n].
func (e Epoch) check(n int) error {
	if len(e.Perm) == 0 {
		if e.Pos != 0 {
			return fmt.Errorf("position %d without a permutation", e.Pos)
		}
		return nil
	}
	if len(e.Perm) != n {
		return fmt.Errorf("permutation of %d indices for a data set of %d samples", len(e.Perm), n)
	}
	if e.Pos < 0 || e.Pos > n {
		return fmt.Errorf("position %d outside [0, %d]", e.Pos, n)
	}
	seen := make([]bool, n)
	for _, i := range e.Perm {
		if i < 0 || i >= n || seen[i] {
			return fmt.Errorf("the permutation holds index %d twice or out of [0, %d)", i, n)
		}
		seen[i] = true
	}
	return nil
}

// ReadCheckpoint reads a checkpoint file written by Solve, Resume or
// WriteCheckpoint. A missing, truncated, corrupt or foreign file is a
// *CheckpointError naming the file and what is wrong.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &CheckpointError{Path: path, Problem: "cannot be read", Err: err}
	}
	c := new(Checkpoint)
	if err := c.UnmarshalBinary(data); err != nil {
		var ce *CheckpointError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return nil, err
	}
	c.State.resume.path = path
	return c, nil
}

// LoadCheckpoint reads the State saved in a checkpoint file, ready for
// Resume, which also restores the Recorder's position from it (see
// Checkpoint.Recorder). Errors are as for ReadCheckpoint.
func LoadCheckpoint(path string) (*State, error) {
	c, err := ReadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return c.State, nil
}

// WriteCheckpoint saves c to path atomically: it writes path + ".tmp",
// syncs it to disk, and renames it to path. If anything fails, path is left
// as it was (the temporary file is removed) and the error says so.
func WriteCheckpoint(path string, c *Checkpoint) error {
	data, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data)
}

// writeCheckpointData writes the bytes of a checkpoint to its temporary
// file; tests replace it to inject write failures.
var writeCheckpointData = func(w io.Writer, data []byte) error {
	_, err := w.Write(data)
	return err
}

func writeFileAtomic(path string, data []byte) (err error) {
	tmp := path + ".tmp"
	fail := func(what string, e error) error {
		return &CheckpointError{Path: path, Problem: what + " (the previous checkpoint, if any, is intact)", Err: e}
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail("cannot create the temporary file", err)
	}
	err = writeCheckpointData(f, data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fail("writing "+tmp+" failed", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fail("renaming "+tmp+" failed", err)
	}
	// Make the rename itself durable; not every system can sync a folder.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// validateCheckpoint checks CheckpointSettings before a run starts.
func validateCheckpoint(c CheckpointSettings) error {
	switch {
	case c.Every < 0:
		return fmt.Errorf("optim: Settings.Checkpoint.Every = %d: set it ≥ 1, or 0 to save only when the run stops", c.Every)
	case c.Path == "" && c.Every > 0:
		return fmt.Errorf("optim: Settings.Checkpoint.Every = %d without a Path: set Settings.Checkpoint.Path to the checkpoint file", c.Every)
	case c.Path == "":
		return nil
	}
	dir := filepath.Dir(c.Path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("optim: Settings.Checkpoint.Path = %q: the folder %q does not exist: create it first", c.Path, dir)
	}
	if fi, err := os.Stat(c.Path); err == nil && fi.IsDir() {
		return fmt.Errorf("optim: Settings.Checkpoint.Path = %q is a folder: name a file in it", c.Path)
	}
	return nil
}

// methodName is the name a checkpoint records for m.
func methodName(m Method) string { return fmt.Sprintf("%T", m) }

// checkpointer saves a run's checkpoints.
type checkpointer struct {
	s       *Settings
	method  string
	records int // Records passed to s.Recorder, counting earlier runs
	saved   int // State.Iter of the last save, −1 before any
}

// save writes st to the checkpoint path, if any, after flushing the
// Recorder and taking its state.
func (c *checkpointer) save(st *State) error {
	if c.s.Checkpoint.Path == "" {
		return nil
	}
	ck := &Checkpoint{State: st, Method: c.method, Records: c.records}
	if r := c.s.Recorder; r != nil {
		if f, ok := r.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return fmt.Errorf("optim: flushing the recorder before a checkpoint: %w", err)
			}
		}
		if m, ok := r.(encoding.BinaryMarshaler); ok {
			b, err := m.MarshalBinary()
			if err != nil {
				return fmt.Errorf("optim: recorder state for the checkpoint: %w", err)
			}
			ck.Recorder = b
		}
	}
	if err := WriteCheckpoint(c.s.Checkpoint.Path, ck); err != nil {
		return err
	}
	c.saved = st.Iter
	return nil
}

// restoreRecorder hands a checkpoint's recorder state to the run's
// Recorder.
func restoreRecorder(ri *resumeInfo, r Recorder) error {
	if r == nil || ri.recorder == nil {
		return nil
	}
	u, ok := r.(encoding.BinaryUnmarshaler)
	if !ok {
		return nil
	}
	if err := u.UnmarshalBinary(ri.recorder); err != nil {
		return fmt.Errorf("optim: Resume: restoring the recorder from %s: %w", ri.describe(), err)
	}
	return nil
}

// describe names the checkpoint in messages.
func (ri *resumeInfo) describe() string {
	if ri.path == "" {
		return "the checkpoint"
	}
	return "the checkpoint " + ri.path
}
