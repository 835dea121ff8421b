// Command hyperparam runs the per-feature regularization experiments of
// papers 003 (Ji, Yang, Liang 2021, Sec. 6, App. B: logistic regression on
// 20 Newsgroups) and 000 (Chen, Sun, Xiao, Yin 2022, Sec. 4: STABLE on
// LIBSVM data), on Fashion-MNIST, the closest real data this toolkit can
// have (20 Newsgroups, ijcnn1, covtype and australian cannot be
// installed here).
//
// Part "multinomial" (paper 003's experiment, and paper 000's method on
// it): a softmax classifier W ∈ R^{784×10} with one penalty weight per
// pixel,
//
//	min_λ CE(X_val W*),   W* = argmin_W CE(X W) + (1/(c·d)) Σ_jk e^{λ_j} W_jk²,
//
// solved by stocBiO with batch sizes 100 to 2000 (η = 0.5, Q = 10), AID-BiO
// with conjugate gradient (AID-CG) and ITD-BiO (reverse), all with 10 inner
// steps, 10 CG steps and SGD on λ as in the paper, by the matrix-free
// form of STABLE, BSA and TTSA, and by the fully first-order F2SA and BOME
// (whose classifier is evaluated as experiment.LowerIterate says). The dense STABLE of paper 000 needs the
// 7840×7840 Hessian and its eigendecomposition at every step, out of reach
// here; optim.STABLEMatrixFree is the labelled approximation.
//
// Part "stable" (paper 000's experiment): binary logistic regression with
// the penalty Σ_i x_i y_i² of paper 000, eq. (32), on two Fashion-MNIST
// classes (T-shirt/top against Shirt) with 4×4-pooled pixels, 49 features
// like the 14–54 of paper 000's data sets, where STABLE's dense matrices are
// small. STABLE, BSA and TTSA draw single samples, as in paper 000, and the
// figures are the objective error Φ(x_k) − Φ* against samples drawn and
// time, with Φ(x) = f(x, y*(x)) computed exactly.
//
// Every part records validation and test loss and accuracy against time.
// -mode quick (the default) runs both parts in a few minutes on the
// embedded Fashion-MNIST subset; -mode full uses Debian's full
// Fashion-MNIST. Output: traces.csv, runs.csv, summary.json and PNG plots in
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
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

// config is everything a run depends on.
type config struct {
	Mode  string
	Parts []string
	Data  string
	// Part "multinomial".
	Train, Val, Test int
	Methods          []string
	Work             float64
	// Part "stable".
	BTrain, BVal, BTest int
	BClasses            [2]int
	Pool                int
	BMethods            []string
	BDrawn              float64
	XMin                float64
	RefIters            int

	Seeds  []uint64
	Points int
	Params experiment.Params
	Out    string
	Quiet  bool
}

// methodInfo describes a method.
type methodInfo struct {
	name, paper string
	make        func(c config, hp func(string) float64, n int) optim.Method // n bounds the batch sizes
}

var multinomialMethods = []string{"stocbio100", "stocbio500", "stocbio1000", "stocbio2000", "aid", "itd", "stablemf", "bsa", "ttsa", "f2sa", "bome"}
var stableMethods = []string{"stable", "bsa", "ttsa"}

func stocbio(b int) methodInfo {
	return methodInfo{fmt.Sprintf("stocBiO-%d", b), fmt.Sprintf("paper 003 App. B: batch %d, D = 10, η = 0.5, Q = 10, SGD on λ", b),
		func(c config, hp func(string) float64, n int) optim.Method {
			b := min(b, n)
			return optim.StocBiO{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, Q: 10, InnerBatch: b, HessianBatch: b, MixedBatch: b, UpperBatch: b,
				Outer: optim.SGD{LR: hp("lr")}}
		}}
}

