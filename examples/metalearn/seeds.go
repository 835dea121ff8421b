package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"gonum.org/v1/gonum/stat/distuv"
)

// seedRun is the experiment of one seed: its settings with their logs and
// results.
type seedRun struct {
	seed uint64
	sets []*setting
}

// runSeeds runs the experiment once per seed of c.Seeds, each in
// -out/seed-N as a run with -seed N would, then summarizes them over the
// seeds.
func runSeeds(c config) (map[string]any, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	var runs []seedRun
	for i, seed := range c.Seeds {
		cs := c
		cs.Seed, cs.Seeds, cs.Out = seed, nil, filepath.Join(c.Out, fmt.Sprintf("seed-%d", seed))
		fmt.Printf("seed %d (%d of %d): output in %s\n", seed, i+1, len(c.Seeds), cs.Out)
		_, sets, err := runSeed(cs)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		runs = append(runs, seedRun{seed: seed, sets: sets})
	}
	stats := collectSeeds(runs)
	if err := writeSeeds(path, c, runs, stats); err != nil {
		return nil, err
	}
	result := map[string]any{"seeds": len(c.Seeds)}
	var failed []string
	for _, s := range stats {
		key := s.Setting + "_" + strings.ReplaceAll(s.Method, "-", "_")
		for _, seed := range s.Failed {
			failed = append(failed, fmt.Sprintf("%s(seed %d)", key, seed))
		}
		if len(s.Acc) == 0 {
			continue
		}
		m := medianCI(s.Acc)
		result[key+"_median"] = round(m.Median, 4)
		result[key+"_lo"] = round(m.Lo, 4)
		result[key+"_hi"] = round(m.Hi, 4)
	}
	failErr := experiment.Failed(result, failed, len(stats)*len(c.Seeds))
	result["seconds"] = round(time.Since(start).Seconds(), 1)
	report.Result(os.Stdout, result)
	return result, failErr
}

// seedStats are one method's figures in one setting over the seeds.
type seedStats struct {
	Setting, Method string
	// Seeds are the seeds the method ran to the end with, Acc its final
	// meta-test accuracy with each and Drop the largest fall of its
	// meta-test curve below the best point before it (none for the
	// baselines, which have no curve), CPU its median CPU time per
	// meta-iteration. Failed are the seeds it failed with.
	Seeds  []uint64
	Acc    []float64
	Drop   []float64
	CPU    []float64
	Failed []uint64
}

// collectSeeds gathers every method's figures, in the order of the
// settings and of their results.
func collectSeeds(runs []seedRun) []*seedStats {
	var out []*seedStats
	find := map[[2]string]*seedStats{}
	for _, r := range runs {
		for _, e := range r.sets {
			for _, res := range e.results {
				k := [2]string{e.name, res.Method}
				s := find[k]
				if s == nil {
					s = &seedStats{Setting: e.name, Method: res.Method}
					find[k] = s
					out = append(out, s)
				}
				if res.Error != "" {
					s.Failed = append(s.Failed, r.seed)
					continue
				}
				s.Seeds = append(s.Seeds, r.seed)
				s.Acc = append(s.Acc, res.Accuracy)
				var curve []float64
				for _, row := range e.curve {
					if row.Method == res.Method {
						curve = append(curve, row.Accuracy)
					}
				}
				if len(curve) > 0 {
					s.Drop = append(s.Drop, largestDrop(curve))
				}
				if res.CPUPerIter > 0 {
					s.CPU = append(s.CPU, res.CPUPerIter)
				}
			}
		}
	}
	return out
}

// largestDrop returns the largest fall of a curve below the best of its
// earlier points: max over k of (max_{j≤k} c_j − c_k).
func largestDrop(c []float64) float64 {
	best, drop := math.Inf(-1), 0.0
	for _, v := range c {
		best = math.Max(best, v)
		drop = math.Max(drop, best-v)
	}
	return drop
}

// medianInterval is a median with a distribution-free confidence interval.
type medianInterval struct {
	Median, Lo, Hi float64
	// Coverage is the probability that [Lo, Hi] covers the true median
	// (at least 0.95 from six values on).
	Coverage float64
}

// medianCI returns the median of v and the confidence interval for it
// between the order statistics v(k) and v(n+1−k) (from 1), k the largest
// with P(B < k) ≤ 2.5% for B ~ Binomial(n, ½): the interval then covers
// the median of the distribution the values are drawn from with
// probability 1 − 2·P(B < k) ≥ 95%, whatever that distribution. With
// fewer than six values no k qualifies; the interval is then the range,
// with its lower coverage 1 − 2^{1−n}.
func medianCI(v []float64) medianInterval {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	b := distuv.Binomial{N: float64(n), P: 0.5}
	k := 1
	for k+1 <= (n+1)/2 && b.CDF(float64(k)) <= 0.025 {
		k++
	}
	return medianInterval{Median: experiment.MedianOf(slices.Clone(s)), Lo: s[k-1], Hi: s[n-k],
		Coverage: 1 - 2*b.CDF(float64(k-1))}
}

