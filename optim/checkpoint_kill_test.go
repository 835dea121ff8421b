package optim_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// killEnv names the folder in which TestCheckpointKillChild, run as a child
// process by TestCheckpointSIGKILL, writes its checkpoint and CSV.
const killEnv = "BILEVEL_CHECKPOINT_KILL_DIR"

// killRun is the run the SIGKILL test interrupts: stocBiO with Adam and
// shuffled epochs on a compiled stochastic quadratic (200 lower and 100
// upper samples), so that every part of the State — iterates, v, optimizer
// moments, sampler epochs, random stream, cached step sizes, counters —
// matters for the result.
func killRun(t testing.TB) (oracle.Problem, []float64, []float64, optim.Settings, optim.Method) {
	t.Helper()
	q, err := models.Quadratic(models.QuadraticSettings{DimX: 4, DimY: 6, Cond: 5, Rho: 0.1,
		LowerSamples: 200, UpperSamples: 100, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Compile()
	if err != nil {
		t.Fatal(err)
	}
	m := optim.StocBiO{D: 3, Q: 4, InnerBatch: 16, HessianBatch: 16, MixedBatch: 16, UpperBatch: 16,
		Outer: optim.Adam{LR: 0.05}}
	s := optim.Settings{MaxIter: 60, Seed: 11, Sampling: optim.Shuffled, EvalEvery: 3}
	return p, p.X0(nil), p.Y0(nil), s, m
}

// TestCheckpointKillChild is the child process of TestCheckpointSIGKILL:
// it runs killRun with a checkpoint every 8 iterations, a CSV recorder, and
// a 15 ms pause per monitored iteration (through Settings.Metrics) so that
// the parent has time to kill it in the middle. Run directly, it skips.
func TestCheckpointKillChild(t *testing.T) {
	dir := os.Getenv(killEnv)
	if dir == "" {
		t.Skip("the child process of TestCheckpointSIGKILL")
	}
	p, x0, y0, s, m := killRun(t)
	f, err := os.Create(filepath.Join(dir, "run.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// Rows reach the file at once, so that the killed run leaves rows
	// after its last checkpoint, which the resumed run must drop.
	s.Recorder = flushingRecorder{optim.NewCSVRecorder(f)}
	s.Checkpoint = optim.CheckpointSettings{Path: filepath.Join(dir, "run.ckpt"), Every: 8}
	s.Metrics = func(x, y []float64) map[string]float64 {
		time.Sleep(15 * time.Millisecond)
		return nil
	}
	if _, err := optim.Solve(p, x0, y0, &s, m); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the run finished: the parent did not kill it")
}

// flushingRecorder flushes its CSVRecorder after every row; it keeps the
// recorder's MarshalBinary, UnmarshalBinary and Flush.
type flushingRecorder struct{ *optim.CSVRecorder }

func (r flushingRecorder) Record(rec *optim.Record) error {
	if err := r.CSVRecorder.Record(rec); err != nil {
		return err
	}
	return r.Flush()
}

// TestCheckpointSIGKILL runs a real solver in a child process (this test
// binary again), kills it with SIGKILL once its checkpoint has reached
// iteration 24 and its CSV file holds rows after the checkpoint — while it
// watches that every read of the checkpoint file
// during the run gives a complete checkpoint — resumes from the
// checkpoint, and checks that the final x, y, v and oracle counts equal,
// bit for bit, those of an uninterrupted run in this process, and that the
// continued CSV file equals the uninterrupted run's (times aside).
func TestCheckpointSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	ckpt, csvPath := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "run.csv")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killEnv+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	seen := map[int]bool{}
	deadline := time.After(60 * time.Second)
poll:
	for {
		select {
		case err := <-done:
			t.Fatalf("the child ended before it was killed (%v):\n%s", err, out.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no checkpoint of iteration 24 within 60 s; checkpoints seen: %v\n%s", seen, out.String())
		case <-time.After(2 * time.Millisecond):
		}
		st, err := optim.LoadCheckpoint(ckpt)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			cmd.Process.Kill()
			t.Fatalf("reading the checkpoint during the run: %v", err)
		}
		seen[st.Iter] = true
		// Kill when the CSV holds rows beyond the checkpoint: the header,
		// st.Iter rows, and 3 more.
		if b, err := os.ReadFile(csvPath); err == nil && st.Iter >= 24 && bytes.Count(b, []byte("\n")) >= st.Iter+4 {
			break poll
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child ended with %v, want killed by a signal:\n%s", err, out.String())
	}

	st, err := optim.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	p, x0, y0, s, m := killRun(t)
	if st.Iter >= s.MaxIter {
		t.Fatalf("the checkpoint holds iteration %d of %d: the child was not killed mid-run", st.Iter, s.MaxIter)
	}
	rows, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(rows, []byte("\n"))
	t.Logf("killed with the checkpoint at iteration %d and %d CSV lines written; checkpoints seen while polling: %v",
		st.Iter, lines, seen)
	if lines <= st.Iter+1 {
		t.Errorf("the killed run left %d CSV lines, no row beyond its checkpoint of iteration %d: the test does not check that they are dropped", lines, st.Iter)
	}

	// The uninterrupted run, in this process.
	var want bytes.Buffer
	full := s
	full.Recorder = optim.NewCSVRecorder(&want)
	ref, err := optim.Solve(p, x0, y0, &full, m)
	if err != nil {
		t.Fatal(err)
	}

	// The resumed run continues the child's CSV file.
	f, err := os.OpenFile(csvPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rest := s
	rest.Recorder = optim.NewCSVRecorder(f)
	rest.Checkpoint = optim.CheckpointSettings{Path: ckpt, Every: 8}
	got, err := optim.Resume(p, st, &rest, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Iter != s.MaxIter || got.Calls != ref.Calls {
		t.Errorf("resumed run: %d iterations, calls %+v; uninterrupted: %d, %+v", got.Iter, got.Calls, ref.Iter, ref.Calls)
	}
	for _, v := range []struct {
		name      string
		got, want []float64
	}{{"x", got.X, ref.X}, {"y", got.Y, ref.Y}, {"v", got.State.V, ref.State.V}} {
		if len(v.got) != len(v.want) {
			t.Fatalf("%s has length %d, want %d", v.name, len(v.got), len(v.want))
		}
		for i := range v.got {
			if math.Float64bits(v.got[i]) != math.Float64bits(v.want[i]) {
				t.Errorf("%s[%d] = %v (bits %x) after kill and resume, %v (bits %x) uninterrupted",
					v.name, i, v.got[i], math.Float64bits(v.got[i]), v.want[i], math.Float64bits(v.want[i]))
			}
		}
	}
	csvGot, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := csvWithoutTimes(t, csvGot), csvWithoutTimes(t, want.Bytes()); a != b {
		t.Errorf("the continued CSV differs from the uninterrupted run's:\n%s\nwant\n%s", a, b)
	}
}

// csvWithoutTimes returns the CSV with its time_s column blanked.
func csvWithoutTimes(t *testing.T, b []byte) string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	var out strings.Builder
	for _, r := range rows {
		r[1] = ""
		out.WriteString(strings.Join(r, ",") + "\n")
	}
	return out.String()
}
