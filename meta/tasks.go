package meta

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/data"
)

// Tasks is a deterministic, random-access source of N-way K-shot tasks
// over the rotated classes of some base classes of a data set (see
// data.TaskSampler): task i is the first task of a data.TaskSampler seeded
// from (Seed, i). Any task can thus be regenerated from its index, so a
// run resumed at meta-iteration k draws exactly the tasks an
// uninterrupted run would, and workers may draw their tasks in parallel.
// (data.TaskSampler itself has no saved state to restore.)
type Tasks struct {
	Data                 *data.Dataset
	Base                 []int // base classes; 4·len(Base) rotated classes
	Ways, Shots, Queries int
	Seed                 uint64
}

// Check reports settings that cannot give a task.
func (ts *Tasks) Check() error {
	_, err := data.NewTaskSampler(ts.Data, ts.Base, ts.Ways, ts.Shots, ts.Queries, ts.Seed)
	return err
}

// Task draws task i into dst (reused when not nil) and returns it.
func (ts *Tasks) Task(i int, dst *data.Task) (*data.Task, error) {
	s, err := data.NewTaskSampler(ts.Data, ts.Base, ts.Ways, ts.Shots, ts.Queries, taskSeed(ts.Seed, uint64(i)))
	if err != nil {
		return nil, err
	}
	return s.Next(dst), nil
}

// taskSeed mixes a seed and an index (SplitMix64's finalizer) so that
// neighbouring indices give unrelated PCG seeds.
func taskSeed(seed, i uint64) uint64 {
	z := seed*0x9e3779b97f4a7c15 + i + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Accuracy summarizes per-task query accuracies.
type Accuracy struct {
	Mean float64 // mean over tasks
	CI95 float64 // half-width of the 95% confidence interval, 1.96·sd/√n
	Loss float64 // mean query cross-entropy
	N    int     // number of tasks
}

func (a Accuracy) String() string {
	return fmt.Sprintf("%.2f%% ± %.2f%% (%d tasks)", 100*a.Mean, 100*a.CI95, a.N)
}

// summarize returns the mean accuracy over tasks with its 95% confidence
// interval and the mean loss.
func summarize(acc, loss []float64) Accuracy {
	n := len(acc)
	if n == 0 {
		return Accuracy{}
	}
	var m, l float64
	for i, a := range acc {
		m += a
		l += loss[i]
	}
	m /= float64(n)
	var v float64
	for _, a := range acc {
		v += (a - m) * (a - m)
	}
	ci := 0.0
	if n > 1 {
		ci = 1.96 * math.Sqrt(v/float64(n-1)) / math.Sqrt(float64(n))
	}
	return Accuracy{Mean: m, CI95: ci, Loss: l / float64(n), N: n}
}

// scoreHead returns the accuracy and mean cross-entropy of the linear head
// y = (W, b) — W features × ways, row-major, then b (ways values) unless
// noBias — on the feature rows feats (n × features) with the given labels.
func scoreHead(feats []float64, labels []int, y []float64, features, ways int, noBias bool) (acc, loss float64) {
	z := make([]float64, ways)
	correct := 0
	for r, l := range labels {
		f := feats[r*features : (r+1)*features]
		for j := range z {
			if noBias {
				z[j] = 0
			} else {
				z[j] = y[features*ways+j]
			}
		}
		for k, v := range f {
			w := y[k*ways : (k+1)*ways]
			for j := range z {
				z[j] += v * w[j]
			}
		}
		best, m := 0, math.Inf(-1)
		for j, v := range z {
			if v > m {
				best, m = j, v
			}
		}
		if best == l {
			correct++
		}
		var s float64
		for _, v := range z {
			s += math.Exp(v - m)
		}
		loss += m + math.Log(s) - z[l]
	}
	n := float64(len(labels))
	return float64(correct) / n, loss / n
}
