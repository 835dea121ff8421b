package dist

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
)

// metaCNN is the tiny backbone of package meta's tests: 8×8 images, two
// blocks of three filters.
var metaCNN = models.CNNSettings{Side: 8, Blocks: 2, Filters: 3, Seed: 4}

// metaTasks returns n 3-way 1-shot tasks with 2 queries per class whose
// pixels are uniforms of stream seed.
func metaTasks(n int, seed uint64) []*data.Task {
	r := rand.New(rand.NewPCG(seed, 7))
	const ways, shots, queries, d = 3, 1, 2, 64
	var ts []*data.Task
	for range n {
		t := &data.Task{Ways: ways, Shots: shots, Queries: queries, D: d, Classes: []int{0, 1, 2}}
		for c := range ways {
			for range shots {
				t.SupportY = append(t.SupportY, c)
			}
			for range queries {
				t.QueryY = append(t.QueryY, c)
			}
		}
		for range len(t.SupportY) * d {
			t.SupportX = append(t.SupportX, r.Float64())
		}
		for range len(t.QueryY) * d {
			t.QueryX = append(t.QueryX, r.Float64())
		}
		ts = append(ts, t)
	}
	return ts
}

// metaMethods are the four meta-gradients at the tiny scale.
var metaMethods = []meta.Settings{
	{Gradient: meta.ITD, Steps: 3, Alpha: 0.3, TaskBatch: 3},
	{Gradient: meta.AID, Steps: 3, Alpha: 0.3, CGSteps: 4, TaskBatch: 3},
	{Gradient: meta.ANIL, Steps: 2, Alpha: 0.3, TaskBatch: 3},
	{Gradient: meta.MAML, Steps: 2, Alpha: 0.3, TaskBatch: 3},
}

// metaRun runs steps meta-iterations of a learner of s on batches of 3
// tasks and returns its stats and snapshot, or the first error.
func metaRun(t *testing.T, s meta.Settings, steps int, before func(k int)) ([]meta.StepStats, meta.Snapshot, error) {
	t.Helper()
	l, err := meta.NewLearner(s, metaCNN, 3)
	if err != nil {
		t.Fatal(err)
	}
	var sts []meta.StepStats
	for k := range steps {
		if before != nil {
			before(k)
		}
		st, err := l.Step(metaTasks(3, uint64(k)))
		if err != nil {
			return sts, l.Snapshot(), err
		}
		st.Seconds = 0
		sts = append(sts, st)
	}
	return sts, l.Snapshot(), nil
}

