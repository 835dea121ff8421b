package data

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadIDX checks that ReadIDX never panics, that it is deterministic,
// that it rejects with an *IDXError whose offset lies in the stream, that an
// accepted raw stream is exactly what WriteIDX writes for the result, and
// that a raw stream and its gzip compression are accepted or rejected alike,
// with the same error. The seed corpus is in testdata/fuzz/FuzzReadIDX.
func FuzzReadIDX(f *testing.F) {
	f.Add([]byte{0, 0, 8, 1, 0, 0, 0, 2, 3, 4})
	f.Add(gzipBytes(f, []byte{0, 0, 0x0d, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0x3f, 0x80, 0, 0}))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ReadIDX(bytes.NewReader(in))
		m2, err2 := ReadIDX(bytes.NewReader(in))
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || (err == nil && !sameIDX(m, m2)) {
			t.Fatalf("ReadIDX not deterministic: %v, %v", err, err2)
		}
		gz := len(in) >= 2 && in[0] == 0x1f && in[1] == 0x8b
		if err != nil {
			var ie *IDXError
			if !errors.As(err, &ie) {
				t.Fatalf("error of type %T, want *IDXError: %v", err, err)
			}
			if ie.Offset < 0 || (!gz && ie.Offset > int64(len(in))) {
				t.Fatalf("offset %d outside the %d-byte stream: %v", ie.Offset, len(in), err)
			}
		} else {
			n := m.Len()
			switch {
			case len(m.Dims) == 0 || n > MaxIDXElements:
				t.Fatalf("accepted dimensions %v", m.Dims)
			case len(m.Bytes) != n*m.Type.Size() || m.Values != nil:
				t.Fatalf("%v with %d bytes and %d values for dimensions %v", m.Type, len(m.Bytes), len(m.Values), m.Dims)
			}
			out := encodeIDX(t, m)
			if !gz && !bytes.Equal(out, in) {
				t.Fatalf("WriteIDX(ReadIDX(in)) = %x, want %x", out, in)
			}
			back, err := ReadIDX(bytes.NewReader(out))
			if err != nil || !sameIDX(back, m) {
				t.Fatalf("re-reading the re-encoded stream: %v", err)
			}
		}
		if gz {
			return
		}
		mz, errz := ReadIDX(bytes.NewReader(gzipBytes(t, in)))
		switch {
		case (err == nil) != (errz == nil):
			t.Fatalf("raw error %v, gzip error %v", err, errz)
		case err != nil && err.Error() != errz.Error():
			t.Fatalf("raw error %q, gzip error %q", err, errz)
		case err == nil && !sameIDX(m, mz):
			t.Fatalf("raw and gzip streams decode differently")
		}
	})
}

// FuzzSamplerState checks that Sampler.UnmarshalBinary and
// ReplacementSampler.UnmarshalBinary never panic, and that an accepted state
// survives another round trip: the two samplers then draw the same batches.
func FuzzSamplerState(f *testing.F) {
	s := NewSampler(7, 3, 1)
	for i := range 4 {
		b, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if i < 3 {
			s.Next(nil)
		}
	}
	r := NewReplacementSampler(5, 2, 1)
	r.Next(nil)
	b, err := r.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		var s Sampler
		if s.UnmarshalBinary(in) == nil {
			b, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var s2 Sampler
			if err := s2.UnmarshalBinary(b); err != nil {
				t.Fatalf("re-reading the re-encoded state: %v", err)
			}
			if s.n <= 64 {
				for range 2 * s.BatchesPerEpoch() {
					if a, b := s.Next(nil), s2.Next(nil); !slices.Equal(a, b) {
						t.Fatalf("batches %v and %v differ", a, b)
					}
				}
			}
		}
		var r ReplacementSampler
		if r.UnmarshalBinary(in) == nil {
			b, err := r.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var r2 ReplacementSampler
			if err := r2.UnmarshalBinary(b); err != nil {
				t.Fatalf("re-reading the re-encoded state: %v", err)
			}
			if r.batch <= 64 {
				if a, b := r.Next(nil), r2.Next(nil); !slices.Equal(a, b) {
					t.Fatalf("batches %v and %v differ", a, b)
				}
			}
		}
	})
}

// TestFuzzReadIDXCorpus checks the committed seed corpus: ReadIDX accepts
// the files named valid-* and rejects those named broken-*.
func TestFuzzReadIDXCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadIDX")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var valid, broken int
	for _, e := range entries {
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(text)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s: not a one-value corpus file", e.Name())
		}
		in, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		_, err = ReadIDX(strings.NewReader(in))
		switch {
		case strings.HasPrefix(e.Name(), "valid-"):
			valid++
			if err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		case strings.HasPrefix(e.Name(), "broken-"):
			broken++
			if err == nil {
				t.Errorf("%s: accepted", e.Name())
			}
		}
	}
	if valid < 3 || broken < 3 {
		t.Errorf("corpus has %d valid and %d broken files, want at least 3 of each", valid, broken)
	}
}
