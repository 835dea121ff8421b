package dist

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/bench"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
	"github.com/nats-io/nats.go"
)

func init() {
	// bench-large: bench.Large (20000×784, 10 classes, 1000 validation
	// samples), the large logistic problem of docs/benchmarks.md.
	Register("bench-large", func(_ []byte, sh Shard) (graph.Objective, error) {
		s, a := bench.Large, bench.Large.Arrays()
		rows := func(x []float64, labels []int, r Range) models.Data {
			return models.Data{X: slices.Clone(x[r.Start*s.D : r.End*s.D]), N: r.Len(), D: s.D, Labels: slices.Clone(labels[r.Start:r.End])}
		}
		m, err := models.LogisticRegression(rows(a.X, a.Labels, sh.Lower), rows(a.XVal, a.LabelsVal, sh.Upper), s.C, models.LogisticSettings{})
		a = bench.Arrays{}
		debug.FreeOSMemory() // the other shards' rows
		if err != nil {
			return graph.Objective{}, err
		}
		return m.Objective, nil
	})
}

// oracles is what BenchmarkOverhead times, on a problem in process or on
// workers.
type oracles interface {
	oracle.Implicit
	GradG(dx, dy, x, y []float64, batch []int)
}

// overheadConfigs are BenchmarkOverhead's problems: the one in this
// process and those on workers.
var overheadConfigs struct {
	in   *bench.Instance
	srv  *Server
	nc   *nats.Conn
	made map[string]*Problem
}

// overheadConfig returns the workers' problem of a configuration, wN[tT]
// for N workers with GOMAXPROCS T (their own without t), making it at
// first use.
func overheadConfig(b *testing.B, name string) *Problem {
	cf := &overheadConfigs
	if p, ok := cf.made[name]; ok {
		return p
	}
	if cf.made == nil {
		in, err := bench.NewInstance(bench.Large, false)
		if err != nil {
			b.Fatal(err)
		}
		srv, err := StartServer(ServerSettings{})
		if err != nil {
			b.Fatal(err)
		}
		nc, err := srv.Dial()
		if err != nil {
			b.Fatal(err)
		}
		cf.in, cf.srv, cf.nc, cf.made = in, srv, nc, map[string]*Problem{}
	}
	var workers, threads int
	if _, err := fmt.Sscanf(name, "w%dt%d", &workers, &threads); err != nil && workers == 0 {
		b.Fatalf("configuration %q", name)
	}
	if _, err := StartWorkers(workers, cf.srv.Endpoint(), name); err != nil {
		b.Fatal(err)
	}
	p, err := New(cf.nc, Settings{Model: "bench-large", NumLower: bench.Large.N, NumUpper: bench.Large.NVal,
		Workers: workers, Threads: threads, Pool: name})
	if err != nil {
		b.Fatal(err)
	}
	cf.made[name] = p
	return p
}

// BenchmarkOverhead times the large logistic problem's gradient ∇_W g,
// HVP ∇_WW g·v and AID hypergradient with 10 CG steps (linearized HVPs) on
// 1, 2 and 4 worker processes on the loopback, each with its own
// GOMAXPROCS (default) or one thread (t1), against the same call in this
// process: each iteration makes the call here and then on the workers,
// back to back, so that both see the same load on a shared machine. It
// reports the best time of each (inproc-ms, dist-ms), the median of the
// iterations' ratios (dist/inproc), and for the workers the slowest
// worker's computing time, the rest (comm-ms: latency, coding, reduction)
// and the bytes of a call. The oracles are on the whole data, at bench's
// point (λ, W, v). Each configuration is made at its first run and kept
// (the workers stop when the test binary exits). See docs/distributed.md.
func BenchmarkOverhead(b *testing.B) {
	for _, name := range []string{"w1", "w2", "w2t1", "w4", "w4t1"} {
		b.Run(name, func(b *testing.B) {
			d := overheadConfig(b, name)
			in := overheadConfigs.in
			dy, dx := make([]float64, len(in.Inner)), make([]float64, len(in.Outer))
			for _, row := range []struct {
				name string
				op   func(p oracles)
			}{
				{"grad", func(p oracles) { p.GradG(nil, dy, in.Outer, in.Inner, nil) }},
				{"hvp", func(p oracles) { p.HVP(dy, in.Outer, in.Inner, in.V, nil) }},
				{"aid-cg10", func(p oracles) {
					if _, err := implicit.Hypergradient(dx, p, in.Outer, in.Inner, &implicit.Settings{Solver: &implicit.CG{MaxIter: 10, Tol: -1}}); err != nil {
						b.Fatal(err)
					}
				}},
			} {
				b.Run(row.name, func(b *testing.B) {
					waitQuiet(b)
					before := d.Stats()
					bestIn, bestD := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
					var ratios []float64
					var cpuIn, cpuD time.Duration
					pids := append(children(b), os.Getpid())
					for b.Loop() {
						c0 := cpuTime(b, pids)
						t := time.Now()
						row.op(in.P)
						tIn := time.Since(t)
						c1 := cpuTime(b, pids)
						t = time.Now()
						row.op(d)
						tD := time.Since(t)
						c2 := cpuTime(b, pids)
						cpuIn, cpuD = cpuIn+c1-c0, cpuD+c2-c1
						bestIn, bestD = min(bestIn, tIn), min(bestD, tD)
						ratios = append(ratios, float64(tD)/float64(tIn))
					}
					if d.Err() != nil {
						b.Fatal(d.Err())
					}
					slices.Sort(ratios)
					st, n := d.Stats(), float64(b.N)
					b.ReportMetric(float64(bestIn)/1e6, "inproc-ms")
					b.ReportMetric(float64(bestD)/1e6, "dist-ms")
					b.ReportMetric(ratios[len(ratios)/2], "dist/inproc")
					b.ReportMetric(float64(cpuIn)/1e6/float64(b.N), "cpu-inproc-ms/op")
					b.ReportMetric(float64(cpuD)/1e6/float64(b.N), "cpu-dist-ms/op")
					b.ReportMetric(float64(st.Compute-before.Compute)/1e6/n, "compute-ms/op")
					b.ReportMetric(float64(st.Wall-before.Wall-(st.Compute-before.Compute))/1e6/n, "comm-ms/op")
					b.ReportMetric(float64(st.BytesSent+st.BytesReceived-before.BytesSent-before.BytesReceived)/1e3/n, "kB/op")
				})
			}
		})
	}
}

// children lists the processes this one started (the workers).
func children(b *testing.B) []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, e := range dirs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid …: the comm may hold spaces, not ')'.
		if _, rest, ok := strings.Cut(string(stat), ") "); ok {
			if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cpuTime returns the CPU time the threads of pids have used, from
// /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU, first field).
func cpuTime(b *testing.B, pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range tasks {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if err != nil {
				continue // the thread ended
			}
			if f := strings.Fields(string(st)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				sum += time.Duration(ns)
			}
		}
	}
	return sum
}

// waitQuiet waits, when $DIST_BENCH_QUIET is a number n, up to a minute
// until at most n tasks are runnable on the machine (/proc/loadavg), so that
// on a shared machine the rows are timed in its quiet moments.
func waitQuiet(b *testing.B) {
	n, err := strconv.Atoi(os.Getenv("DIST_BENCH_QUIET"))
	if err != nil {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(l)) // 0.51 0.42 0.40 2/345 6789: runnable/total in field 3
		if len(f) > 3 {
			if r, _, ok := strings.Cut(f[3], "/"); ok {
				if k, err := strconv.Atoi(r); err == nil && k <= n {
					return
				}
			}
		}
	}
}
