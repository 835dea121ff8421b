package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestQuick runs a reduced quick mode (p = 0.5, three methods, the embedded
// Fashion-MNIST subset, a budget of 2·10⁵ per-sample oracle evaluations,
// deterministic given the seed) and checks the claims of papers 003 and
// 002 that docs/experiments.md reports, with margins:
//
//   - training on the clean samples only beats training on the corrupted
//     data by at least 5 accuracy points (the set-up makes cleaning worth it);
//   - every bilevel method beats training on the corrupted data by at least
//     3 points, and the best by at least 6 (we measure 5 to 10);
//   - the learned weights find corrupted samples: precision and recall of
//     σ(λ_i) < ½ at least 0.7, where flagging at random gives a precision
//     of about 0.45 (the fraction of changed labels).
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{
		"-p", "0.5", "-methods", "stocbio,nsbo,aid", "-work", "2e5", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]float64{}
	for _, b := range o.Baselines {
		base[b.Baseline] = b.TestAcc
	}
	if base["clean-only"] < base["corrupted"]+0.05 {
		t.Errorf("clean-only baseline %.3f is not 5 points above the corrupted one %.3f", base["clean-only"], base["corrupted"])
	}
	best := 0.0
	for _, r := range o.Runs {
		if r.Error != "" {
			t.Errorf("%s stopped: %s", r.Method, r.Error)
		}
		if r.TestAcc < base["corrupted"]+0.03 {
			t.Errorf("%s: test accuracy %.3f is not 3 points above training on corrupted data (%.3f)", r.Method, r.TestAcc, base["corrupted"])
		}
		if r.Precision < 0.7 || r.Recall < 0.7 {
			t.Errorf("%s: weights flag corrupted samples with precision %.3f, recall %.3f; want ≥ 0.7", r.Method, r.Precision, r.Recall)
		}
		best = max(best, r.TestAcc)
	}
	if best < base["corrupted"]+0.06 {
		t.Errorf("best test accuracy %.3f is not 6 points above the corrupted baseline %.3f", best, base["corrupted"])
	}
	for _, f := range []string{"traces.csv", "runs.csv", "baselines.csv", "summary.json",
		"embedded_p0.5_test_acc_vs_time.png", "embedded_p0.5_test_loss_vs_samples.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestFlags: -h describes every flag, and bad values are errors.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-mode", "slow"}, {"-p", "1.5"}, {"-methods", "sgd"}, {"-set", "stocbio.beta=1"}, {"-work", "0"}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := parseFlags(fs, args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-mode", "full"})
	if err != nil || c.Train != 20000 || c.Val != 5000 || len(c.Datasets) != 2 || len(c.Ps) != 3 {
		t.Errorf("full mode: %+v, %v", c, err)
	}
}
