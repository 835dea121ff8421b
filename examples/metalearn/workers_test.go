package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gobilevel/bilevel/dist"
)

// TestMain serves as a worker when a test starts this binary as one.
func TestMain(m *testing.M) {
	dist.ServeIfWorker()
	m.Run()
}

// TestWorkers meta-trains ITD-BiO 2 iterations with the tasks on 2 worker
// processes (-workers 2), resumes from that checkpoint in process to 4,
// and checks that the parameters and the meta-test accuracy are those of 4
// iterations in process, bit for bit.
func TestWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes and meta-trains")
	}
	args := func(out string, extra ...string) config {
		t.Helper()
		c, err := parse(append([]string{"-quiet", "-out", out, "-methods", "itd", "-steps", "5", "-filters", "4", "-queries", "2",
			"-eval-every", "2", "-eval-tasks", "10", "-curve-tasks", "4", "-baselines=false"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	inproc, mixed := t.TempDir(), t.TempDir()
	a, err := run(args(inproc, "-iters", "4"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(args(mixed, "-iters", "2", "-workers", "2")); err != nil {
		t.Fatal(err)
	}
	b, err := run(args(mixed, "-iters", "4", "-resume"))
	if err != nil {
		t.Fatal(err)
	}
	if a["5w1s_itd_acc"] != b["5w1s_itd_acc"] {
		t.Errorf("meta-test accuracy %v after 2 iterations on workers and 2 in process, %v after 4 in process", b["5w1s_itd_acc"], a["5w1s_itd_acc"])
	}
	var ck, want runCheckpoint
	readCk(t, filepath.Join(mixed, "checkpoints", "5w1s-itd.ckpt"), &ck)
	readCk(t, filepath.Join(inproc, "checkpoints", "5w1s-itd.ckpt"), &want)
	if ck.State.Iter != 4 || len(ck.State.Params) != len(want.State.Params) {
		t.Fatalf("checkpoint at iteration %d with %d parameters; want 4 and %d", ck.State.Iter, len(ck.State.Params), len(want.State.Params))
	}
	for i, v := range want.State.Params {
		if math.Float64bits(ck.State.Params[i]) != math.Float64bits(v) {
			t.Fatalf("parameter %d is %v after iterations on workers, %v in process", i, ck.State.Params[i], v)
		}
	}
}
