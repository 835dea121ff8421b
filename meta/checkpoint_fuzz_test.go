package meta

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gobilevel/bilevel/optim"
)

// withHeader returns payload behind a correct header and checksum, so that
// the fuzzer reaches the JSON decoding.
func withHeader(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	return append([]byte(fmt.Sprintf("%s\nsha256 %s\n", checkpointMagic, hex.EncodeToString(sum[:]))), append(payload, '\n')...)
}

// FuzzReadCheckpoint checks that ReadCheckpoint never panics on any file,
// that it rejects with an error matching ErrCorrupt, and that a state it
// accepts is encoded and read back unchanged. Each input is read as a
// whole file and as the data of a file with a correct header and checksum.
func FuzzReadCheckpoint(f *testing.F) {
	good := Snapshot{Iter: 3, Params: []float64{0.5, -1, 1e-300}, Opt: optim.OptState{T: 3, M: []float64{0.1, 0, 2}, S: []float64{1, 2, 3}}}
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.ckpt")
	if err := WriteCheckpoint(path, good); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"Iter":1,"Params":[1,2],"Opt":{"T":0}}`))
	f.Add([]byte(`{"Iter":1,"Unknown":2}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		p := filepath.Join(t.TempDir(), "c.ckpt")
		for _, data := range [][]byte{in, withHeader(in)} {
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var st Snapshot
			if err := ReadCheckpoint(p, &st); err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v does not match ErrCorrupt", err)
				}
				continue
			}
			// What WriteCheckpoint writes, without its sync to disk, which
			// would make every input slow.
			payload, err := json.Marshal(st)
			if err != nil {
				t.Fatalf("an accepted state does not encode: %v", err)
			}
			if err := os.WriteFile(p, withHeader(payload), 0o644); err != nil {
				t.Fatal(err)
			}
			var back Snapshot
			if err := ReadCheckpoint(p, &back); err != nil || !reflect.DeepEqual(st, back) {
				t.Fatalf("round trip: %+v, %v; want %+v", back, err, st)
			}
		}
	})
}
