package meta

import (
	"syscall"
	"testing"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/models"
)

// benchIteration measures one meta-iteration on a batch of four 5-way
// tasks of the embedded Fashion-MNIST subset with a backbone of the given
// width.
func benchIteration(b *testing.B, s Settings, filters, shots, queries int) {
	train, _, err := data.EmbeddedFashionMNIST()
	if err != nil {
		b.Fatal(err)
	}
	src := &Tasks{Data: train, Base: []int{0, 1, 2, 3, 4, 5}, Ways: 5, Shots: shots, Queries: queries, Seed: 1}
	s.TaskBatch = 4
	l, err := NewLearner(s, models.CNNSettings{Filters: filters}, 5)
	if err != nil {
		b.Fatal(err)
	}
	tasks := make([]*data.Task, s.TaskBatch)
	step := func(k int) {
		for j := range tasks {
			if tasks[j], err = src.Task(k*len(tasks)+j, tasks[j]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Step(tasks); err != nil {
			b.Fatal(err)
		}
	}
	step(0) // compiles the problems
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for i := 0; i < b.N; i++ {
		step(i + 1)
	}
	// CPU time is what a loaded machine does not inflate.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}

// cpuSeconds returns the user and system CPU time of the process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func BenchmarkIteration(b *testing.B) {
	for _, c := range []struct {
		name                    string
		s                       Settings
		filters, shots, queries int
	}{
		{"itd/16f/1s5q", Settings{Gradient: ITD, Steps: 10}, 16, 1, 5},
		{"itd-direct/16f/1s5q", Settings{Gradient: ITD, Steps: 10, Backprop: Direct}, 16, 1, 5},
		{"aid/16f/1s5q", Settings{Gradient: AID, Steps: 10}, 16, 1, 5},
		{"aid-direct/16f/1s5q", Settings{Gradient: AID, Steps: 10, Backprop: Direct}, 16, 1, 5},
		{"anil/16f/1s5q", Settings{Gradient: ANIL, Steps: 5}, 16, 1, 5},
		{"maml/16f/1s5q", Settings{Gradient: MAML, Steps: 3, Alpha: 0.5}, 16, 1, 5},
		{"fomaml/16f/1s5q", Settings{Gradient: MAML, Steps: 3, Alpha: 0.5, FirstOrder: true}, 16, 1, 5},
		{"maml/16f/5s5q", Settings{Gradient: MAML, Steps: 3, Alpha: 0.5}, 16, 5, 5},
		{"itd/16f/5s5q", Settings{Gradient: ITD, Steps: 10}, 16, 5, 5},
		{"itd-T50/16f/1s5q", Settings{Gradient: ITD, Steps: 50}, 16, 1, 5},
		{"aid-D50/16f/1s5q", Settings{Gradient: AID, Steps: 50}, 16, 1, 5},
		{"itd/32f/1s15q", Settings{Gradient: ITD, Steps: 10}, 32, 1, 15},
		{"itd-direct/32f/5s15q", Settings{Gradient: ITD, Steps: 10, Backprop: Direct}, 32, 5, 15},
		{"itd/32f/5s15q", Settings{Gradient: ITD, Steps: 10}, 32, 5, 15},
	} {
		b.Run(c.name, func(b *testing.B) { benchIteration(b, c.s, c.filters, c.shots, c.queries) })
	}
}

// BenchmarkHeadSweep measures the head-only part of one task's
// meta-gradient in Features mode: T = 50 steps and the reverse sweep (ITD)
// or 50 steps and 10 CG steps (AID) on models.CNNHead, 5-way 1-shot with 5
// queries per class and 16 features.
func BenchmarkHeadSweep(b *testing.B) {
	cnn := models.CNNSettings{Filters: 16}
	h, err := newHead(5, 25, 5, cnn, false)
	if err != nil {
		b.Fatal(err)
	}
	labels := func(n int) []int {
		l := make([]int, n)
		for i := range l {
			l[i] = i % 5
		}
		return l
	}
	if err := h.setLabels(labels(5), labels(25)); err != nil {
		b.Fatal(err)
	}
	feats := make([]float64, h.head.DimX())
	for i := range feats {
		feats[i] = float64(i%7) / 7
	}
	dx, y0 := make([]float64, h.head.DimX()), make([]float64, h.head.DimY())
	for _, m := range []Gradient{ITD, AID} {
		b.Run(m.String(), func(b *testing.B) {
			w := &worker{cg: implicit.CG{Tol: 1e-10, MaxIter: 10}}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				fx := fixedOracles{h.head.FixX(feats, nil, nil)}
				if _, err := w.metaGradient(dx, nil, fx, y0, m == AID, false, 50, 0.1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
