package dist

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/optim"
)

// faultParams is the problem of the fault tests: small, so that a run of a
// solver takes a fraction of a second, with every oracle on minibatches.
var faultParams = testParams{N: 200, NVal: 80, D: 6, C: 3, Seed: 11, Bias: true}

func faultSettings(shards, replicas, workers int) Settings {
	return Settings{Model: "logistic", Params: faultParams.bytes(), NumLower: faultParams.N, NumUpper: faultParams.NVal,
		Shards: shards, Replicas: replicas, Workers: workers, ProbeInterval: 50 * time.Millisecond}
}

// aid is AID-BiO on minibatches: GradG, GradF, linearized HVPs (CG) and
// MixedXY on batches drawn from the run's random stream.
var aid = optim.AIDBiO{Alpha: 0.5, D: 4, N: 5, InnerBatch: 50, HessianBatch: 70, UpperBatch: 40, Outer: optim.SGD{LR: 0.5}}

// stoc is stocBiO on minibatches (Neumann HVPs, fresh batch each).
var stoc = optim.StocBiO{Alpha: 0.5, D: 3, Eta: 0.5, Q: 4, InnerBatch: 40, HessianBatch: 40, MixedBatch: 60, UpperBatch: 30, Outer: optim.SGD{LR: 0.5}}

// onIter is a Recorder calling f after each iteration.
type onIter func(k int)

func (f onIter) Record(r *optim.Record) error {
	f(r.Iter)
	return nil
}

// run solves p from its starting point for iters iterations.
func run(t *testing.T, p *Problem, m optim.Method, iters int, rec optim.Recorder) (*optim.Result, error) {
	t.Helper()
	return optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: iters, Seed: 5, EvalEvery: 2, Recorder: rec}, m)
}

func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s[%d] = %v, the uninterrupted run has %v: not bit-identical", what, i, got[i], want[i])
		}
	}
}

// TestWorkerKilled kills a worker with SIGKILL in the middle of a call,
// during a run of AID-BiO, and checks that the run ends with the same bits
// as an uninterrupted one: the call goes to a replica of the shard, to a
// spare worker, or waits for the killed worker to be restarted.
func TestWorkerKilled(t *testing.T) {
	const iters, killAt = 6, 2
	for _, tc := range []struct {
		name                      string
		shards, replicas, workers int
		restart                   bool
	}{
		{"replica", 2, 2, 4, false},
		{"spare", 2, 1, 3, false},
		{"restarted", 2, 1, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			die := filepath.Join(t.TempDir(), "die")
			c := newCluster(t, tc.workers, envDieFile+"="+die)
			s := faultSettings(tc.shards, tc.replicas, tc.workers)
			s.Log = func(format string, args ...any) {
				t.Logf(format, args...)
				if tc.restart && strings.Contains(format, "is lost") {
					if i := slices.Index(c.ws.Names(), args[0].(string)); i >= 0 {
						if err := c.ws.Restart(i); err != nil {
							t.Error(err)
						}
					}
				}
			}
			p := c.problem(t, s)
			want, err := run(t, p, aid, iters, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := run(t, p, aid, iters, onIter(func(k int) {
				if k == killAt {
					if err := os.WriteFile(die, nil, 0o644); err != nil {
						t.Error(err)
					}
				}
			}))
			if err != nil {
				t.Fatalf("%v (%v)", err, p.Err())
			}
			if _, err := os.Stat(die); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("no worker was killed")
			}
			st := p.Stats()
			if st.Lost != 1 || st.Retries < 1 {
				t.Errorf("Stats: %d workers lost, %d retries; want 1 and at least 1", st.Lost, st.Retries)
			}
			sameBits(t, "x", got.X, want.X)
			sameBits(t, "y", got.Y, want.Y)
			t.Logf("bit-identical after a worker was killed in iteration %d of %d: %d lost, %d retries, %d joined", killAt+1, iters, st.Lost, st.Retries, st.Joined)
		})
	}
}

