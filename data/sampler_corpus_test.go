package data

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFuzzSamplerStateCorpus checks the committed seed corpus of
// FuzzSamplerState: valid-* files decode as a Sampler or a
// ReplacementSampler, broken-* files as neither (mutated-* may go either
// way; they are there to start the fuzzer inside the format).
func TestFuzzSamplerStateCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzSamplerState")
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
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var sm Sampler
		var rs ReplacementSampler
		ok := sm.UnmarshalBinary([]byte(s)) == nil || rs.UnmarshalBinary([]byte(s)) == nil
		switch {
		case strings.HasPrefix(e.Name(), "valid-"):
			valid++
			if !ok {
				t.Errorf("%s: rejected", e.Name())
			}
		case strings.HasPrefix(e.Name(), "broken-"):
			broken++
			if ok {
				t.Errorf("%s: accepted", e.Name())
			}
		}
	}
	if valid < 2 || broken < 3 {
		t.Errorf("corpus has %d valid and %d broken files, want at least 2 and 3", valid, broken)
	}
}