// methods of part "multinomial". sbatch is the batch of STABLE-MF, BSA and
// TTSA there.
var methods = map[string]methodInfo{
	"stocbio100":  stocbio(100),
	"stocbio500":  stocbio(500),
	"stocbio1000": stocbio(1000),
	"stocbio2000": stocbio(2000),
	"aid": {"AID-CG", "paper 003 (hypertorch's AID-CG): D = 10 inner steps, N = 10 CG steps, full batches, SGD on λ", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.AIDBiO{Alpha: hp("alpha"), D: 10, N: 10, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"itd": {"ITD (reverse)", "paper 003 (hypertorch's reverse): D = 10 inner steps, full batches, SGD on λ", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.ITDBiO{Alpha: hp("alpha"), D: 10, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"stablemf": {"STABLE-MF", "paper 000 Alg. 1 without its dense matrices (optim.STABLEMatrixFree, N = 10 CG steps), batch 100", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.STABLEMatrixFree{Alpha: hp("lr"), Beta: hp("alpha"), N: 10, LowerBatch: min(100, n), UpperBatch: min(100, n)}
	}},
	"bsa": {"BSA", "Ghadimi & Wang 2018 as in paper 000: D = 10 inner steps, Neumann N = 10, batch 100, SGD on λ", func(c config, hp func(string) float64, n int) optim.Method {
		b := min(100, n)
		return optim.BSA{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, N: 10, InnerBatch: b, HessianBatch: b, MixedBatch: b, UpperBatch: b, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"ttsa": {"TTSA", "Hong et al. 2020 as in paper 000: decaying two-timescale steps, Neumann N = 10, batch 100, SGD on λ", func(c config, hp func(string) float64, n int) optim.Method {
		b := min(100, n)
		return optim.TTSA{Beta: hp("alpha"), Eta: hp("eta"), N: 10, InnerBatch: b, HessianBatch: b, MixedBatch: b, UpperBatch: b, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"f2sa": {"F2SA", "Kwon et al. 2023 Alg. 1 (first order): T = 10, batch 100, constant γ = alpha, λ = lambda, α = γ/(2λ), SGD on λ", func(c config, hp func(string) float64, n int) optim.Method {
		b := min(100, n)
		return optim.F2SA{Gamma: hp("alpha"), Lambda: hp("lambda"), T: 10, LowerBatch: b, UpperBatch: b, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"bome": {"BOME", "Liu et al. 2022 Alg. 1 (first order): T = 10, η = 0.5, batch 100, SGD on λ, SGD step xi on W", func(c config, hp func(string) float64, n int) optim.Method {
		b := min(100, n)
		return optim.BOME{Alpha: hp("alpha"), T: 10, LowerBatch: b, UpperBatch: b, Outer: optim.SGD{LR: hp("lr")}, Inner: optim.SGD{LR: hp("xi")}}
	}},
}

// bmethods are those of part "stable", all on single samples.
var bmethods = map[string]methodInfo{
	"stable": {"STABLE", "paper 000 Alg. 1: one sample per level, τ = β, dense matrices, eigenvalue floor μ_g = mu", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.STABLE{Alpha: hp("lr"), Beta: hp("alpha"), Mu: hp("mu"), LowerBatch: 1, UpperBatch: 1}
	}},
	"bsa": {"BSA", "Ghadimi & Wang 2018: D = 10 single-sample inner steps, Neumann N = 10", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.BSA{Alpha: hp("alpha"), Eta: hp("eta"), D: 10, N: 10, InnerBatch: 1, HessianBatch: 1, MixedBatch: 1, UpperBatch: 1, Outer: optim.SGD{LR: hp("lr")}}
	}},
	"ttsa": {"TTSA", "Hong et al. 2020: single samples, decaying two-timescale steps, Neumann N = 10", func(c config, hp func(string) float64, n int) optim.Method {
		return optim.TTSA{Beta: hp("alpha"), Eta: hp("eta"), N: 10, InnerBatch: 1, HessianBatch: 1, MixedBatch: 1, UpperBatch: 1, Outer: optim.SGD{LR: hp("lr")}}
	}},
}

// defaultParams: lr is the outer step (SGD on λ, STABLE's α), alpha the
// inner step (STABLE's β, TTSA's β scale), eta the Neumann step, mu
// STABLE's eigenvalue floor μ_g (eq. 9b; smaller floors let single-sample
// Hessians blow the correction of eq. 8b up, see docs/experiments.md). Part
// "stable" uses the keys "b.<method>". Chosen by the grid searches recorded
// in docs/experiments.md; stocBiO-100 and STABLE-MF, the noisiest, take a
// step ten times smaller than the search chose, with which they diverged on
// the full data.
var defaultParams = experiment.Params{
	"stocbio100":  {"lr": 100, "alpha": 1, "eta": 0.5},
	"stocbio500":  {"lr": 1000, "alpha": 1, "eta": 0.5},
	"stocbio1000": {"lr": 1000, "alpha": 1, "eta": 0.5},
	"stocbio2000": {"lr": 1000, "alpha": 1, "eta": 0.5},
	"aid":         {"lr": 1000, "alpha": 1},
	"itd":         {"lr": 1000, "alpha": 1},
	"stablemf":    {"lr": 10, "alpha": 1},
	"bsa":         {"lr": 100, "alpha": 1, "eta": 0.5},
	"ttsa":        {"lr": 1000, "alpha": 1, "eta": 0.5},
	"f2sa":        {"lr": 100, "alpha": 1, "lambda": 3},
	"bome":        {"lr": 1000, "alpha": 1, "xi": 0.3},
	"b.stable":    {"lr": 0.5, "alpha": 0.1, "mu": 1},
	"b.bsa":       {"lr": 1, "alpha": 0.05, "eta": 0.05},
	"b.ttsa":      {"lr": 1, "alpha": 0.5, "eta": 0.5},
}

var modes = map[string]map[string]string{
	"quick": {"data": "embedded", "train": "2000", "val": "2000", "test": "0", "work": "1e6",
		"btrain": "400", "bval": "400", "btest": "0", "bdrawn": "4000", "ref-iters": "100", "seeds": "1", "points": "25"},
	"full": {"data": "fashion", "train": "5000", "val": "5000", "test": "10000", "work": "6e6",
		"btrain": "4000", "bval": "4000", "btest": "0", "bdrawn": "40000", "ref-iters": "300", "seeds": "1,2,3", "points": "40"},
}

func main() {
	experiment.Main("hyperparam", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var parts, methodList, bmethodList, classes, seeds, set string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (embedded subset, a few minutes) or full (Debian's Fashion-MNIST); sets the defaults of the flags marked (mode)")
	fs.StringVar(&parts, "part", "multinomial,stable", "parts to run: multinomial (paper 003's per-feature experiment), stable (paper 000's)")
	fs.StringVar(&c.Data, "data", "", "(mode) the image data: "+experiment.DataHelp)
	fs.IntVar(&c.Train, "train", 0, "(mode) multinomial: training images (lower level)")
	fs.IntVar(&c.Val, "val", 0, "(mode) multinomial: validation images (upper level)")
	fs.IntVar(&c.Test, "test", 0, "(mode) multinomial: test images; 0: the whole test set")
	fs.StringVar(&methodList, "methods", strings.Join(multinomialMethods, ","), "multinomial: methods, from "+strings.Join(multinomialMethods, ", "))
	fs.Float64Var(&c.Work, "work", 0, "(mode) multinomial: per-sample oracle evaluations per run (a call on b samples counts b)")
	fs.IntVar(&c.BTrain, "btrain", 0, "(mode) stable: training images of the two classes")
	fs.IntVar(&c.BVal, "bval", 0, "(mode) stable: validation images of the two classes")
	fs.IntVar(&c.BTest, "btest", 0, "(mode) stable: test images; 0: all test images of the two classes")
	fs.StringVar(&classes, "classes", "0,6", "stable: the two Fashion-MNIST classes (0 T-shirt/top, 6 Shirt)")
	fs.IntVar(&c.Pool, "pool", 4, "stable: average-pool the 28×28 images over pool×pool blocks (4: 49 features)")
	fs.StringVar(&bmethodList, "bmethods", strings.Join(stableMethods, ","), "stable: methods, from "+strings.Join(stableMethods, ", "))
	fs.Float64Var(&c.BDrawn, "bdrawn", 0, "(mode) stable: samples drawn per run")
	fs.Float64Var(&c.XMin, "xmin", 1e-3, "stable: lower bound on every x_i (g is strongly convex only while x > 0; paper 000 leaves x free)")
	fs.IntVar(&c.RefIters, "ref-iters", 0, "(mode) stable: iterations of projected gradient descent with exact hypergradients that compute the reference Φ*")
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds: each draws its own split, starting point (part stable) and minibatches")
	fs.IntVar(&c.Points, "points", 0, "(mode) checkpoints per run")
	fs.StringVar(&set, "set", "", "override step sizes, e.g. aid.lr=10,b.stable.alpha=0.5 (lr: outer step; alpha: inner step; eta: Neumann step; lambda: F2SA's multiplier (0: 10); xi: BOME's step on W); defaults: "+defaultParams.Describe())
	fs.StringVar(&c.Out, "out", "out/hyperparam", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "hyperparam", "Per-feature regularization of logistic regression (papers 003 and 000) on Fashion-MNIST.", modes, func(w io.Writer) {
		fmt.Fprintf(w, "\nMethods of part multinomial:\n")
		for _, m := range multinomialMethods {
			fmt.Fprintf(w, "  %-12s %s: %s\n", m, methods[m].name, methods[m].paper)
		}
		fmt.Fprintf(w, "Methods of part stable:\n")
		for _, m := range stableMethods {
			fmt.Fprintf(w, "  %-12s %s: %s\n", m, bmethods[m].name, bmethods[m].paper)
		}
	})
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.Parts = ck.Names("part", parts, []string{"multinomial", "stable"})
	ck.Data("data", c.Data)
	c.Seeds = ck.Seeds("seeds", seeds)
	c.Methods = ck.Names("methods", methodList, multinomialMethods)
	c.BMethods = ck.Names("bmethods", bmethodList, stableMethods)
	if cl := ck.Ints("classes", classes, 0, 9); len(cl) != 2 || cl[0] == cl[1] {
		ck.Failf("classes", "%q: give two different classes from 0 to 9, e.g. 0,6", classes)
	} else {
		c.BClasses = [2]int{cl[0], cl[1]}
	}
	for _, f := range []struct {
		name   string
		v, min int
	}{{"train", c.Train, 1}, {"val", c.Val, 1}, {"test", c.Test, 0}, {"btrain", c.BTrain, 1}, {"bval", c.BVal, 1}, {"btest", c.BTest, 0}} {
		ck.Int(f.name, f.v, f.min, experiment.MaxSamples)
	}
	ck.Float("work", c.Work, 1, 1e15)
	ck.Float("bdrawn", c.BDrawn, 1, 1e15)
	ck.Positive("xmin", c.XMin)
	if ck.Int("pool", c.Pool, 1, 28); c.Pool >= 1 && 28%c.Pool != 0 {
		ck.Failf("pool", "%d does not divide the 28 pixels of a side: give 1, 2, 4, 7, 14 or 28", c.Pool)
	}
	ck.Int("ref-iters", c.RefIters, 0, experiment.MaxIters)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	ck.Out("out", c.Out)
	c.Params = defaultParams.Clone()
	if err := c.Params.Set(set); err != nil {
		ck.Add(err)
	} else {
		ck.Add(c.Params.Positive("lr")) // SGD's step, STABLE's α: no default
		ck.Add(c.Params.Positive("xi")) // BOME's SGD step on W: no default
	}
	return c, ck.Err()
}

// runRow is the outcome of one run.
type runRow struct {
	Part, Method string
	Seed         uint64
	Iters        int
	Seconds      float64
	Samples      int64
	Drawn        int64
	ValLoss      float64
	ValAcc       float64
	TestLoss     float64
	TestAcc      float64
	// ObjError is Φ(x) − Φ* at the end (part stable only).
	ObjError float64
	// RefitValLoss and RefitTestAcc are those of the classifier retrained
	// to convergence with the final λ (part multinomial): f(λ, w*(λ)),
	// the quality of the learned hyperparameters without the early
	// stopping of an unfinished inner solve.
	RefitValLoss, RefitTestAcc float64
	Error                      string `json:",omitempty"`
}

type outcome struct {
	Runs      []runRow
	Reference map[string]float64 // part stable: Φ* per seed, and the fixed-λ baselines
	Result    map[string]any
}

func run(c config, stdout, stderr io.Writer) (*outcome, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	images, err := experiment.LoadImages(c.Data)
	if err != nil {
		return nil, err
	}
	out := &outcome{Reference: map[string]float64{}, Result: map[string]any{}}
	traces := report.Table{Columns: []string{"part", "method", "seed", "iter", "time_s", "oracle_calls", "sample_evals", "samples_drawn",
		"val_loss", "val_acc", "test_loss", "test_acc", "obj_error"}}
	total := 0
	for _, p := range c.Parts {
		if p == "multinomial" {
			total += len(c.Seeds) * (len(c.Methods) + 1)
		} else {
			total += len(c.Seeds) * (len(c.BMethods) + 1)
		}
	}
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	bar := report.NewProgress(w, "hyperparam", total)
	step := bar.Step
	var failed []string
	all := map[string][]*experiment.Trace{} // part|method
	for _, part := range c.Parts {
		for _, seed := range c.Seeds {
			var e *setup
			if part == "multinomial" {
				e, err = newMultinomial(c, images, seed)
			} else {
				e, err = newBinary(c, images, seed)
			}
			if err != nil {
				return nil, err
			}
			msg, err := e.reference(c, out)
			if err != nil {
				return nil, err
			}
			step(fmt.Sprintf("%s seed %d: %s", part, seed, msg))
			names := c.Methods
			if part == "stable" {
				names = c.BMethods
			}
			var trs []*experiment.Trace
			for _, name := range names {
				tr, err := e.solve(c, name)
				if err != nil {
					return nil, err
				}
				trs = append(trs, tr)
				step(fmt.Sprintf("%s seed %d %s: test acc %.3f, %s", part, seed, name, tr.Last().Metrics["test_acc"], tr.Describe()))
			}
			if part == "stable" {
				// Φ* is the reference value or the lowest value reached.
				for _, tr := range trs {
					for _, pt := range tr.Points {
						e.phiStar = math.Min(e.phiStar, pt.Metrics["phi"])
					}
				}
				out.Reference[fmt.Sprintf("stable_phistar_seed%d", seed)] = e.phiStar
			}
			for i, name := range names {
				tr := trs[i]
				row := e.finish(name, tr)
				if tr.Err != nil {
					failed = append(failed, fmt.Sprintf("%s_%s_seed%d", part, name, seed))
				}
				out.Runs = append(out.Runs, row)
				all[part+"|"+name] = append(all[part+"|"+name], tr)
				for _, pt := range tr.Points {
					m := pt.Metrics
					traces.Add(part, name, seed, pt.Iter, pt.Seconds, pt.Oracles, pt.Samples, pt.Drawn,
						m["val_loss"], m["val_acc"], m["test_loss"], m["test_acc"], m["obj_error"])
				}
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	runs := report.Table{Columns: []string{"part", "method", "seed", "iters", "seconds", "sample_evals", "samples_drawn", "val_loss", "val_acc", "test_loss", "test_acc", "obj_error", "refit_val_loss", "refit_test_acc", "error"}}
	for _, r := range out.Runs {
		runs.Add(r.Part, r.Method, r.Seed, r.Iters, r.Seconds, r.Samples, r.Drawn, r.ValLoss, r.ValAcc, r.TestLoss, r.TestAcc, r.ObjError, r.RefitValLoss, r.RefitTestAcc, r.Error)
	}
	if err := runs.WriteCSV(path("runs.csv")); err != nil {
		return nil, err
	}
	if err := plots(path, c, all, out); err != nil {
		return nil, err
	}
	summarize(c, out)
	printSummary(stdout, c, out)
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "reference": out.Reference, "result": out.Result}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

// setup is one part and seed: the compiled problem and the metrics.
type setup struct {
	part       string
	seed       uint64
	prob       *experiment.Counting
	x0, y0     []float64
	val, test  *data.Dataset
	classes    int
	n          int
	proj       optim.Projection
	value      *experiment.Value // part stable: Φ(x)
	phiStar    float64
	binaryEval func(y []float64, ds *data.Dataset) (loss, acc float64)
}

func newMultinomial(c config, images *experiment.Images, seed uint64) (*setup, error) {
	train, val, test, err := images.Split(c.Train, c.Val, c.Test, seed)
	if err != nil {
		return nil, err
	}
	experiment.Center(train, val, test)
	m, err := models.LogisticRegression(experiment.ModelData(train), experiment.ModelData(val), train.Classes, models.LogisticSettings{})
	if err != nil {
		return nil, err
	}
	p, err := m.Compile()
	if err != nil {
		return nil, err
	}
	return &setup{part: "multinomial", seed: seed, prob: experiment.NewCounting(p), x0: p.X0(nil), y0: p.Y0(nil),
		val: val, test: test, classes: train.Classes, n: train.N}, nil
}

func newBinary(c config, images *experiment.Images, seed uint64) (*setup, error) {
	pick := func(ds *data.Dataset) (*data.Dataset, error) {
		return experiment.Pool(experiment.TwoClasses(ds, c.BClasses[0], c.BClasses[1]), c.Pool)
	}
	trAll, err := pick(images.Train)
	if err != nil {
		return nil, err
	}
	teAll, err := pick(images.Test)
	if err != nil {
		return nil, err
	}
	two := &experiment.Images{Name: images.Name, Train: trAll, Test: teAll}
	train, val, test, err := two.Split(c.BTrain, c.BVal, c.BTest, seed)
	if err != nil {
		return nil, err
	}
	// Features with zero mean and unit variance, scaled by 1/√d so that a
	// sample's squared norm is about 1, the scale of LIBSVM's scaled data
	// sets that paper 000 used: single-sample steps from paper 000's grid
	// {1, 0.5, 0.1, 0.05, 0.01} are then stable.
	experiment.Standardize(train, val, test)
	for _, ds := range []*data.Dataset{train, val, test} {
		for i := range ds.X {
			ds.X[i] /= math.Sqrt(float64(ds.D))
		}
	}
	m, err := models.BinaryLogisticRegression(experiment.ModelData(train), experiment.ModelData(val), models.BinarySettings{Penalty: models.LinearPenalty})
	if err != nil {
		return nil, err
	}
	p, err := m.Compile()
	if err != nil {
		return nil, err
	}
	// Random initialization, as paper 000's 50 trials: x_i ~ U[0.1, 1].
	rng := rand.New(rand.NewPCG(seed, 77))
	x0 := p.X0(nil)
	for i := range x0 {
		x0[i] = 0.1 + 0.9*rng.Float64()
	}
	lo := make([]float64, len(x0))
	for i := range lo {
		lo[i] = c.XMin
	}
	box, err := optim.NewBox(lo, nil)
	if err != nil {
		return nil, err
	}
	e := &setup{part: "stable", seed: seed, prob: experiment.NewCounting(p), x0: x0, y0: p.Y0(nil),
		val: val, test: test, classes: 2, n: train.N, proj: box}
	e.value = experiment.NewValue(p, e.y0)
	e.binaryEval = binaryScores
	return e, nil
}

// binaryScores returns the mean logistic loss and the accuracy of the
// linear scores Xw against 0/1 labels.
func binaryScores(w []float64, ds *data.Dataset) (loss, acc float64) {
	correct := 0
	for i := range ds.N {
		var z float64
		for j, v := range ds.Row(i) {
			z += v * w[j]
		}
		s := 2*float64(ds.Labels[i]) - 1
		m := s * z
		loss += math.Max(-m, 0) + math.Log1p(math.Exp(-math.Abs(m))) // log(1 + e^{−m})
		if m > 0 {
			correct++
		}
	}
	return loss / float64(ds.N), float64(correct) / float64(ds.N)
}

// reference computes, for part stable, Φ* by projected gradient descent on
// the exact value function; for part multinomial, the classifier trained
// with the initial penalty (λ = 0 for every pixel, no tuning).
func (e *setup) reference(c config, out *outcome) (string, error) {
	if e.part == "multinomial" {
		y := slices.Clone(e.y0)
		if _, err := experiment.SolveInner(e.prob.Problem, e.x0, y, experiment.InnerSettings{Tol: 1e-6, MaxIter: 300}); err != nil {
			return "", err
		}
		vl, va := experiment.Linear(e.val, y, nil, e.classes)
		tl, ta := experiment.Linear(e.test, y, nil, e.classes)
		k := fmt.Sprintf("multinomial_fixed_seed%d_", e.seed)
		out.Reference[k+"val_loss"], out.Reference[k+"val_acc"] = vl, va
		out.Reference[k+"test_loss"], out.Reference[k+"test_acc"] = tl, ta
		return fmt.Sprintf("fixed λ = 0: test acc %.3f, val loss %.3f", ta, vl), nil
	}
	_, phi, err := e.value.Minimize(e.x0, e.proj, c.RefIters)
	if err != nil {
		return "", fmt.Errorf("reference Φ*: %w", err)
	}
	e.phiStar = phi
	phi0, _, err := e.value.At(e.x0)
	if err != nil {
		return "", err
	}
	out.Reference[fmt.Sprintf("stable_phi0_seed%d", e.seed)] = phi0
	return fmt.Sprintf("Φ(x0) = %.5f, Φ* = %.5f", phi0, phi), nil
}

// metrics evaluates a state whose classifier is y (experiment.LowerIterate).
func (e *setup) metrics(st *optim.State, y []float64) map[string]float64 {
	m := map[string]float64{}
	if e.part == "multinomial" {
		m["val_loss"], m["val_acc"] = experiment.Linear(e.val, y, nil, e.classes)
		m["test_loss"], m["test_acc"] = experiment.Linear(e.test, y, nil, e.classes)
		return m
	}
	m["val_loss"], m["val_acc"] = e.binaryEval(y, e.val)
	m["test_loss"], m["test_acc"] = e.binaryEval(y, e.test)
	phi, _, err := e.value.At(st.X)
	if err != nil {
		phi = math.NaN()
	}
	m["phi"] = phi // obj_error is added by finish, once Φ* is known
	return m
}

// solve runs one method.
func (e *setup) solve(c config, name string) (*experiment.Trace, error) {
	var m optim.Method
	var b experiment.Budget
	n := min(e.n, e.val.N)
	if e.part == "multinomial" {
		m = methods[name].make(c, func(k string) float64 { return c.Params.Get(name, k) }, n)
		b = experiment.Budget{Samples: int64(c.Work), Points: c.Points}
	} else {
		m = bmethods[name].make(c, func(k string) float64 { return c.Params.Get("b."+name, k) }, n)
		b = experiment.Budget{Drawn: int64(c.BDrawn), Points: c.Points}
	}
	s := optim.Settings{Seed: e.seed*1000 + 11, ProjectX: e.proj}
	tr, err := experiment.Run(e.prob, e.x0, e.y0, m, s, b, e.prob,
		func(st *optim.State) map[string]float64 { return e.metrics(st, experiment.LowerIterate(m, st)) })
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.part, name, err)
	}
	return tr, nil
}

// finish adds the objective error Φ − Φ* (part stable; clipped at 1e-8 for
// the logarithmic plots) to the checkpoints and returns the run's row.
func (e *setup) finish(name string, tr *experiment.Trace) runRow {
	if e.part == "stable" {
		for _, pt := range tr.Points {
			pt.Metrics["obj_error"] = math.Max(pt.Metrics["phi"]-e.phiStar, 1e-8)
		}
	}
	last := tr.Last()
	mt := last.Metrics
	row := runRow{Part: e.part, Method: name, Seed: e.seed, Iters: tr.State.Iter, Seconds: last.Seconds, Samples: last.Samples, Drawn: last.Drawn,
		ValLoss: mt["val_loss"], ValAcc: mt["val_acc"], TestLoss: mt["test_loss"], TestAcc: mt["test_acc"], ObjError: math.NaN(),
		RefitValLoss: math.NaN(), RefitTestAcc: math.NaN()}
	if e.part == "stable" {
		row.ObjError = mt["obj_error"]
	} else {
		y := slices.Clone(tr.State.Y)
		if _, err := experiment.SolveInner(e.prob.Problem, tr.State.X, y, experiment.InnerSettings{Tol: 1e-6, MaxIter: 300}); err == nil {
			row.RefitValLoss, _ = experiment.Linear(e.val, y, nil, e.classes)
			_, row.RefitTestAcc = experiment.Linear(e.test, y, nil, e.classes)
		}
	}
	if tr.Err != nil {
		row.Error = tr.Err.Error()
	}
	return row
}

func displayName(part, name string) string {
	if part == "stable" {
		return bmethods[name].name
	}
	return methods[name].name
}

// plots draws the median over seeds of each metric against time and
// against the part's sample axis.
func plots(path func(string) string, c config, all map[string][]*experiment.Trace, out *outcome) error {
	for _, part := range c.Parts {
		names, axes := c.Methods, []experiment.Axis{experiment.Seconds, experiment.Samples}
		metrics := []string{"val_loss", "val_acc", "test_loss", "test_acc"}
		if part == "stable" {
			names, axes = c.BMethods, []experiment.Axis{experiment.Seconds, experiment.Drawn}
			metrics = append([]string{"obj_error"}, metrics...)
		}
		for _, metric := range metrics {
			for _, axis := range axes {
				var series []report.Series
				for _, name := range names {
					series = append(series, experiment.MedianSeries(displayName(part, name), all[part+"|"+name], axis, metric))
				}
				if part == "multinomial" {
					var vals []float64
					for _, seed := range c.Seeds {
						vals = append(vals, out.Reference[fmt.Sprintf("multinomial_fixed_seed%d_%s", seed, metric)])
					}
					series = append(series, experiment.Flat("fixed λ = 0 (no tuning)", experiment.MedianOf(vals), experiment.MaxX(series)))
				}
				axisName := map[experiment.Axis]string{experiment.Seconds: "time", experiment.Samples: "samples", experiment.Drawn: "drawn"}[axis]
				title := map[string]string{"multinomial": "per-pixel penalties, multinomial logistic regression",
					"stable": "paper 000's problem on two Fashion-MNIST classes"}[part]
				label := strings.ReplaceAll(metric, "_", " ")
				if metric == "obj_error" {
					label = "objective error Φ(x) − Φ*"
				}
				pl := report.Plot{Title: title, XLabel: axis.Label(), YLabel: label, Series: series, FitAfterStart: true}
				if axis == experiment.Seconds {
					pl.XScale = report.Log // as hypercleaning's: a method done in 1 s is no vertical line at the axis
				}
				if strings.HasSuffix(metric, "acc") {
					pl.YScale = report.Linear
				}
				if err := pl.Save(path(fmt.Sprintf("%s_%s_vs_%s.png", part, metric, axisName))); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// summarize fills the result line with medians over the seeds whose run
// succeeded, with their 95% intervals when there are several seeds
// (experiment.Summarize), and the per-seed figures behind the claims: how
// much each method's refit lowers the validation loss of the fixed
// penalties (part multinomial), and STABLE's objective error over BSA's
// and TTSA's (part stable). A method whose runs all failed has no figures
// (its runs are in the key "failed").
func summarize(c config, out *outcome) {
	put := func(k string, v []float64) {
		switch sm := experiment.Summarize(v); {
		case sm.N > 1:
			sm.AddResult(out.Result, k)
		case sm.N == 1:
			out.Result[k] = math.Round(sm.Median*1e4) / 1e4
		}
	}
	for _, part := range c.Parts {
		names := c.Methods
		if part == "stable" {
			names = c.BMethods
		}
		for _, name := range names {
			k := part + "_" + name + "_"
			put(k+"test_acc", runFigures(out, part, name, func(r runRow) float64 { return r.TestAcc }))
			if part == "stable" {
				put(k+"obj_error", runFigures(out, part, name, func(r runRow) float64 { return r.ObjError }))
				continue
			}
			put(k+"val_loss", runFigures(out, part, name, func(r runRow) float64 { return r.ValLoss }))
			put(k+"refit_val_loss", runFigures(out, part, name, func(r runRow) float64 { return r.RefitValLoss }))
			put(k+"refit_test_acc", runFigures(out, part, name, func(r runRow) float64 { return r.RefitTestAcc }))
			put(k+"refit_gain", runFigures(out, part, name, func(r runRow) float64 {
				return out.Reference[fmt.Sprintf("multinomial_fixed_seed%d_val_loss", r.Seed)] - r.RefitValLoss
			}))
		}
		if part == "multinomial" {
			var acc, vl []float64
			for _, seed := range c.Seeds {
				acc = append(acc, out.Reference[fmt.Sprintf("multinomial_fixed_seed%d_test_acc", seed)])
				vl = append(vl, out.Reference[fmt.Sprintf("multinomial_fixed_seed%d_val_loss", seed)])
			}
			put("multinomial_fixed_test_acc", acc)
			put("multinomial_fixed_val_loss", vl)
			continue
		}
		// Paper 000's claim, per seed: STABLE's objective error against
		// the baselines'.
		stable := map[uint64]float64{}
		for _, r := range out.Runs {
			if r.Part == "stable" && r.Method == "stable" && r.Error == "" {
				stable[r.Seed] = r.ObjError
			}
		}
		for _, b := range []string{"bsa", "ttsa"} {
			put("stable_ratio_stable_"+b, runFigures(out, "stable", b, func(r runRow) float64 {
				if v, ok := stable[r.Seed]; ok {
					return v / r.ObjError
				}
				return math.NaN()
			}))
		}
	}
}

// runFigures returns get of the runs of method name in part that
// succeeded.
func runFigures(out *outcome, part, name string, get func(runRow) float64) []float64 {
	var v []float64
	for _, r := range out.Runs {
		if r.Part == part && r.Method == name && r.Error == "" {
			v = append(v, get(r))
		}
	}
	return v
}

// printSummary prints, per part, each method's figures over the seeds,
// median [95% interval], and every failed run.
func printSummary(w io.Writer, c config, out *outcome) {
	for _, part := range c.Parts {
		names := c.Methods
		if part == "stable" {
			names = c.BMethods
		}
		fmt.Fprintf(w, "part %s, over %d seed(s): median [95%% interval]\n", part, len(c.Seeds))
		for _, name := range names {
			for _, r := range out.Runs {
				if r.Part == part && r.Method == name && r.Error != "" {
					fmt.Fprintf(w, "  %-14s seed %d FAILED at iteration %d: %s\n", displayName(part, name), r.Seed, r.Iters, r.Error)
				}
			}
			sum := func(get func(runRow) float64) string {
				return experiment.Summarize(runFigures(out, part, name, get)).Format("%.4f")
			}
			if len(runFigures(out, part, name, func(runRow) float64 { return 0 })) == 0 {
				continue
			}
			if part == "stable" {
				fmt.Fprintf(w, "  %-14s test acc %s  Φ−Φ* %s\n", displayName(part, name), sum(func(r runRow) float64 { return r.TestAcc }),
					experiment.Summarize(runFigures(out, part, name, func(r runRow) float64 { return r.ObjError })).Format("%.3g"))
				continue
			}
			fmt.Fprintf(w, "  %-14s val loss %s  test acc %s  refit: val loss %s test acc %s\n", displayName(part, name),
				sum(func(r runRow) float64 { return r.ValLoss }), sum(func(r runRow) float64 { return r.TestAcc }),
				sum(func(r runRow) float64 { return r.RefitValLoss }), sum(func(r runRow) float64 { return r.RefitTestAcc }))
		}
	}
}