// TestWorkerStaysAway checks that a shard whose only worker is killed and
// never comes back stops the run with an error naming the shard and the
// worker, after Settings.JoinTimeout, rather than hanging.
func TestWorkerStaysAway(t *testing.T) {
	die := filepath.Join(t.TempDir(), "die")
	c := newCluster(t, 2, envDieFile+"="+die)
	s := faultSettings(2, 1, 2)
	p := c.problem(t, s)
	p.s.JoinTimeout = 500 * time.Millisecond // New had the default wait; the lost shard gets this one
	start := time.Now()
	_, err := run(t, p, aid, 6, onIter(func(k int) {
		if k == 1 {
			_ = os.WriteFile(die, nil, 0o644)
		}
	}))
	var nf *optim.NonFiniteError
	if !errors.As(err, &nf) {
		t.Fatalf("Solve: %v; want a NonFiniteError", err)
	}
	perr := p.Err()
	if perr == nil {
		t.Fatal("Err is nil after the run failed")
	}
	// The solver's error carries the distributed cause: the iteration and
	// the oracle from optim, the shard and the worker from dist.
	var ce *CallError
	if !errors.As(err, &ce) || ce != perr || nf.Oracle == "" || nf.Iter < 1 || !strings.Contains(err.Error(), ce.Error()) {
		t.Errorf("Solve: %v; want a NonFiniteError naming the iteration and oracle that wraps Err = %v", err, perr)
	}
	msg := perr.Error()
	named := slices.ContainsFunc(c.ws.Names(), func(n string) bool { return strings.Contains(msg, "worker "+n+" was lost") })
	if !named || !strings.Contains(msg, "has no worker") || !strings.Contains(msg, "JoinTimeout") {
		t.Errorf("Err = %q; want it to name the shard, the lost worker and JoinTimeout", msg)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %v to fail", d)
	}
	x := make([]float64, p.DimX())
	p.GradF(x, nil, p.X0(nil), p.Y0(nil), nil)
	if !math.IsNaN(x[0]) {
		t.Errorf("an oracle after the failure gave %v, want NaN", x[0])
	}
	t.Logf("Solve: %v\nErr: %v", err, perr)
}

// The resume test's coordinator process.
const (
	envCheckpoint = "DIST_TEST_CHECKPOINT"
	envBlocked    = "DIST_TEST_BLOCKED" // written when the coordinator waits to be killed
	resumeIters   = 7
	resumeKillAt  = 3
)

// runCoordinator runs stocBiO with a checkpoint after every iteration and
// blocks in the recorder of iteration resumeKillAt until it is killed.
func runCoordinator() error {
	nc, err := Dial(EndpointFromEnv())
	if err != nil {
		return err
	}
	s := faultSettings(2, 1, 2)
	s.Pool = os.Getenv(EnvPool)
	p, err := New(nc, s)
	if err != nil {
		return err
	}
	_, err = optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: resumeIters, Seed: 5, EvalEvery: 2,
		Checkpoint: optim.CheckpointSettings{Path: os.Getenv(envCheckpoint), Every: 1},
		Recorder: onIter(func(k int) {
			if k == resumeKillAt {
				_ = os.WriteFile(os.Getenv(envBlocked), nil, 0o644)
				time.Sleep(time.Hour)
			}
		})}, stoc)
	return fmt.Errorf("the coordinator was not killed: %v", err)
}

// TestCoordinatorResume kills a coordinator process with SIGKILL in the
// middle of a run of stocBiO, resumes from its checkpoint with a new
// coordinator on the same workers, and checks that the run ends with the
// bits of an uninterrupted run.
func TestCoordinatorResume(t *testing.T) {
	c := newCluster(t, 2)
	p := c.problem(t, faultSettings(2, 1, 2))
	want, err := run(t, p, stoc, resumeIters, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()

	dir := t.TempDir()
	ckpt, blocked := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "blocked")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), c.srv.Endpoint().env()...)
	cmd.Env = append(cmd.Env, envCoordinator+"=1", EnvPool+"="+c.pool, envCheckpoint+"="+ckpt, envBlocked+"="+blocked)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("the coordinator exited before it was killed: %v", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the coordinator did not reach iteration 3 within 60 s")
		case <-time.After(20 * time.Millisecond):
			_, err := os.Stat(blocked)
			ready = err == nil
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited

	st, err := optim.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if st.Iter != resumeKillAt {
		t.Fatalf("the checkpoint holds iteration %d, want %d", st.Iter, resumeKillAt)
	}
	q := c.problem(t, faultSettings(2, 1, 2))
	got, err := optim.Resume(q, st, &optim.Settings{MaxIter: resumeIters, EvalEvery: 2}, stoc)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "x", got.X, want.X)
	sameBits(t, "y", got.Y, want.Y)
	t.Logf("resumed at iteration %d of %d after the coordinator was killed: bit-identical", resumeKillAt, resumeIters)
}