// metaRunner starts a MetaTasks of s, cnn and ways on c with the settings
// ds; t.Cleanup closes it.
func metaRunner(t testing.TB, c *cluster, s meta.Settings, cnn models.CNNSettings, ways int, ds Settings) *MetaTasks {
	t.Helper()
	ds.Pool = c.pool
	if ds.JoinTimeout == 0 {
		ds.JoinTimeout = 30 * time.Second
	}
	m, err := NewMetaTasks(c.nc, s, cnn, ways, ds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func sameSnapshot(t *testing.T, got, want meta.Snapshot) {
	t.Helper()
	if got.Iter != want.Iter || got.Opt.T != want.Opt.T {
		t.Fatalf("iteration %d (Adam step %d), in process %d (%d)", got.Iter, got.Opt.T, want.Iter, want.Opt.T)
	}
	sameBits(t, "Params", got.Params, want.Params)
	sameBits(t, "Adam's M", got.Opt.M, want.Opt.M)
	sameBits(t, "Adam's S", got.Opt.S, want.Opt.S)
}

// TestMetaTasks runs three meta-iterations of ITD-BiO, AID-BiO, ANIL and
// MAML with the tasks on 2 worker processes and checks that the stats,
// the state and the checkpoint file equal those of in-process workers, bit
// for bit.
func TestMetaTasks(t *testing.T) {
	const steps = 3
	c := newCluster(t, 2)
	for _, s := range metaMethods {
		t.Run(s.Gradient.String(), func(t *testing.T) {
			s.Workers = 2
			wantSt, want, err := metaRun(t, s, steps, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := metaRunner(t, c, s, metaCNN, 3, Settings{Workers: 2})
			s.Runner = m
			gotSt, got, err := metaRun(t, s, steps, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotSt, wantSt) {
				t.Errorf("step stats on workers %+v, in process %+v", gotSt, wantSt)
			}
			sameSnapshot(t, got, want)
			dir := t.TempDir()
			files := [2]string{filepath.Join(dir, "workers.json"), filepath.Join(dir, "process.json")}
			for i, st := range []meta.Snapshot{got, want} {
				if err := meta.WriteCheckpoint(files[i], st); err != nil {
					t.Fatal(err)
				}
			}
			a, _ := os.ReadFile(files[0])
			b, _ := os.ReadFile(files[1])
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("checkpoints after %d steps differ: %d and %d bytes", steps, len(a), len(b))
			}
			ms := m.Stats()
			if ms.MessagesSent < steps*3 {
				t.Errorf("%d messages sent for %d tasks", ms.MessagesSent, steps*3)
			}
			t.Logf("%v: %d steps bit-identical; %d bytes sent, %d received", s.Gradient, steps, ms.BytesSent, ms.BytesReceived)
		})
	}
}

// TestMetaWorkerKilled kills a worker with SIGKILL as it receives a task.
// With a spare worker, the task is computed again by the spare and the run
// keeps the in-process bits; without one, the step fails after
// JoinTimeout with a *CallError naming the task and the lost worker.
func TestMetaWorkerKilled(t *testing.T) {
	s := metaMethods[0]
	s.Workers = 2
	_, want, err := metaRun(t, s, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		workers int
	}{{"spare", 3}, {"none", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			die := filepath.Join(t.TempDir(), "die")
			c := newCluster(t, tc.workers, envDieFile+"="+die)
			m := metaRunner(t, c, s, metaCNN, 3, Settings{Shards: 2, Workers: tc.workers, ProbeInterval: 50 * time.Millisecond, JoinTimeout: 2 * time.Second})
			m.p.s.JoinTimeout = 500 * time.Millisecond // New had 2 s to find its workers; a lost shard gets this
			rs := s
			rs.Runner = m
			_, got, err := metaRun(t, rs, 3, func(k int) {
				if k == 1 {
					if err := os.WriteFile(die, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			})
			lost := ""
			for i, n := range c.ws.Names() {
				if !c.ws.Running(i) {
					lost = n
				}
			}
			if lost == "" {
				t.Fatal("no worker was killed")
			}
			if tc.workers == 3 {
				if err != nil {
					t.Fatal(err)
				}
				if st := m.Stats(); st.Lost != 1 || st.Retries < 1 {
					t.Errorf("Stats: %d workers lost, %d retries; want 1 and at least 1", st.Lost, st.Retries)
				}
				sameSnapshot(t, got, want)
				return
			}
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *CallError", err, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "meta-learning task") || !strings.Contains(msg, lost) || !strings.Contains(msg, "iteration 1") {
				t.Errorf("error %q names neither the task, the iteration 1 nor the lost worker %s", msg, lost)
			}
			if got.Iter != 1 {
				t.Errorf("the failed step left the learner at iteration %d, want 1", got.Iter)
			}
			t.Log(err)
		})
	}
}

// TestMetaMalformed sends a meta shard calls with malformed tasks and
// parameters: each is an error, never a panic.
func TestMetaMalformed(t *testing.T) {
	s := metaMethods[0]
	p, err := json.Marshal(metaParams{Settings: s, CNN: metaCNN, Ways: 3})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := newMetaShard(p, shardSpec{count: 1})
	if err != nil {
		t.Fatal(err)
	}
	task := metaTasks(1, 1)[0]
	l, _ := meta.NewLearner(s, metaCNN, 3)
	params := l.Snapshot().Params
	good := encodeMetaTask(nil, task)
	bad := func(edit func(t *data.Task)) []byte {
		c := *task
		c.SupportY = slices.Clone(task.SupportY)
		edit(&c)
		return encodeMetaTask(nil, &c)
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		x     []float64
		steps uint64
	}{
		{"truncated", good[:len(good)-3], params, 3},
		{"trailing", append(slices.Clone(good), 0), params, 3},
		{"label", bad(func(t *data.Task) { t.SupportY[0] = 3 }), params, 3},
		{"pixels", bad(func(t *data.Task) { t.D = 63 }), params, 3},
		{"ways", bad(func(t *data.Task) { t.Ways = 4 }), params, 3},
		{"params", good, params[1:], 3},
		{"steps", good, params, 1 << 40},
		{"empty", nil, params, 3},
	} {
		res, code, err := sh.call(&callBody{op: opMeta, arg: tc.steps, x: tc.x, data: tc.data})
		if err == nil || code != codeFailed || res != nil {
			t.Errorf("%s: result %v, code %d, error %v; want an error", tc.name, res, code, err)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}
	if _, _, err := sh.call(&callBody{op: opGradF, flags: flagDX}); err == nil {
		t.Error("GradF on a meta shard: no error")
	}
	if _, err := newMetaShard([]byte("{"), shardSpec{count: 1}); err == nil {
		t.Error("malformed parameters: no error")
	}
	res, _, err := sh.call(&callBody{op: opMeta, arg: 3, x: params, data: good})
	if err != nil || len(res.a) != len(params) || len(res.b) != 4 {
		t.Fatalf("a good call: %v, %d gradient entries for %d parameters, %d statistics (want accuracy, loss, inner ratio, CG residual)", err, len(res.a), len(params), len(res.b))
	}
}

// FuzzMetaTask checks that decodeMetaTask never panics and that what it
// accepts encodes back to the same bytes.
func FuzzMetaTask(f *testing.F) {
	for _, t := range metaTasks(2, 3) {
		b := encodeMetaTask(nil, t)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := decodeMetaTask(b)
		if err != nil {
			return
		}
		if again := encodeMetaTask(nil, task); !bytes.Equal(again, b) {
			t.Fatalf("decoded and encoded again: %d bytes, not the %d read", len(again), len(b))
		}
	})
}
