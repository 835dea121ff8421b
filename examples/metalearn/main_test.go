package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/examples/clitest"
	"github.com/gobilevel/bilevel/meta"
)

// TestQuickMode runs the quick mode with a reduced budget (ITD-BiO only,
// 60 meta-iterations, 200 test tasks) and checks the claim of the quick
// mode: meta-training beats a head on the random backbone by at least
// five points of accuracy on the same test tasks, and every output is
// written.
func TestQuickMode(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains for a few seconds")
	}
	out := t.TempDir()
	c, err := parse("-quiet", "-out", out, "-methods", "itd", "-iters", "60", "-eval-every", "30",
		"-eval-tasks", "200", "-curve-tasks", "50", "-pretrain-steps", "20", "-pretrain-batch", "32")
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(c)
	if err != nil {
		t.Fatal(err)
	}
	itd, random := res["5w1s_itd_acc"].(float64), res["5w1s_random_acc"].(float64)
	t.Logf("5-way 1-shot: ITD-BiO %.1f%% ± %.1f%%, random backbone %.1f%% ± %.1f%%, pre-trained %.1f%%",
		100*itd, 100*res["5w1s_itd_ci95"].(float64), 100*random, 100*res["5w1s_random_ci95"].(float64), 100*res["5w1s_pretrained_acc"].(float64))
	if itd < random+0.05 {
		t.Errorf("ITD-BiO's meta-test accuracy %.1f%% is not 5 points above the random backbone's %.1f%%", 100*itd, 100*random)
	}
	for _, f := range []string{"train_log.csv", "test_curve.csv", "results.csv", "summary.json", "train_accuracy_5w1s.png",
		"test_accuracy_5w1s.png", "checkpoints/5w1s-itd.ckpt", "checkpoints/pretrain.ckpt"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestResume checks that a run stopped early and resumed ends where an
// uninterrupted run ends, and that a corrupt checkpoint is an error that
// names the file.
func TestResume(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains")
	}
	args := func(out string, extra ...string) config {
		t.Helper()
		c, err := parse(append([]string{"-quiet", "-out", out, "-methods", "aid", "-filters", "4", "-queries", "2",
			"-eval-every", "2", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false", "-checkpoint-every", "2"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	whole, parts := t.TempDir(), t.TempDir()
	a, err := run(args(whole, "-iters", "6"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(args(parts, "-iters", "3")); err != nil {
		t.Fatal(err)
	}
	b, err := run(args(parts, "-iters", "6", "-resume"))
	if err != nil {
		t.Fatal(err)
	}
	if a["5w1s_aid_acc"] != b["5w1s_aid_acc"] {
		t.Errorf("resumed run ends at accuracy %v, uninterrupted run at %v", b["5w1s_aid_acc"], a["5w1s_aid_acc"])
	}
	var ck, ckWhole runCheckpoint
	readCk(t, filepath.Join(parts, "checkpoints", "5w1s-aid.ckpt"), &ck)
	readCk(t, filepath.Join(whole, "checkpoints", "5w1s-aid.ckpt"), &ckWhole)
	if len(ck.Train) != 6 || ck.State.Iter != 6 {
		t.Errorf("resumed checkpoint holds %d log rows at iteration %d; want 6 and 6", len(ck.Train), ck.State.Iter)
	}
	for i, v := range ckWhole.State.Params {
		if ck.State.Params[i] != v {
			t.Fatalf("parameter %d is %v after resuming, %v without interruption", i, ck.State.Params[i], v)
		}
	}

	path := filepath.Join(parts, "checkpoints", "5w1s-aid.ckpt")
	b2, _ := os.ReadFile(path)
	os.WriteFile(path, b2[:len(b2)/2], 0o644)
	_, err = run(args(parts, "-iters", "8", "-resume"))
	if err == nil || !strings.Contains(err.Error(), "5w1s-aid.ckpt") || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("resuming from a truncated checkpoint: error %v; want one naming the file as corrupt", err)
	}
}

// TestMAML runs MAML and FOMAML through the program on a small backbone:
// each trains, is evaluated and written, and its checkpoint records the
// first-order setting.
func TestMAML(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains")
	}
	out := t.TempDir()
	c, err := parse("-quiet", "-out", out, "-methods", "maml,fomaml", "-filters", "4", "-queries", "2", "-iters", "4",
		"-eval-every", "2", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false", "-maml-steps", "2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"maml", "fomaml"} {
		acc, ok := res["5w1s_"+m+"_acc"].(float64)
		if !ok || !(acc > 0 && acc <= 1) {
			t.Errorf("%s: accuracy %v", m, res["5w1s_"+m+"_acc"])
		}
		var ck runCheckpoint
		readCk(t, filepath.Join(out, "checkpoints", "5w1s-"+m+".ckpt"), &ck)
		if want := "first-order=" + map[string]string{"maml": "false", "fomaml": "true"}[m]; ck.State.Iter != 4 || !strings.Contains(ck.Key, want) {
			t.Errorf("%s: checkpoint at iteration %d with key %q; want 4 and %s", m, ck.State.Iter, ck.Key, want)
		}
	}
	if res["5w1s_maml_acc"] == res["5w1s_fomaml_acc"] && res["5w1s_maml_ci95"] == res["5w1s_fomaml_ci95"] {
		t.Error("MAML and FOMAML gave the same result")
	}
}

// TestInnerNotConverging: with an inner step far too large for the head
// (-alpha 20), AID-BiO's result says from which iteration its inner loop
// stopped converging, train_log.csv carries the ratio, and with the
// default step it says nothing.
func TestInnerNotConverging(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains")
	}
	for _, alpha := range []string{"20", "0.1"} {
		out := t.TempDir()
		c, err := parse("-quiet", "-out", out, "-methods", "aid", "-filters", "4", "-queries", "2", "-iters", "3", "-alpha", alpha,
			"-eval-every", "3", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(c); err != nil {
			t.Fatal(err)
		}
		var ck runCheckpoint
		readCk(t, filepath.Join(out, "checkpoints", "5w1s-aid.ckpt"), &ck)
		if ck.Final == nil || len(ck.Train) != 3 {
			t.Fatalf("-alpha %s: checkpoint without a result or with %d log rows", alpha, len(ck.Train))
		}
		bad := strings.Contains(ck.Final.Note, "inner loop not converging on 3 iterations from iteration 0")
		if alpha == "20" && (!bad || ck.Train[0].InnerRatio < 1) {
			t.Errorf("-alpha 20: note %q, inner ratio %v; want the inner loop reported as not converging", ck.Final.Note, ck.Train[0].InnerRatio)
		}
		if alpha == "0.1" && (strings.Contains(ck.Final.Note, "not converging") || !(ck.Train[0].InnerRatio > 0 && ck.Train[0].InnerRatio < 1)) {
			t.Errorf("-alpha 0.1: note %q, inner ratio %v; want a converging inner loop", ck.Final.Note, ck.Train[0].InnerRatio)
		}
		log, err := os.ReadFile(filepath.Join(out, "train_log.csv"))
		if err != nil || !strings.Contains(string(log), "inner_ratio,cg_residual") {
			t.Errorf("train_log.csv without inner_ratio and cg_residual: %v", err)
		}
	}
}

// TestFloat32 runs ITD-BiO with -float32 beside the same run in float64:
// the backbones agree to float32 rounding (relative 1e-5 of the largest
// parameter), the checkpoint records the precision, and a float64
// checkpoint is not resumed in float32.
func TestFloat32(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains")
	}
	out64, out32 := t.TempDir(), t.TempDir()
	args := func(out string, extra ...string) config {
		t.Helper()
		c, err := parse(append([]string{"-quiet", "-out", out, "-methods", "itd", "-filters", "4", "-queries", "2", "-iters", "4",
			"-eval-every", "2", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := run(args(out64)); err != nil {
		t.Fatal(err)
	}
	if _, err := run(args(out32, "-float32")); err != nil {
		t.Fatal(err)
	}
	var ck64, ck32 runCheckpoint
	readCk(t, filepath.Join(out64, "checkpoints", "5w1s-itd.ckpt"), &ck64)
	readCk(t, filepath.Join(out32, "checkpoints", "5w1s-itd.ckpt"), &ck32)
	if strings.Contains(ck64.Key, "float32") || !strings.HasSuffix(ck32.Key, " float32") {
		t.Errorf("checkpoint keys %q (float64) and %q (float32): want the precision in the second only", ck64.Key, ck32.Key)
	}
	scale, diff := 0.0, 0.0
	for i, v := range ck64.State.Params {
		scale = max(scale, math.Abs(v))
		diff = max(diff, math.Abs(ck32.State.Params[i]-v))
	}
	t.Logf("float32 against float64 backbone after 4 iterations: %.2g relative", diff/scale)
	if diff > 1e-5*scale || diff == 0 {
		t.Errorf("float32 backbone differs from float64 by %g (largest parameter %g); want within 1e-5 relative, and not equal", diff, scale)
	}
	if _, err := run(args(out64, "-float32", "-resume")); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("resuming a float64 checkpoint with -float32: error %v; want one saying it was made with other settings", err)
	}
}

func readCk(t *testing.T, path string, v *runCheckpoint) {
	t.Helper()
	if err := meta.ReadCheckpoint(path, v); err != nil {
		t.Fatal(err)
	}
}

// parse parses a command line into a fresh flag set.
func parse(args ...string) (config, error) {
	fs := flag.NewFlagSet("metalearn", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args)
}

// TestFlags: the modes, -h, and bad values refused before any work with a
// message naming the flag; among them the reproductions of issue 17
// (-max-seconds NaN and -growth NaN ran the whole job, -workers -3 and
// 100000, now -threads, and a repeated method were accepted).
func TestFlags(t *testing.T) {
	c, err := parse("-mode", "full", "-iters", "7", "-data", "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if c.Filters != 32 || c.Queries != 15 || len(c.Shots) != 2 || c.Batch != 32 || c.Iters != 7 || c.Data != "embedded" {
		t.Errorf("-mode full gave %+v; want the full sizes with -iters 7 and -data kept", c)
	}
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-mode", "slow"}, Want: "-mode"},
		{Args: []string{"-methods", "reptile"}, Want: "-methods"},
		{Args: []string{"-methods", "maml,fomaml,maml"}, Want: "-methods"},
		{Args: []string{"-maml-steps", "0"}, Want: "-maml-steps 0"},
		{Args: []string{"-maml-alpha", "-0.5"}, Want: "-maml-alpha"},
		{Args: []string{"-maml-alpha", "NaN"}, Want: "-maml-alpha"},
		{Args: []string{"-batch", "0"}, Want: "-batch 0"},
		{Args: []string{"-shots", "0"}, Want: "-shots"},
		{Args: []string{"-backprop", "both"}, Want: "-backprop"},
		{Args: []string{"-ways", "1"}, Want: "-ways 1"},
		{Args: []string{"-max-seconds", "NaN"}, Want: "-max-seconds NaN"},
		{Args: []string{"-growth", "NaN"}, Want: "-growth NaN"},
		{Args: []string{"-threads", "-3"}, Want: "-threads -3"},
		{Args: []string{"-threads", "100000"}, Want: "-threads 100000"},
		{Args: []string{"-workers", "-1"}, Want: "-workers -1"},
		{Args: []string{"-nats", "http://x:1", "-workers", "2"}, Want: "-nats"},
		{Args: []string{"-nats", "nats://127.0.0.1:4222"}, Want: "-workers 0"},
		{Args: []string{"-methods", "itd,itd"}, Want: "-methods"},
		{Args: []string{"-lr", "0"}, Want: "-lr 0"},
		{Args: []string{"-alpha", "Inf"}, Want: "-alpha"},
		{Args: []string{"-iters", "-1"}, Want: "-iters -1"}, {Args: []string{"-iters", "0"}, Want: "-iters 0"},
		{Args: []string{"-pretrain-steps", "0"}, Want: "-pretrain-steps 0"},
		{Args: []string{"-eval-tasks", "1"}, Want: "-eval-tasks 1"},
	})
	// -h documents every flag.
	var help strings.Builder
	fs := flag.NewFlagSet("metalearn", flag.ContinueOnError)
	fs.SetOutput(&help)
	if _, err := parseFlags(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: error %v", err)
	}
	for _, name := range []string{"mode", "data", "seed", "out", "methods", "shots", "resume", "checkpoint-every", "backprop", "eval-tasks",
		"maml-steps", "maml-alpha", "batch", "threads", "workers", "nats"} {
		if !strings.Contains(help.String(), "-"+name) {
			t.Errorf("-h does not document -%s", name)
		}
	}
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}

// TestMedianCI checks the median's interval against the binomial order
// statistics worked by hand: with 10 values, the 2nd and 9th (coverage
// 1 − 2·11/1024); with 5, the range (1 − 2/32); with 1, the value; and
// the largest drop of a curve below its best earlier point.
func TestMedianCI(t *testing.T) {
	for _, c := range []struct {
		v              []float64
		med, lo, hi, p float64
	}{
		{[]float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, 5.5, 2, 9, 1 - 22.0/1024},
		{[]float64{3, 1, 2, 5, 4}, 3, 1, 5, 1 - 2.0/32},
		{[]float64{0.5}, 0.5, 0.5, 0.5, 0},
	} {
		m := medianCI(c.v)
		if m.Median != c.med || m.Lo != c.lo || m.Hi != c.hi || math.Abs(m.Coverage-c.p) > 1e-12 {
			t.Errorf("medianCI(%v) = %+v; want median %v in [%v, %v], coverage %v", c.v, m, c.med, c.lo, c.hi, c.p)
		}
	}
	if d := largestDrop([]float64{0.2, 0.5, 0.4, 0.6, 0.3, 0.55}); math.Abs(d-0.3) > 1e-15 {
		t.Errorf("largestDrop = %v; want 0.3", d)
	}
}

// TestSeeds runs two seeds of a small experiment and checks the summary:
// one run per seed in its own folder (the same as a run with -seed), the
// median over the seeds and the paired differences written.
func TestSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("meta-trains")
	}
	out := t.TempDir()
	args := []string{"-quiet", "-methods", "aid,anil", "-filters", "4", "-queries", "2", "-iters", "2", "-eval-every", "1",
		"-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false"}
	c, err := parse(append(args, "-out", out, "-seeds", "3,4")...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(c)
	if err != nil {
		t.Fatal(err)
	}
	c4, err := parse(append(args, "-out", t.TempDir(), "-seed", "4")...)
	if err != nil {
		t.Fatal(err)
	}
	one, err := run(c4)
	if err != nil {
		t.Fatal(err)
	}
	var ck runCheckpoint
	readCk(t, filepath.Join(out, "seed-4", "checkpoints", "5w1s-aid.ckpt"), &ck)
	if ck.Final == nil || round(ck.Final.Accuracy, 4) != one["5w1s_aid_acc"] {
		t.Errorf("seed 4 of -seeds 3,4 ended at %+v; a run with -seed 4 at %v", ck.Final, one["5w1s_aid_acc"])
	}
	if res["seeds"] != 2 {
		t.Errorf("result line %v: want seeds=2", res)
	}
	for _, m := range []string{"aid", "anil"} {
		med, lo, hi := res["5w1s_"+m+"_median"], res["5w1s_"+m+"_lo"], res["5w1s_"+m+"_hi"]
		if med == nil || !(lo.(float64) <= med.(float64) && med.(float64) <= hi.(float64)) {
			t.Errorf("%s: median %v in [%v, %v]", m, med, lo, hi)
		}
	}
	for _, f := range []string{"seeds.csv", "pairs.csv", "seeds.json", "seeds_test_accuracy_5w1s.png", "seed-3/results.csv"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
	pairs, _ := os.ReadFile(filepath.Join(out, "pairs.csv"))
	if !strings.Contains(string(pairs), "5w1s,aid,anil,2,") {
		t.Errorf("pairs.csv has no aid–anil row over 2 seeds:\n%s", pairs)
	}
}
