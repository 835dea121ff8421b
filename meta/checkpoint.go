package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkpointMagic is the first line of every checkpoint file.
const checkpointMagic = "bilevel meta checkpoint v1"

// ErrCorrupt is matched (errors.Is) by the error ReadCheckpoint returns
// for a file that is not an intact checkpoint.
var ErrCorrupt = errors.New("corrupt checkpoint")

// WriteCheckpoint saves v (a struct of Snapshots, settings and logs, say)
// as JSON at path atomically: it writes path + ".tmp", syncs it and
// renames it over path, so that a crash leaves either the old checkpoint or
// the new one, never a mixture. The temporary file has a fixed name, as
// optim's has: a write killed half-way leaves at most that one file, which
// the next write replaces. The file starts with a header line and the
// SHA-256 of the JSON, which ReadCheckpoint verifies. Float values must be
// finite (JSON has no NaN).
func WriteCheckpoint(path string, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("meta: encoding checkpoint %s: %w", path, err)
	}
	sum := sha256.Sum256(payload)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s\nsha256 %s\n", checkpointMagic, hex.EncodeToString(sum[:]))
	buf.Write(payload)
	buf.WriteByte('\n')

	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("meta: writing checkpoint %s: %w", path, err)
	}
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("meta: writing checkpoint %s: %w", path, err)
	}
	// Make the rename itself durable; not every system can sync a folder.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// ReadCheckpoint loads into v a checkpoint written by WriteCheckpoint. A
// missing file gives an error matching fs.ErrNotExist; a file that is not
// a checkpoint, is truncated or altered (checksum mismatch) or whose JSON
// does not fit v gives an error matching ErrCorrupt that says which.
func ReadCheckpoint(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("meta: reading checkpoint: %w", err)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("meta: checkpoint %s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	header, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok || string(header) != checkpointMagic {
		return corrupt("the first line is not %q", checkpointMagic)
	}
	sumLine, payload, ok := bytes.Cut(rest, []byte{'\n'})
	hexSum, found := bytes.CutPrefix(sumLine, []byte("sha256 "))
	if !ok || !found {
		return corrupt("no checksum line")
	}
	want, err := hex.DecodeString(string(hexSum))
	if err != nil || len(want) != sha256.Size {
		return corrupt("malformed checksum %q", hexSum)
	}
	payload = bytes.TrimSuffix(payload, []byte{'\n'})
	if got := sha256.Sum256(payload); !bytes.Equal(got[:], want) {
		return corrupt("checksum mismatch: the file was truncated or altered (%d bytes of data)", len(payload))
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return corrupt("its data do not fit: %v", err)
	}
	return nil
}
