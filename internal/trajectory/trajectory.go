// Package trajectory records the iterates of solver runs and compares them
// with golden files, so that a refactoring of the solvers can be shown to
// leave every run bit for bit as it was (or, where a method's arithmetic
// changes on purpose, within a stated tolerance).
//
// A Run is a list of Steps, one per iteration (and one for the state after
// Init). A Step holds a hash of every float bit and counter of the state,
// and, for small problems, the vectors themselves, so that a tolerance can
// be checked where bits are allowed to differ.
package trajectory

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/gobilevel/bilevel/graph"
)

// Step is one recorded state.
type Step struct {
	// Hash is the first 16 hex digits of the SHA-256 of the bits of every
	// vector and counter given to Hasher.
	Hash string `json:"hash"`
	// Counts are integer counters (oracle calls, say), compared exactly
	// even under a tolerance.
	Counts []int64 `json:"counts,omitempty"`
	// Vecs are the full vectors, kept for small problems.
	Vecs map[string][]float64 `json:"vecs,omitempty"`
}

// Run is one solver run: its steps and how it ended ("" for a run that
// reached its iteration limit).
type Run struct {
	Steps []Step `json:"steps"`
	End   string `json:"end,omitempty"`
}

// Hasher accumulates the bits of a Step.
type Hasher struct {
	h     []byte
	step  Step
	small int
}

// NewHasher returns a Hasher that keeps vectors of at most small entries
// in the Step.
func NewHasher(small int) *Hasher { return &Hasher{small: small} }

// Vec adds a named vector.
func (h *Hasher) Vec(name string, v []float64) {
	h.h = binary.LittleEndian.AppendUint64(h.h, uint64(len(name)))
	h.h = append(h.h, name...)
	h.h = binary.LittleEndian.AppendUint64(h.h, uint64(len(v)))
	for _, x := range v {
		h.h = binary.LittleEndian.AppendUint64(h.h, math.Float64bits(x))
	}
	if len(v) <= h.small {
		if h.step.Vecs == nil {
			h.step.Vecs = map[string][]float64{}
		}
		h.step.Vecs[name] = slices.Clone(v)
	}
}

// Count adds integer counters.
func (h *Hasher) Count(c ...int64) {
	for _, x := range c {
		h.h = binary.LittleEndian.AppendUint64(h.h, uint64(x))
	}
	h.step.Counts = append(h.step.Counts, c...)
}

// Step returns the Step and resets the Hasher.
func (h *Hasher) Step() Step {
	sum := sha256.Sum256(h.h)
	s := h.step
	s.Hash = hex.EncodeToString(sum[:8])
	h.h, h.step = h.h[:0], Step{}
	return s
}

// Tolerance relaxes the comparison of one run, for the stated Reason:
// with Golden set, the run is compared with that golden run instead of its
// own (a result that changed on purpose to another run's); with Rel > 0,
// vectors agree to Rel relative to max(1, ‖want‖∞) instead of bit for bit,
// and counts exactly up to Offset (got − golden, entry by entry; nil:
// none).
//
// Loose lets steps whose golden keeps no vectors pass on their counts
// alone (ForKernels sets it: a run recorded with other kernels is checked on
// the steps that kept their vectors, at least its last).
type Tolerance struct {
	Golden string
	Rel    float64
	Offset []int64
	Loose  bool
	Reason string
}

// RecordedKernels names the graph kernels (graph.Kernels) the golden files
// were recorded with.
const RecordedKernels = "avx512"

// ForKernels returns tol where graph.Kernels is RecordedKernels. Elsewhere
// (the purego build, a processor without AVX-512) it returns tol with every
// run of got compared to rel instead of bit for bit, and Loose: the golden
// bits hold the recorded kernels' fused multiply-adds and summation orders,
// and the caller states how far its runs carry a rounding difference. A
// run's own golden and offsets are kept.
func ForKernels(tol map[string]Tolerance, got map[string]*Run, rel float64) map[string]Tolerance {
	k := graph.Kernels()
	if k == RecordedKernels {
		return tol
	}
	reason := "golden recorded with " + RecordedKernels + " kernels, this process runs " + k
	out := make(map[string]Tolerance, len(got))
	for name := range got {
		tl := tol[name]
		tl.Rel = max(tl.Rel, rel)
		tl.Loose = true
		if tl.Reason == "" {
			tl.Reason = reason
		} else {
			tl.Reason += "; " + reason
		}
		out[name] = tl
	}
	return out
}

