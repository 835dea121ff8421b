// Command hypercleaning runs the data hyper-cleaning experiment of papers
// 003 (Ji, Yang, Liang 2021, Sec. 6 and App. B) and 002 (Dong et al. 2025,
// Sec. 4.3): a linear softmax classifier is trained on images whose labels
// were replaced, each with probability p, by a random class, and a weight
// σ(λ_i) per training sample is learned so that the classifier does well on
// a clean validation set,
//
//	min_λ CE(X_val W*, Y_val),   W* = argmin_W mean_i σ(λ_i) CE(x_iᵀW, y_i) + C_r‖W‖²,
//
// with C_r = 0.001. It compares stocBiO, AID-BiO (CG), ITD-BiO, NSBO-SGD,
// SOBA, AmIGO, BSA, TTSA and the fully first-order F2SA and BOME under one
// budget per run, all with Adam on λ (paper 003's protocol), and two
// baselines: the classifier trained on the corrupted data with equal
// weights (the bilevel methods' starting point, λ = 0) and the one trained
// on the uncorrupted samples only. It records validation loss, test loss
// and test accuracy against time and against per-sample oracle
// evaluations, the precision and recall of the learned weights as a
// detector of corrupted labels (flagged: σ(λ_i) < ½), and the test
// accuracy of the classifier retrained to convergence with the final
// weights ("refit"). The classifier of a run is its y, except F2SA's, whose
// y minimizes f + λg: its z, the lower-level iterate, is evaluated
// (experiment.LowerIterate). With several -seeds the figures are medians
// with 95% intervals (experiment.Summarize).
//
// -mode quick (the default) runs in a few minutes on the Fashion-MNIST
// subset built into the toolkit; -mode full uses 20000 training, 5000
// validation and 10000 test images of Fashion-MNIST and MNIST as in the
// papers. Output goes to -out: traces.csv, runs.csv, baselines.csv,
// summary.json and PNG plots; the last line printed is
// "result: key=value ...".
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// config is everything a run depends on.
type config struct {
	Mode            string
	Datasets        []string
	Train, Val, Tst int
	Ps              []float64
	Methods         []string
	Seeds           []uint64
	Budget          time.Duration
	Work            float64
	Points          int
	Cr              float64
	Params          experiment.Params
	Batch           int
	DetBatch        int
	Center          bool
	BaselineIters   int
	NoBaselines     bool
	Workers         int
	NATS            string
	Out             string
	Quiet           bool

	cluster *dist.Cluster // the workers of -workers, nil in process
}

// methodInfo describes a method of the comparison.
type methodInfo struct {
	name  string // display name
	paper string // where its settings come from
	make  func(c config, hp func(string) float64) optim.Method
}

// allMethods lists the methods in display order.
var allMethods = []string{"stocbio", "aid", "itd", "nsbo", "soba", "amigo", "bsa", "ttsa", "f2sa", "bome"}

// defaultParams are each method's step sizes: lr is Adam's step on λ,
// alpha the inner (y) step — NBO's γ, SOBA's ρ, TTSA's β scale — and eta
// the Neumann or linear-system step. They were chosen by the grid search
// recorded in docs/experiments.md (the lowest validation loss after the
// quick mode's budget, on a seed not used for the figures), as papers 003
// and 002 chose theirs.
var defaultParams = experiment.Params{
	"stocbio": {"lr": 0.1, "alpha": 0.3, "eta": 0.3},
	"aid":     {"lr": 1, "alpha": 1},
	"itd":     {"lr": 3, "alpha": 1},
	"nsbo":    {"lr": 0.1, "alpha": 1},
	"soba":    {"lr": 0.1, "alpha": 1},
	"amigo":   {"lr": 1, "alpha": 0.1, "eta": 0.1},
	"bsa":     {"lr": 0.01, "alpha": 0.003, "eta": 0.003},
	"ttsa":    {"lr": 0.1, "alpha": 0.03, "eta": 0.03},
	"f2sa":    {"lr": 1, "alpha": 0.3, "lambda": 0.3},
	"bome":    {"lr": 1, "alpha": 3, "xi": 3},
}

