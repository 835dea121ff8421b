package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	c, err := parseFlags([]string{"-quiet", "-out", out, "-methods", "itd", "-iters", "60", "-eval-every", "30",
		"-eval-tasks", "200", "-curve-tasks", "50", "-pretrain-steps", "20", "-pretrain-batch", "32"})
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
		c, err := parseFlags(append([]string{"-quiet", "-out", out, "-methods", "aid", "-filters", "4", "-queries", "2",
			"-eval-every", "2", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false", "-checkpoint-every", "2"}, extra...))
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

func readCk(t *testing.T, path string, v *runCheckpoint) {
	t.Helper()
	if err := meta.ReadCheckpoint(path, v); err != nil {
		t.Fatal(err)
	}
}

func TestFlags(t *testing.T) {
	c, err := parseFlags([]string{"-mode", "full", "-iters", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Filters != 32 || c.Queries != 15 || len(c.Shots) != 2 || c.Iters != 7 || c.Data == "embedded" {
		t.Errorf("-mode full gave %+v; want the full sizes with -iters 7 kept", c)
	}
	for _, bad := range [][]string{{"-mode", "slow"}, {"-methods", "maml"}, {"-shots", "0"}, {"-backprop", "both"}, {"-ways", "1"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	// -h documents every flag.
	old := os.Stderr
	r, w, _ := os.Pipe()
	os.Stderr = w
	_, err = parseFlags([]string{"-h"})
	w.Close()
	os.Stderr = old
	help, _ := io.ReadAll(r)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: error %v", err)
	}
	for _, name := range []string{"mode", "data", "seed", "out", "methods", "shots", "resume", "checkpoint-every", "backprop", "eval-tasks"} {
		if !strings.Contains(string(help), "-"+name) {
			t.Errorf("-h does not document -%s", name)
		}
	}
}
