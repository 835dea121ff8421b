package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobilevel/bilevel/examples/clitest"
)

// TestRun runs every method on the deterministic quadratic and a few on
// hyper-cleaning, and checks what the comparison claims: AID-BiO, AmIGO,
// STABLE and MGBiO reach the minimizer to 1e-10 in Φ within 1000
// iterations, the single-loop SOBA and NBO-GD (with a smaller outer step) to
// 1e-7, every method ends below its starting
// gap, and hyper-cleaning lowers the validation loss below that of the
// zero classifier (log 10 ≈ 2.30).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every solver")
	}
	out := t.TempDir()
	res, err := run(config{problems: []string{"quadratic"}, methods: methodNames(), iters: 1000, dataDir: "embedded", train: 200, seed: 1, out: out}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for m, tol := range map[string]float64{"aid_bio": 1e-10, "amigo": 1e-10, "stable": 1e-10, "stable_matrix_free": 1e-10,
		"mgbio": 1e-10, "soba": 1e-7, "nbo_gd": 1e-7} {
		if gap, ok := res["quadratic_"+m].(float64); !ok || gap > tol {
			t.Errorf("%s: Φ − Φ* = %v after 1000 iterations; want ≤ %g", m, res["quadratic_"+m], tol)
		}
	}
	for _, m := range methodNames() {
		if gap, ok := res["quadratic_"+replace(m)].(float64); !ok || gap > 1 {
			t.Errorf("%s: Φ − Φ* = %v; want below the starting gap", m, res["quadratic_"+replace(m)])
		}
	}
	res, err = run(config{problems: []string{"cleaning"}, methods: []string{"aid-bio", "soba"}, iters: 150, dataDir: "embedded", train: 200, seed: 1, out: out}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cleaning_aid_bio", "cleaning_soba"} {
		if f, ok := res[k].(float64); !ok || f > 2.0 {
			t.Errorf("%s: validation loss %v; want below 2.0", k, res[k])
		}
	}
	for _, f := range []string{"trace.csv", "summary.json", "quadratic_objective_vs_calls.png", "cleaning_hypergrad_vs_time.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestFlags: the reproductions of issue 17 (-iters 0 ran 1000 iterations,
// -iters -1 and -train -1 panicked) and other bad values are errors naming
// the flag, before any work.
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-iters", "0"}, Want: "-iters 0"},
		{Args: []string{"-iters", "-1"}, Want: "-iters -1"},
		{Args: []string{"-problem", "cleaning", "-train", "-1"}, Want: "-train -1"},
		{Args: []string{"-problem", "cubic"}, Want: "-problem"},
		{Args: []string{"-methods", "aid-bio,aid-bio"}, Want: "-methods"},
		{Args: []string{"-methods", ""}, Want: "-methods"},
		{Args: []string{"-quiet", "x"}, Want: "unexpected argument"},
	})
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}

func replace(m string) string {
	r := []byte(m)
	for i, c := range r {
		if c == '-' {
			r[i] = '_'
		}
	}
	return string(r)
}