// writeSeeds writes seeds.csv (each method's median accuracy over the
// seeds with its interval, and its curves' largest drops), pairs.csv (the
// median difference of accuracy between two methods over the seeds they
// share, with its interval: the seeds share their tasks and initial
// backbone, so the pairs are matched) and, per setting, the median over
// the seeds of the meta-test curves.
func writeSeeds(path func(string) string, c config, runs []seedRun, stats []*seedStats) error {
	st := report.Table{Columns: []string{"setting", "method", "seeds", "failed", "median", "lo", "hi", "coverage", "mean",
		"min", "max", "drop_median", "drop_max", "cpu_per_iter_median", "values"}}
	for _, s := range stats {
		if len(s.Acc) == 0 {
			st.Add(s.Setting, s.Method, 0, len(s.Failed), "", "", "", "", "", "", "", "", "", "", "")
			continue
		}
		m := medianCI(s.Acc)
		dropMed, dropMax, cpu := "", "", ""
		if len(s.Drop) > 0 {
			dropMed, dropMax = fmt.Sprint(experiment.MedianOf(slices.Clone(s.Drop))), fmt.Sprint(slices.Max(s.Drop))
		}
		if len(s.CPU) > 0 {
			cpu = fmt.Sprint(experiment.MedianOf(slices.Clone(s.CPU)))
		}
		vals := make([]string, len(s.Acc))
		for i, a := range s.Acc {
			vals[i] = fmt.Sprintf("%d:%.4f", s.Seeds[i], a)
		}
		st.Add(s.Setting, s.Method, len(s.Acc), len(s.Failed), m.Median, m.Lo, m.Hi, m.Coverage, mean(s.Acc),
			slices.Min(s.Acc), slices.Max(s.Acc), dropMed, dropMax, cpu, strings.Join(vals, " "))
	}
	pt := report.Table{Columns: []string{"setting", "a", "b", "seeds", "median_diff", "lo", "hi", "coverage", "a_wins", "b_wins"}}
	for i, a := range stats {
		for _, b := range stats[i+1:] {
			if a.Setting != b.Setting {
				continue
			}
			var d []float64
			wins := [2]int{}
			for j, seed := range a.Seeds {
				if k := slices.Index(b.Seeds, seed); k >= 0 {
					d = append(d, a.Acc[j]-b.Acc[k])
					wins[0] += b2i(a.Acc[j] > b.Acc[k])
					wins[1] += b2i(a.Acc[j] < b.Acc[k])
				}
			}
			if len(d) == 0 {
				continue
			}
			m := medianCI(d)
			pt.Add(a.Setting, a.Method, b.Method, len(d), m.Median, m.Lo, m.Hi, m.Coverage, wins[0], wins[1])
		}
	}
	for name, t := range map[string]*report.Table{"seeds.csv": &st, "pairs.csv": &pt} {
		if err := t.WriteCSV(path(name)); err != nil {
			return err
		}
	}
	if err := report.WriteJSON(path("seeds.json"), map[string]any{"config": c, "methods": stats}); err != nil {
		return err
	}
	for i := range runs[0].sets {
		if err := plotSeeds(path, c, runs, i, stats); err != nil {
			return err
		}
	}
	return nil
}

// plotSeeds draws, for setting i, the median over the seeds of each
// method's meta-test accuracy against meta-iterations, the baselines'
// medians as flat lines.
func plotSeeds(path func(string) string, c config, runs []seedRun, i int, stats []*seedStats) error {
	name := runs[0].sets[i].name
	var series []report.Series
	xmax := 1.0
	for _, m := range c.Methods {
		byIter := map[int][]float64{}
		for _, r := range runs {
			for _, row := range r.sets[i].curve {
				if row.Method == m {
					byIter[row.Iter] = append(byIter[row.Iter], row.Accuracy)
				}
			}
		}
		s := report.Series{Name: m}
		for _, it := range slices.Sorted(maps.Keys(byIter)) {
			s.X, s.Y = append(s.X, float64(it)), append(s.Y, experiment.MedianOf(byIter[it]))
			xmax = math.Max(xmax, float64(it))
		}
		for _, st := range stats {
			if st.Setting == name && st.Method == m && len(st.Failed) > 0 {
				s.Note = fmt.Sprintf("failed with %d of %d seeds", len(st.Failed), len(runs))
			}
		}
		series = append(series, s)
	}
	for _, st := range stats {
		if st.Setting == name && (st.Method == "random" || st.Method == "pretrained") && len(st.Acc) > 0 {
			med := medianCI(st.Acc).Median
			series = append(series, report.Series{Name: st.Method + " backbone", X: []float64{0, xmax}, Y: []float64{med, med}, Reference: true})
		}
	}
	pl := report.Plot{Title: fmt.Sprintf("%s: meta-test accuracy, median over %d seeds (%d tasks)", name, len(runs), c.CurveSize),
		XLabel: "meta-iterations", YLabel: "query accuracy", XScale: report.Linear, YScale: report.Linear, Series: series}
	return pl.Save(path("seeds_test_accuracy_" + name + ".png"))
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