// methods builds each method with the experiment's settings.
var methods = map[string]methodInfo{
	"stocbio": {"stocBiO", "paper 003 App. B: batch 50 (-batch), Adam; D = 10, Q = 10", func(c config, hp func(string) float64) optim.Method {
		b := c.Batch
		return optim.StocBiO{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, Q: 10, InnerBatch: b, HessianBatch: b, MixedBatch: b, UpperBatch: b, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"aid": {"AID-BiO", "paper 003 Alg. 1, AID with D = 10 inner and N = 10 CG steps, full batches (-detbatch)", func(c config, hp func(string) float64) optim.Method {
		b := c.DetBatch
		return optim.AIDBiO{Alpha: hp("alpha"), D: 10, N: 10, InnerBatch: b, HessianBatch: b, UpperBatch: b, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"itd": {"ITD-BiO", "paper 003 Alg. 1, ITD through D = 10 inner steps, full batches (-detbatch)", func(c config, hp func(string) float64) optim.Method {
		b := c.DetBatch
		return optim.ITDBiO{Alpha: hp("alpha"), D: 10, InnerBatch: b, UpperBatch: b, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"nsbo": {"NSBO-SGD", "paper 002 Sec. 4.2-4.3: T = 1, |B_2| = 256, other batches 64", func(c config, hp func(string) float64) optim.Method {
		return optim.NSBOSGD{Gamma: hp("alpha"), Updates: 2, HessianBatch: 64, ResidualBatch: 64, GradBatch: 256, MixedBatch: 64, UpperBatch: 64, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"soba": {"SOBA", "Dagréou et al. 2022 as in paper 002: batch 64, constant steps", func(c config, hp func(string) float64) optim.Method {
		return optim.SOBA{Rho: hp("alpha"), InnerBatch: 64, UpperBatch: 64, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"amigo": {"AmIGO", "Arbel & Mairal 2022 as in paper 002: 10 + 10 SGD steps, batch 64", func(c config, hp func(string) float64) optim.Method {
		return optim.AmIGO{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, Q: 10, InnerBatch: 64, HessianBatch: 64, MixedBatch: 64, UpperBatch: 64, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"bsa": {"BSA", "paper 003 App. B: batch 1; D = 10 inner steps, Neumann N = 10", func(c config, hp func(string) float64) optim.Method {
		return optim.BSA{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, N: 10, InnerBatch: 1, HessianBatch: 1, MixedBatch: 1, UpperBatch: 1, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"ttsa": {"TTSA", "paper 003 App. B: batch 1; decaying two-timescale steps, Neumann N = 10", func(c config, hp func(string) float64) optim.Method {
		return optim.TTSA{Beta: hp("alpha"), Eta: hp("eta"), N: 10, InnerBatch: 1, HessianBatch: 1, MixedBatch: 1, UpperBatch: 1, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"f2sa": {"F2SA", "Kwon et al. 2023 Alg. 1 (first order): T = 10, batch 64, constant γ = alpha, λ = lambda, α = γ/(2λ)", func(c config, hp func(string) float64) optim.Method {
		return optim.F2SA{Gamma: hp("alpha"), Lambda: hp("lambda"), T: 10, LowerBatch: 64, UpperBatch: 64, Outer: optim.Adam{LR: hp("lr")}}
	}},
	"bome": {"BOME", "Liu et al. 2022 Alg. 1 (first order): T = 10, η = 0.5, batch 64, SGD step xi on W", func(c config, hp func(string) float64) optim.Method {
		return optim.BOME{Alpha: hp("alpha"), T: 10, LowerBatch: 64, UpperBatch: 64, Outer: optim.Adam{LR: hp("lr")}, Inner: optim.SGD{LR: hp("xi")}}
	}},
}

var modes = map[string]map[string]string{
	"quick": {"data": "embedded", "train": "2000", "val": "1000", "test": "0", "p": "0.5", "budget": "0", "work": "2e5",
		"seeds": "1", "points": "30", "baseline-iters": "300"},
	"full": {"data": "fashion,mnist", "train": "20000", "val": "5000", "test": "10000", "p": "0.2,0.5,0.8", "budget": "20s", "work": "0",
		"seeds": "1", "points": "40", "baseline-iters": "100"},
}

func main() {
	dist.ServeIfWorker()
	experiment.Main("hypercleaning", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var dataList, ps, methodList, seeds, set string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (embedded subset, a few minutes) or full (20000/5000/10000 images of Fashion-MNIST and MNIST); sets the defaults of the flags marked (mode)")
	fs.StringVar(&dataList, "data", "", "(mode) comma-separated data sets: "+experiment.DataHelp)
	fs.IntVar(&c.Train, "train", 0, "(mode) training images (lower level), drawn from the training set")
	fs.IntVar(&c.Val, "val", 0, "(mode) validation images (upper level), drawn from the rest of the training set")
	fs.IntVar(&c.Tst, "test", 0, "(mode) test images drawn from the test set; 0: all of it")
	fs.StringVar(&ps, "p", "", "(mode) comma-separated corruption probabilities: each training label is replaced by a uniformly random class (possibly the same) with probability p")
	fs.StringVar(&methodList, "methods", strings.Join(allMethods, ","), "comma-separated methods: "+strings.Join(allMethods, ", "))
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds; each seed draws its own split, corruption and minibatches")
	fs.DurationVar(&c.Budget, "budget", 0, "(mode) solver wall time per run (evaluation excluded); 0: use -work")
	fs.Float64Var(&c.Work, "work", 0, "(mode) per-sample oracle evaluations per run (a gradient, Hessian-vector or mixed product on b samples counts b), the budget when -budget is 0; unlike time it does not depend on the machine's load")
	fs.IntVar(&c.Points, "points", 0, "(mode) checkpoints per run, evenly spaced in time")
	fs.Float64Var(&c.Cr, "cr", 0.001, "C_r, the weight of C_r‖W‖² in the lower objective (paper 003: 0.001)")
	fs.StringVar(&set, "set", "", "override step sizes, e.g. stocbio.lr=0.3,all.alpha=0.5 (lr: Adam's step on λ; alpha: inner step; eta: Neumann / linear-system step; 0 means 1/L, L the largest eigenvalue of ∇yy g at the start; lambda: F2SA's multiplier (0: 10); xi: BOME's step on W); defaults: "+defaultParams.Describe())
	fs.IntVar(&c.Batch, "batch", 50, "stocBiO's batch size (paper 003: 50)")
	fs.IntVar(&c.DetBatch, "detbatch", 0, "batch size of AID-BiO and ITD-BiO; 0: the whole data set (the deterministic algorithms of paper 003)")
	fs.BoolVar(&c.Center, "center", true, "subtract the mean training image from every image")
	fs.IntVar(&c.BaselineIters, "baseline-iters", 0, "(mode) L-BFGS iterations for training the baseline classifiers")
	fs.BoolVar(&c.NoBaselines, "no-baselines", false, "skip the two baseline classifiers (for step-size searches)")
	fs.IntVar(&c.Workers, "workers", 0, "worker processes holding the samples, split between them (package dist); 0: the problem in this process")
	fs.StringVar(&c.NATS, "nats", "", "a NATS server URL to use instead of an embedded one; the -workers workers are then not started here: start them on any machine (docs/distributed.md)")
	fs.StringVar(&c.Out, "out", "out/hypercleaning", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "hypercleaning", "Data hyper-cleaning (papers 003 and 002): learn a weight per training sample so that a\nlinear classifier trained on corrupted labels does well on clean validation data.", modes, func(w io.Writer) {
		fmt.Fprintf(w, "\nMethods:\n")
		for _, m := range allMethods {
			fmt.Fprintf(w, "  %-8s %s: %s\n", m, methods[m].name, methods[m].paper)
		}
	})
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.Datasets = ck.DataList("data", dataList)
	c.Ps = ck.Floats("p", ps, 0, 1)
	c.Seeds = ck.Seeds("seeds", seeds)
	c.Methods = ck.Names("methods", methodList, allMethods)
	ck.Duration("budget", c.Budget, true)
	ck.Float("work", c.Work, 0, 1e15)
	if c.Budget == 0 && c.Work == 0 {
		ck.Failf("budget", "0 with -work 0: give a positive -budget (a duration) or -work")
	}
	ck.Int("train", c.Train, 1, experiment.MaxSamples)
	ck.Int("val", c.Val, 1, experiment.MaxSamples)
	ck.Int("test", c.Tst, 0, experiment.MaxSamples)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	ck.Positive("cr", c.Cr)
	// A minibatch is drawn from the training or the validation samples.
	ck.Int("batch", c.Batch, 1, max(1, min(c.Train, c.Val)))
	ck.Int("detbatch", c.DetBatch, 0, max(0, min(c.Train, c.Val)))
	ck.Int("baseline-iters", c.BaselineIters, 1, experiment.MaxIters)
	ck.Int("workers", c.Workers, 0, min(64, max(1, c.Val)))
	if c.NATS != "" {
		if err := dist.CheckURL(c.NATS); err != nil {
			ck.Failf("nats", "%v", err)
		} else if c.Workers == 0 {
			ck.Failf("nats", "%s with -workers 0: give the number of workers that hold the samples", c.NATS)
		}
	}
	ck.Out("out", c.Out)
	c.Params = defaultParams.Clone()
	if err := c.Params.Set(set); err != nil {
		ck.Add(err)
	} else {
		ck.Add(c.Params.Positive("xi")) // BOME's SGD step on W: no default
	}
	return c, ck.Err()
}

// runRow is the outcome of one run.
type runRow struct {
	Dataset   string
	P         float64
	Method    string
	Seed      uint64
	Iters     int
	Seconds   float64
	Samples   int64
	ValLoss   float64
	TestLoss  float64
	TestAcc   float64
	Precision float64
	Recall    float64
	F1        float64
	// RefitTestAcc and RefitValLoss are those of the classifier retrained
	// to convergence on the training data with the final weights σ(λ_i):
	// the quality of the learned weights without the unfinished inner solve
	// (and without the validation data that F2SA's y and BOME's joint step
	// mix into W).
	RefitTestAcc, RefitValLoss float64
	Error                      string `json:",omitempty"`
}

// baselineRow is one baseline classifier.
type baselineRow struct {
	Dataset   string
	P         float64
	Baseline  string
	Seed      uint64
	Corrupted int // labels changed by the corruption
	Kept      int // training samples used
	GradNorm  float64
	TestLoss  float64
	TestAcc   float64
}

// outcome is what run returns, for the test.
type outcome struct {
	Runs      []runRow
	Baselines []baselineRow
	Result    map[string]any
}

func run(c config, stdout, stderr io.Writer) (*outcome, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	out := &outcome{Result: map[string]any{}}
	if c.cluster, err = startCluster(c); err != nil {
		return nil, err
	}
	if c.cluster != nil {
		defer c.cluster.Close()
	}
	traces := report.Table{Columns: []string{"dataset", "p", "method", "seed", "iter", "time_s", "oracle_calls", "sample_evals",
		"val_loss", "test_loss", "test_acc", "precision", "recall", "f1"}}
	curves := map[string][]*experiment.Trace{} // key: dataset|p|method
	nRuns := len(c.Datasets) * len(c.Ps) * len(c.Seeds) * (len(c.Methods) + 1)
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	bar := report.NewProgress(w, "hypercleaning", nRuns)
	names := experiment.FileNames(c.Datasets) // in file names, keys and tables
	var failed []string
	for di, dsPath := range c.Datasets {
		images, err := experiment.LoadImages(dsPath)
		if err != nil {
			return nil, err
		}
		dsName := names[di]
		images.Name = dsName
		for _, p := range c.Ps {
			for _, seed := range c.Seeds {
				e, err := newSetup(c, images, p, seed)
				if err != nil {
					return nil, err
				}
				if !c.NoBaselines {
					bs, err := e.baselines(c)
					if err != nil {
						return nil, err
					}
					out.Baselines = append(out.Baselines, bs...)
					bar.Step(fmt.Sprintf("%s p=%g seed %d: baselines %.3f / %.3f", dsName, p, seed, bs[0].TestAcc, bs[1].TestAcc))
				} else {
					bar.Step("no baselines")
				}
				for _, name := range c.Methods {
					row, tr, err := e.solve(c, name)
					if err != nil {
						return nil, err
					}
					out.Runs = append(out.Runs, row)
					key := fmt.Sprintf("%s|%g|%s", dsName, p, name)
					curves[key] = append(curves[key], tr)
					for _, pt := range tr.Points {
						m := pt.Metrics
						traces.Add(dsName, p, name, seed, pt.Iter, pt.Seconds, pt.Oracles, pt.Samples,
							m["val_loss"], m["test_loss"], m["test_acc"], m["precision"], m["recall"], m["f1"])
					}
					if tr.Err != nil {
						failed = append(failed, fmt.Sprintf("%s_p%g_%s_seed%d", dsName, p, name, seed))
					}
					bar.Step(fmt.Sprintf("%s p=%g seed %d %s: acc %.3f, %s", dsName, p, seed, name, row.TestAcc, tr.Describe()))
				}
				e.close()
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	if err := writeTables(path, out); err != nil {
		return nil, err
	}
	if err := plots(path, c, names, curves, out.Baselines); err != nil {
		return nil, err
	}
	summarize(c, names, out)
	printSummary(stdout, c, names, out)
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "baselines": out.Baselines, "result": out.Result}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

// setup is one data set, corruption probability and seed: the compiled
// problem and everything the metrics need.
type setup struct {
	dataset    string
	p          float64
	seed       uint64
	prob       *experiment.Counting
	problem    oracle.Problem
	x0, y0     []float64
	val, test  *data.Dataset
	changed    []bool
	corrupted  int
	classes, d int
}

func newSetup(c config, images *experiment.Images, p float64, seed uint64) (*setup, error) {
	noisy, val, test, corr, err := prepare(c, images, p, seed)
	if err != nil {
		return nil, err
	}
	var gp oracle.Problem
	var x0, y0 []float64
	if c.cluster != nil {
		gp, x0, y0, err = distProblem(c, c.cluster, images, p, seed, noisy.N, val.N)
	} else {
		var m *models.CleaningModel
		if m, err = models.HyperCleaning(experiment.ModelData(noisy), experiment.ModelData(val), noisy.Classes, models.CleaningSettings{Cr: c.Cr}); err == nil {
			var cp *graph.Problem
			if cp, err = m.Compile(); err == nil {
				gp, x0, y0 = cp, cp.X0(nil), cp.Y0(nil)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	changed, _ := corr.Count()
	return &setup{dataset: images.Name, p: p, seed: seed, prob: experiment.NewCounting(gp), problem: gp,
		x0: x0, y0: y0, val: val, test: test, changed: corr.Changed, corrupted: changed,
		classes: noisy.Classes, d: noisy.D}, nil
}

// metrics evaluates a state: validation loss (the upper objective), test
// loss and accuracy of the classifier y, and the learned weights as a
// detector of corrupted labels.
func (e *setup) metrics(x, y []float64) map[string]float64 {
	vl, _ := experiment.Linear(e.val, y, nil, e.classes)
	tl, ta := experiment.Linear(e.test, y, nil, e.classes)
	flagged := make([]bool, len(x))
	for i, l := range x {
		flagged[i] = l < 0
	}
	prec, rec := data.PrecisionRecall(flagged, e.changed)
	f1 := 2 * prec * rec / (prec + rec)
	return map[string]float64{"val_loss": vl, "test_loss": tl, "test_acc": ta, "precision": prec, "recall": rec, "f1": f1}
}

// baselines trains the two reference classifiers: on all (corrupted)
// samples with equal weights σ(0) = ½, and on the uncorrupted samples only
// (weights σ(0) = ½ and σ(−40) ≈ 0), both to convergence of the lower
// problem.
func (e *setup) baselines(c config) ([]baselineRow, error) {
	var rows []baselineRow
	for _, name := range []string{"corrupted", "clean-only"} {
		x := make([]float64, len(e.x0))
		kept := len(x)
		if name == "clean-only" {
			for i, ch := range e.changed {
				if ch {
					x[i] = -40
					kept--
				}
			}
		}
		y := slices.Clone(e.y0)
		gn, err := experiment.SolveInner(e.problem, x, y, experiment.InnerSettings{Tol: 1e-6, MaxIter: c.BaselineIters})
		if err != nil {
			return nil, fmt.Errorf("%s baseline: %w", name, err)
		}
		tl, ta := experiment.Linear(e.test, y, nil, e.classes)
		rows = append(rows, baselineRow{Dataset: e.dataset, P: e.p, Baseline: name, Seed: e.seed, Corrupted: e.corrupted,
			Kept: kept, GradNorm: gn, TestLoss: tl, TestAcc: ta})
	}
	return rows, nil
}

// solve runs one method under the budget.
func (e *setup) solve(c config, name string) (runRow, *experiment.Trace, error) {
	m := methods[name].make(c, func(k string) float64 { return c.Params.Get(name, k) })
	s := optim.Settings{Seed: e.seed*1000 + 7}
	tr, err := experiment.Run(e.prob, e.x0, e.y0, m, s, experiment.Budget{Time: c.Budget, Samples: int64(c.Work), Points: c.Points}, e.prob,
		func(st *optim.State) map[string]float64 { return e.metrics(st.X, experiment.LowerIterate(m, st)) })
	if err != nil {
		return runRow{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	last := tr.Last()
	mt := last.Metrics
	row := runRow{Dataset: e.dataset, P: e.p, Method: name, Seed: e.seed, Iters: tr.State.Iter, Seconds: last.Seconds, Samples: last.Samples,
		ValLoss: mt["val_loss"], TestLoss: mt["test_loss"], TestAcc: mt["test_acc"],
		Precision: mt["precision"], Recall: mt["recall"], F1: mt["f1"], RefitTestAcc: math.NaN(), RefitValLoss: math.NaN()}
	if tr.Err != nil {
		row.Error = tr.Err.Error()
	} else {
		// Warm-started from the run's classifier, the refit takes a fraction
		// of the baselines' iterations.
		y := slices.Clone(experiment.LowerIterate(m, tr.State))
		if _, err := experiment.SolveInner(e.problem, tr.State.X, y, experiment.InnerSettings{Tol: 1e-6, MaxIter: c.BaselineIters}); err == nil {
			row.RefitValLoss, _ = experiment.Linear(e.val, y, nil, e.classes)
			_, row.RefitTestAcc = experiment.Linear(e.test, y, nil, e.classes)
		}
	}
	return row, tr, nil
}

func writeTables(path func(string) string, out *outcome) error {
	runs := report.Table{Columns: []string{"dataset", "p", "method", "seed", "iters", "seconds", "sample_evals", "val_loss", "test_loss", "test_acc", "precision", "recall", "f1", "refit_val_loss", "refit_test_acc", "error"}}
	for _, r := range out.Runs {
		runs.Add(r.Dataset, r.P, r.Method, r.Seed, r.Iters, r.Seconds, r.Samples, r.ValLoss, r.TestLoss, r.TestAcc, r.Precision, r.Recall, r.F1, r.RefitValLoss, r.RefitTestAcc, r.Error)
	}
	if err := runs.WriteCSV(path("runs.csv")); err != nil {
		return err
	}
	bt := report.Table{Columns: []string{"dataset", "p", "baseline", "seed", "corrupted", "kept", "grad_norm", "test_loss", "test_acc"}}
	for _, b := range out.Baselines {
		bt.Add(b.Dataset, b.P, b.Baseline, b.Seed, b.Corrupted, b.Kept, b.GradNorm, b.TestLoss, b.TestAcc)
	}
	return bt.WriteCSV(path("baselines.csv"))
}

// plots draws, for each data set and p, the median over seeds of test
// accuracy, test loss and validation loss against time and against
// per-sample oracle evaluations, with the baselines as flat lines.
func plots(path func(string) string, c config, names []string, curves map[string][]*experiment.Trace, baselines []baselineRow) error {
	for _, ds := range names {
		for _, p := range c.Ps {
			for _, metric := range []struct{ key, label string }{
				{"test_acc", "test accuracy"}, {"test_loss", "test loss"}, {"val_loss", "validation loss (upper objective)"},
			} {
				for _, axis := range []experiment.Axis{experiment.Seconds, experiment.Samples} {
					if metric.key == "val_loss" && axis == experiment.Samples {
						continue
					}
					var series []report.Series
					for _, name := range c.Methods {
						if ts := curves[fmt.Sprintf("%s|%g|%s", ds, p, name)]; len(ts) > 0 {
							series = append(series, experiment.MedianSeries(methods[name].name, ts, axis, metric.key))
						}
					}
					hi := experiment.MaxX(series)
					if metric.key != "val_loss" {
						for _, b := range []string{"corrupted", "clean-only"} {
							var vals []float64
							for _, r := range baselines {
								if r.Dataset == ds && r.P == p && r.Baseline == b {
									if metric.key == "test_acc" {
										vals = append(vals, r.TestAcc)
									} else {
										vals = append(vals, r.TestLoss)
									}
								}
							}
							if len(vals) > 0 {
								series = append(series, experiment.Flat("baseline: "+b, experiment.MedianOf(vals), hi))
							}
						}
					}
					axisName := map[experiment.Axis]string{experiment.Seconds: "time", experiment.Samples: "samples"}[axis]
					// Every method starts from the same poor classifier (λ = 0):
					// the axis fits what follows.
					pl := report.Plot{Title: fmt.Sprintf("hyper-cleaning, %s, p = %g", ds, p), XLabel: axis.Label(), YLabel: metric.label,
						Series: series, FitAfterStart: true}
					if metric.key == "test_acc" {
						pl.YScale = report.Linear
					}
					if err := pl.Save(path(fmt.Sprintf("%s_p%g_%s_vs_%s.png", ds, p, metric.key, axisName))); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// summarize fills the result line: per data set and p, each method's
// final test accuracy (median over seeds, and its 95% interval when there
// are several seeds; experiment.Summarize), the refit accuracy likewise,
// the median precision and recall, the baselines, and the best method's
// gain over training on corrupted data.
func summarize(c config, names []string, out *outcome) {
	key := func(ds string, p float64, what string) string {
		return fmt.Sprintf("%s_p%g_%s", ds, p, what)
	}
	put := func(k string, v []float64) float64 {
		sm := experiment.Summarize(v)
		if sm.N > 1 {
			sm.AddResult(out.Result, k)
		} else if sm.N == 1 {
			out.Result[k] = round4(sm.Median)
		}
		return sm.Median
	}
	for _, ds := range names {
		for _, p := range c.Ps {
			base := map[string]float64{}
			for _, b := range []string{"corrupted", "clean-only"} {
				if v := baselineAccs(out, ds, p, b); len(v) > 0 {
					base[b] = put(key(ds, p, strings.ReplaceAll(b, "-", "")+"_acc"), v)
				}
			}
			best, bestName := math.Inf(-1), ""
			for _, name := range c.Methods {
				var acc, refit, prec, rec []float64
				for _, r := range out.Runs {
					if r.Dataset == ds && r.P == p && r.Method == name && r.Error == "" {
						acc, refit = append(acc, r.TestAcc), append(refit, r.RefitTestAcc)
						prec, rec = append(prec, r.Precision), append(rec, r.Recall)
					}
				}
				if len(acc) == 0 {
					continue // failed: named in the key "failed"
				}
				a := put(key(ds, p, name+"_acc"), acc)
				put(key(ds, p, name+"_refit_acc"), refit)
				out.Result[key(ds, p, name+"_precision")] = round4(experiment.MedianFinite(prec))
				out.Result[key(ds, p, name+"_recall")] = round4(experiment.MedianFinite(rec))
				if a > best {
					best, bestName = a, name
				}
			}
			if bestName == "" {
				continue
			}
			out.Result[key(ds, p, "best")] = bestName
			if corr, ok := base["corrupted"]; ok {
				out.Result[key(ds, p, "gain_points")] = math.Round(1000*(best-corr)) / 10
			}
		}
	}
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// baselineAccs returns the test accuracies of baseline b on data set ds
// at corruption p, one per seed.
func baselineAccs(out *outcome, ds string, p float64, b string) []float64 {
	var v []float64
	for _, r := range out.Baselines {
		if r.Dataset == ds && r.P == p && r.Baseline == b {
			v = append(v, r.TestAcc)
		}
	}
	return v
}

// printSummary prints, per data set and p, the baselines and each method's
// figures over the seeds: median [95% interval] of the test accuracy at the
// end of the budget and after the refit, the median precision, recall and
// iterations.
func printSummary(w io.Writer, c config, names []string, out *outcome) {
	for _, ds := range names {
		for _, p := range c.Ps {
			fmt.Fprintf(w, "%s, p = %g (test accuracy over %d seed(s): median [95%% interval]):\n", ds, p, len(c.Seeds))
			for _, b := range []string{"corrupted", "clean-only"} {
				if acc := baselineAccs(out, ds, p, b); len(acc) > 0 {
					fmt.Fprintf(w, "  baseline %-10s %s\n", b, experiment.Summarize(acc).Format("%.4f"))
				}
			}
			for _, name := range c.Methods {
				var acc, refit, prec, rec, its []float64
				var fails []string
				for _, r := range out.Runs {
					switch {
					case r.Dataset != ds || r.P != p || r.Method != name:
					case r.Error != "":
						fails = append(fails, fmt.Sprintf("seed %d at iteration %d: %s", r.Seed, r.Iters, r.Error))
					default:
						acc, refit = append(acc, r.TestAcc), append(refit, r.RefitTestAcc)
						prec, rec, its = append(prec, r.Precision), append(rec, r.Recall), append(its, float64(r.Iters))
					}
				}
				if len(acc) > 0 {
					fmt.Fprintf(w, "  %-9s acc %s  refit %s  precision %.3f recall %.3f  %6.0f iterations\n", methods[name].name,
						experiment.Summarize(acc).Format("%.4f"), experiment.Summarize(refit).Format("%.4f"),
						experiment.MedianFinite(prec), experiment.MedianFinite(rec), experiment.MedianOf(its))
				}
				for _, f := range fails {
					fmt.Fprintf(w, "  %-9s FAILED, %s\n", methods[name].name, f)
				}
			}
		}
	}
}
