package main

import (
	"bytes"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/examples/clitest"
)

// TestQuick runs a reduced quick mode (p = 0.5, five methods, the embedded
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
//
// The fully first-order F2SA meets the same claims (measured +9.3 points,
// precision 0.82, recall 0.89). BOME's own classifier, moved by ∇f too,
// does less well (+2.9 points, precision 0.70 on this seed): for it the
// test asserts that its weights, retrained to convergence ("refit"), beat
// the corrupted baseline by 3 points (measured +7.4) with recall ≥ 0.7.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{
		"-p", "0.5", "-methods", "stocbio,nsbo,aid,f2sa,bome", "-work", "2e5", "-quiet", "-out", out})
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
		if r.Method == "bome" {
			if r.RefitTestAcc < base["corrupted"]+0.03 || r.Recall < 0.7 {
				t.Errorf("bome: refit accuracy %.3f (corrupted %.3f), recall %.3f; want 3 points above and ≥ 0.7", r.RefitTestAcc, base["corrupted"], r.Recall)
			}
			continue
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

// TestFlags: bad values are errors naming the flag, before any work;
// among them the reproductions of issue 17.
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-mode", "slow"}, Want: "-mode"},
		{Args: []string{"-p", "1.5"}, Want: "-p"},
		{Args: []string{"-p", "NaN"}, Want: "-p"},
		{Args: []string{"-methods", "sgd"}, Want: "-methods"},
		{Args: []string{"-methods", ""}, Want: "-methods"},
		{Args: []string{"-methods", "aid,aid"}, Want: "-methods"},
		{Args: []string{"-set", "stocbio.beta=1"}, Want: "-set"},
		{Args: []string{"-set", "aid.lr=NaN"}, Want: "-set"},
		{Args: []string{"-set", "aid.lr=-1"}, Want: "-set"},
		{Args: []string{"-set", "aid.lr=Inf"}, Want: "-set"},
		{Args: []string{"-set", "bome.xi=0"}, Want: "-set bome.xi=0"},
		{Args: []string{"-set", "f2sa.lambda=-1"}, Want: "-set"},
		{Args: []string{"-batch", "100000"}, Want: "-batch 100000"},
		{Args: []string{"-work", "0"}, Want: "-budget"},
		{Args: []string{"-work", "NaN"}, Want: "-work"},
		{Args: []string{"-budget", "-1s"}, Want: "-budget"},
		{Args: []string{"-train", "-1"}, Want: "-train"},
		{Args: []string{"-cr", "0"}, Want: "-cr"},
		{Args: []string{"-seeds", "1,1"}, Want: "-seeds"},
		{Args: []string{"-data", "embedded,embedded"}, Want: "-data"},
		{Args: []string{"-data", "/no/such/folder"}, Want: "-data"},
		{Args: []string{"-workers", "-1"}, Want: "-workers"},
		{Args: []string{"-workers", "65"}, Want: "-workers"},
		{Args: []string{"-nats", "localhost:4222", "-workers", "2"}, Want: "-nats"},
		{Args: []string{"-nats", "nats://localhost:4222"}, Want: "-nats"},
	})
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-mode", "full", "-data", "embedded,embedded/"})
	if err == nil {
		t.Errorf("full mode with the same data set twice accepted: %+v", c)
	}
	c, err = parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-mode", "full", "-data", "embedded"})
	if err != nil || c.Train != 20000 || c.Val != 5000 || len(c.Ps) != 3 {
		t.Errorf("full mode: %+v, %v", c, err)
	}
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}

// TestDataFolder runs on a folder of IDX files whose path has a space and
// a trailing slash (issue 17: the PNG names were built from the path), and
// with a method made to fail: it is reported as failed in the table and
// the result line, which holds no NaN, and a run where every method fails
// is an error.
func TestDataFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two short experiments")
	}
	dir := filepath.Join(t.TempDir(), "my images")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeIDXFolder(t, dir)
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-data", dir + "/", "-train", "500", "-val", "300",
		"-methods", "aid,nsbo", "-set", "aid.alpha=1e200", "-work", "2e4", "-baseline-iters", "20", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	o, err := run(c, &stdout, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "failed=my-images_p0.5_aid_seed1") || strings.Contains(last, "NaN") || strings.Contains(last, "_aid_acc") ||
		!strings.Contains(last, "my-images_p0.5_nsbo_acc=") {
		t.Errorf("result line %q; want aid failed, nsbo's accuracy and no NaN", last)
	}
	if !strings.Contains(stdout.String(), "AID-BiO   FAILED, seed 1 at iteration 0") {
		t.Errorf("the table does not show AID-BiO as failed:\n%s", stdout.String())
	}
	for _, r := range o.Runs {
		if (r.Method == "aid") != (r.Error != "") {
			t.Errorf("%s: error %q", r.Method, r.Error)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "my-images_p0.5_test_acc_vs_time.png")); err != nil || st.Size() == 0 {
		t.Errorf("plot missing: %v", err)
	}
	c.Methods = []string{"aid"}
	if _, err := run(c, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "every run failed") {
		t.Errorf("every method failed: error %v", err)
	}
}

// writeIDXFolder writes the embedded Fashion-MNIST subset to dir as the
// four gzip IDX files of Fashion-MNIST.
func writeIDXFolder(t *testing.T, dir string) {
	t.Helper()
	train, test, err := data.EmbeddedFashionMNIST()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		ds             *data.Dataset
		images, labels string
	}{{train, data.FashionMNISTTrainImages, data.FashionMNISTTrainLabels}, {test, data.FashionMNISTTestImages, data.FashionMNISTTestLabels}} {
		im := &data.IDX{Type: data.IDXUint8, Dims: []int{f.ds.N, f.ds.Height, f.ds.Width}, Bytes: make([]byte, len(f.ds.X))}
		for i, v := range f.ds.X {
			im.Bytes[i] = byte(math.Round(v * 255))
		}
		lb := &data.IDX{Type: data.IDXUint8, Dims: []int{f.ds.N}, Bytes: make([]byte, f.ds.N)}
		for i, l := range f.ds.Labels {
			lb.Bytes[i] = byte(l)
		}
		if err := data.WriteIDXFile(filepath.Join(dir, f.images+".gz"), im); err != nil {
			t.Fatal(err)
		}
		if err := data.WriteIDXFile(filepath.Join(dir, f.labels+".gz"), lb); err != nil {
			t.Fatal(err)
		}
	}
}
