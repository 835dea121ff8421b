package main

import (
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobilevel/bilevel/examples/clitest"
)

// TestQuick runs a reduced quick mode on the embedded Fashion-MNIST subset
// (deterministic: the budgets count oracle work, not time) and checks, with
// margins, what docs/experiments.md reports:
//
//   - part multinomial: AID-CG and STABLE-MF both lower the validation
//     loss of the classifier retrained with their learned per-pixel
//     penalties by at least 0.05 below that of the initial penalties
//     (paper 003's experiment: the hyperparameters themselves improve,
//     not only an early-stopped inner solve);
//   - part stable: with the same number of samples drawn, STABLE's
//     objective error Φ(x) − Φ* is at most half BSA's (paper 000's claim
//     against the double-loop method).
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{
		"-methods", "aid,stablemf", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fixed := o.Reference["multinomial_fixed_seed1_val_loss"]
	obj := map[string]float64{}
	for _, r := range o.Runs {
		if r.Error != "" {
			t.Errorf("%s %s stopped: %s", r.Part, r.Method, r.Error)
		}
		if r.Part == "multinomial" && !(r.RefitValLoss <= fixed-0.05) {
			t.Errorf("%s: refit validation loss %.4f is not 0.05 below the fixed penalties' %.4f", r.Method, r.RefitValLoss, fixed)
		}
		if r.Part == "stable" {
			obj[r.Method] = r.ObjError
		}
	}
	if !(obj["stable"] <= obj["bsa"]/2) {
		t.Errorf("STABLE's objective error %.3g is not half BSA's %.3g", obj["stable"], obj["bsa"])
	}
	if math.IsNaN(obj["ttsa"]) {
		t.Error("TTSA has no objective error")
	}
	for _, f := range []string{"traces.csv", "runs.csv", "summary.json", "multinomial_val_loss_vs_time.png", "stable_obj_error_vs_drawn.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestFlags: bad values are errors naming the flag, before any work;
// among them the reproduction of issue 17 (-set aid.lr=NaN).
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-part", "other"}, Want: "-part"},
		{Args: []string{"-part", ""}, Want: "-part"},
		{Args: []string{"-classes", "3,3"}, Want: "-classes"},
		{Args: []string{"-classes", "3,10"}, Want: "-classes"},
		{Args: []string{"-set", "b.stable.beta=1"}, Want: "-set"},
		{Args: []string{"-set", "aid.lr=NaN"}, Want: "-set"},
		{Args: []string{"-set", "aid.lr=0"}, Want: "-set aid.lr=0"},
		{Args: []string{"-set", "bome.xi=0"}, Want: "-set bome.xi=0"},
		{Args: []string{"-set", "f2sa.lambda=NaN"}, Want: "-set"},
		{Args: []string{"-bmethods", "aid"}, Want: "-bmethods"},
		{Args: []string{"-methods", "aid,aid"}, Want: "-methods"},
		{Args: []string{"-pool", "3"}, Want: "-pool"},
		{Args: []string{"-work", "0"}, Want: "-work"},
		{Args: []string{"-bdrawn", "NaN"}, Want: "-bdrawn"},
		{Args: []string{"-xmin", "-1"}, Want: "-xmin"},
		{Args: []string{"-train", "-1"}, Want: "-train"},
		{Args: []string{"-points", "0"}, Want: "-points"},
	})
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}
