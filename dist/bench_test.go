package dist

import (
	"fmt"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/gobilevel/bilevel/bench"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
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
	implicit.Problem
	GradG(dx, dy, x, y []float64, batch []int)
}

// overheadConfigs are BenchmarkOverhead's problems, made at its first run
// and kept for the later ones (-count), so that the repetitions of the
// rows interleave: the workers stop when the test binary exits.
var overheadConfigs struct {
	in   *bench.Instance
	srv  *Server
	nc   *nats.Conn
	made map[string]oracles
}

// overheadConfig returns the problem of a configuration, making it at
// first use: "inproc", or wN[tT] for N workers with GOMAXPROCS T (their
// own without t).
func overheadConfig(b *testing.B, name string) oracles {
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
		nc, err := Dial(srv.Endpoint())
		if err != nil {
			b.Fatal(err)
		}
		cf.in, cf.srv, cf.nc, cf.made = in, srv, nc, map[string]oracles{"inproc": in.P}
		if name == "inproc" {
			return in.P
		}
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
// HVP ∇_WW g·v and AID hypergradient with 10 CG steps (linearized HVPs)
// in this process and on 1, 2 and 4 worker processes on the loopback, each
// with its own GOMAXPROCS (default) or one thread (t1). The oracles are
// on the whole data, at bench's point (λ, W, v). Each configuration is
// made at its first run and kept for the later ones (-count), so that the
// repetitions interleave; the workers stop when the test binary exits.
// Take each row's best: docs/distributed.md.
func BenchmarkOverhead(b *testing.B) {
	for _, name := range []string{"inproc", "w1", "w2", "w2t1", "w4", "w4t1"} {
		b.Run(name, func(b *testing.B) {
			p := overheadConfig(b, name)
			in := overheadConfigs.in
			dy, dx := make([]float64, len(in.W)), make([]float64, len(in.Lambda))
			for _, row := range []struct {
				name string
				op   func()
			}{
				{"grad", func() { p.GradG(nil, dy, in.Lambda, in.W, nil) }},
				{"hvp", func() { p.HVP(dy, in.Lambda, in.W, in.V, nil) }},
				{"aid-cg10", func() {
					if _, err := implicit.Hypergradient(dx, p, in.Lambda, in.W, &implicit.Settings{Solver: &implicit.CG{MaxIter: 10, Tol: -1}}); err != nil {
						b.Fatal(err)
					}
				}},
			} {
				b.Run(row.name, func(b *testing.B) {
					d, _ := p.(*Problem)
					var before Stats
					if d != nil {
						before = d.Stats()
					}
					for b.Loop() {
						row.op()
					}
					if d != nil { // the split of the time for the cost model
						st, n := d.Stats(), float64(b.N)
						b.ReportMetric(float64(st.Compute-before.Compute)/1e6/n, "compute-ms/op")
						b.ReportMetric(float64(st.Wall-before.Wall-(st.Compute-before.Compute))/1e6/n, "comm-ms/op")
						b.ReportMetric(float64(st.BytesSent+st.BytesReceived-before.BytesSent-before.BytesReceived)/1e3/n, "kB/op")
						if d.Err() != nil {
							b.Fatal(d.Err())
						}
					}
				})
			}
		})
	}
}