// Check compares got with the golden file at path, or rewrites the file
// when update is set. Runs named in tol are compared to their tolerance,
// all others bit for bit.
func Check(t *testing.T, path string, got map[string]*Run, update bool, tol map[string]Tolerance) {
	t.Helper()
	if update {
		if k := graph.Kernels(); k != RecordedKernels {
			t.Fatalf("%s: golden files are recorded with %s kernels, this process runs %s", path, RecordedKernels, k)
		}
		// One line per step keeps the file small and its diffs readable.
		var b []byte
		for i, name := range slices.Sorted(maps.Keys(got)) {
			r := got[name]
			k, _ := json.Marshal(name)
			e, _ := json.Marshal(r.End)
			b = fmt.Appendf(b, "%s\n%s: {\"end\": %s, \"steps\": [", map[bool]string{true: "{", false: ","}[i == 0], k, e)
			for j, st := range r.Steps {
				line, err := json.Marshal(st)
				if err != nil {
					t.Fatal(err)
				}
				b = fmt.Appendf(b, "%s\n  %s", map[bool]string{true: "", false: ","}[j == 0], line)
			}
			b = append(b, "]}"...)
		}
		b = append(b, "\n}\n"...)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d runs)", path, len(got))
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]*Run
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for name := range want {
		if got[name] == nil {
			t.Errorf("%s: run %q of the golden file was not run", path, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		tl, ok := tol[name]
		golden := name
		if tl.Golden != "" {
			golden = tl.Golden
		}
		w := want[golden]
		if w == nil {
			t.Errorf("%s: run %q is not in the golden file (run with -update-trajectories on the reference code)", path, golden)
			continue
		}
		relaxed := tl.Rel > 0
		switch msg, worst := compare(got[name], w, tl, relaxed); {
		case msg != "":
			t.Errorf("run %q: %s", name, msg)
		case relaxed:
			t.Logf("run %q agrees with golden %q to %.0e, worst %.2e (not bit for bit: %s)", name, golden, tl.Rel, worst, tl.Reason)
		case ok:
			t.Logf("run %q repeats golden %q bit for bit (%s)", name, golden, tl.Reason)
		}
	}
}

// countsMatch reports whether got − want equals offset (nil: zero).
func countsMatch(got, want, offset []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		var o int64
		if i < len(offset) {
			o = offset[i]
		}
		if got[i]-want[i] != o {
			return false
		}
	}
	return true
}

// compare returns "" when got matches want, else what differs first, and
// the largest scaled difference of the vectors under a tolerance.
func compare(got, want *Run, tol Tolerance, relaxed bool) (msg string, worst float64) {
	if got.End != want.End {
		return fmt.Sprintf("ended %q, golden %q", got.End, want.End), 0
	}
	if len(got.Steps) != len(want.Steps) {
		return fmt.Sprintf("%d steps, golden %d", len(got.Steps), len(want.Steps)), 0
	}
	for i, g := range got.Steps {
		w := want.Steps[i]
		if !countsMatch(g.Counts, w.Counts, tol.Offset) {
			return fmt.Sprintf("step %d: counts %v, golden %v (allowed offset %v)", i, g.Counts, w.Counts, tol.Offset), 0
		}
		if !relaxed {
			if g.Hash != w.Hash {
				return fmt.Sprintf("step %d: hash %s, golden %s (the first difference in bits)", i, g.Hash, w.Hash), 0
			}
			continue
		}
		if len(w.Vecs) == 0 {
			if tol.Loose {
				continue
			}
			return fmt.Sprintf("step %d: the golden file keeps no vectors for a tolerance check", i), 0
		}
		for name, wv := range w.Vecs {
			gv := g.Vecs[name]
			if len(gv) != len(wv) {
				return fmt.Sprintf("step %d: %s has %d entries, golden %d", i, name, len(gv), len(wv)), 0
			}
			scale := 1.0
			for _, x := range wv {
				scale = math.Max(scale, math.Abs(x))
			}
			for j := range wv {
				d := math.Abs(gv[j] - wv[j])
				if !(d <= tol.Rel*scale) {
					return fmt.Sprintf("step %d: %s[%d] = %v, golden %v (difference %.2e > %.0e·%.3g)", i, name, j, gv[j], wv[j], d, tol.Rel, scale), 0
				}
				worst = math.Max(worst, d/scale)
			}
		}
	}
	return "", worst
}
