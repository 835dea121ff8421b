package dist

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/bench"
	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

// BenchmarkMetaStep times one meta-iteration (meta.Learner.Step, ITD-BiO)
// with the tasks in this process (Settings.Workers goroutines, GOMAXPROCS
// by default) and on 2 worker processes (MetaTasks) on the embedded
// server, back to back in each iteration (alternately first) so that both
// see the same load,
// and checks that the two learners stay bit-identical. Scales: meta's
// BenchmarkIteration row itd/16f/1s5q (4 tasks of the embedded
// Fashion-MNIST subset, 16 filters, 5-way 1-shot, 5 queries) and
// bench.MetaSpec (4 synthetic 5-way 5-shot tasks, 15 queries, 32 filters,
// 28×28). It reports the best and median times of each, the median of the
// iterations' ratios, the CPU time of all processes per step and the bytes
// of a step. The first step, which compiles the problems, is not timed.
// See docs/distributed.md.
func BenchmarkMetaStep(b *testing.B) {
	train, _, err := data.EmbeddedFashionMNIST()
	if err != nil {
		b.Fatal(err)
	}
	small := &meta.Tasks{Data: train, Base: []int{0, 1, 2, 3, 4, 5}, Ways: 5, Shots: 1, Queries: 5, Seed: 1}
	ms := bench.MetaSpec
	for _, c := range []struct {
		name  string
		s     meta.Settings
		cnn   models.CNNSettings
		tasks func(k int) []*data.Task
	}{
		{"itd-16f-1s5q", meta.Settings{Gradient: meta.ITD, Steps: 10, TaskBatch: 4}, models.CNNSettings{Filters: 16},
			func(k int) []*data.Task {
				ts := make([]*data.Task, 4)
				for j := range ts {
					if ts[j], err = small.Task(4*k+j, nil); err != nil {
						b.Fatal(err)
					}
				}
				return ts
			}},
		{"itd-metaspec", meta.Settings{Gradient: meta.ITD, Steps: ms.Steps, Alpha: ms.Alpha, CGSteps: ms.CGSteps, TaskBatch: ms.Tasks, Outer: optim.Adam{LR: ms.LR}},
			models.CNNSettings{Side: ms.Side, Blocks: 4, Filters: 32, Lambda: ms.Lambda, Eps: ms.Eps},
			func(int) []*data.Task { return bench.MetaTasks() }},
	} {
		for _, workers := range []int{1, 2, 4} {
			benchMetaStep(b, fmt.Sprintf("%s/w%d", c.name, workers), workers, c.s, c.cnn, c.tasks)
		}
	}
}

// benchMetaStep is one row of BenchmarkMetaStep: the tasks of each step
// on the given number of worker processes against this process.
func benchMetaStep(b *testing.B, name string, workers int, s meta.Settings, cnn models.CNNSettings, tasks func(k int) []*data.Task) {
	b.Run(name, func(b *testing.B) {
		cl := newCluster(b, workers)
		in, err := meta.NewLearner(s, cnn, 5)
		if err != nil {
			b.Fatal(err)
		}
		rs := s
		rs.Runner = metaRunner(b, cl, s, cnn, 5, Settings{Workers: workers})
		d, err := meta.NewLearner(rs, cnn, 5)
		if err != nil {
			b.Fatal(err)
		}
		m := rs.Runner.(*MetaTasks)
		k := 0
		step := func(l *meta.Learner) time.Duration {
			t := time.Now()
			if _, err := l.Step(tasks(k)); err != nil {
				b.Fatal(err)
			}
			return time.Since(t)
		}
		step(in)
		step(d)
		waitQuiet(b)
		pids := append(children(b), os.Getpid())
		before := m.Stats()
		var tIn, tD, ratios []float64
		var cpuIn, cpuD time.Duration
		for b.Loop() {
			k++
			first, second := in, d // alternately first, so that neither always follows the other
			if k%2 == 0 {
				first, second = d, in
			}
			c0 := cpuTime(b, pids)
			a := step(first)
			c1 := cpuTime(b, pids)
			e := step(second)
			ca, ce := c1-c0, cpuTime(b, pids)-c1
			if k%2 == 0 {
				a, e, ca, ce = e, a, ce, ca
			}
			cpuIn, cpuD = cpuIn+ca, cpuD+ce
			tIn, tD = append(tIn, a.Seconds()), append(tD, e.Seconds())
			ratios = append(ratios, e.Seconds()/a.Seconds())
		}
		si, sd := in.Snapshot(), d.Snapshot()
		if !slices.EqualFunc(si.Params, sd.Params, func(u, v float64) bool { return math.Float64bits(u) == math.Float64bits(v) }) {
			b.Fatal("the learners on workers and in process differ")
		}
		st, n := m.Stats(), float64(b.N)
		for _, r := range []struct {
			unit string
			v    []float64
		}{{"inproc-s", tIn}, {"dist-s", tD}} {
			slices.Sort(r.v)
			b.ReportMetric(r.v[0], "best-"+r.unit)
			b.ReportMetric(r.v[len(r.v)/2], "median-"+r.unit)
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "dist/inproc")
		b.ReportMetric(cpuIn.Seconds()/n, "cpu-inproc-s/op")
		b.ReportMetric(cpuD.Seconds()/n, "cpu-dist-s/op")
		b.ReportMetric(float64(st.BytesSent+st.BytesReceived-before.BytesSent-before.BytesReceived)/1e3/n, "kB/op")
		if l, err := os.ReadFile("/proc/loadavg"); err == nil {
			b.Logf("load average %s", l)
		}
	})
}
