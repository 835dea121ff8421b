// Command metalearn meta-trains the four-block CNN of paper 003 (App. A)
// for few-shot classification of rotated Fashion-MNIST classes with
// ITD-BiO, AID-BiO (constant and increasing inner steps), ANIL, MAML and
// first-order MAML (FOMAML), and compares them on the meta-test classes
// with two reference baselines: a head fit on a random (untrained)
// backbone and on a backbone pre-trained by plain classification of the
// meta-train classes.
//
// The ten Fashion-MNIST classes are split 6/2/2 into meta-train,
// meta-validation (unused) and meta-test base classes; each base class
// turned by 0, 90, 180 and 270 degrees gives four classes (24/8/8). A task
// is N-way K-shot with Q query images per class. Training draws tasks from
// the training images of the meta-train classes; evaluation fits a head on
// each of the same fixed test tasks (test images of the meta-test classes)
// for every method and reports the mean query accuracy with a 95%
// confidence interval.
//
// -mode quick (the default) runs in a few minutes on two cores on
// the embedded Fashion-MNIST subset with a reduced configuration (16
// filters, 5 queries per class, 5-way 1-shot only, 4 tasks per
// meta-iteration, short training, 600 test tasks); -mode full uses the
// full data set and the paper's sizes (32 filters, 15 queries, 1-shot and
// 5-shot, 32 tasks per meta-iteration, 2000 meta-iterations). Every flag
// overrides the mode's value.
//
// Training is checkpointed every -checkpoint-every meta-iterations into
// -out/checkpoints (atomically, with a checksum); -resume continues each
// run from its checkpoint, drawing the same tasks as an uninterrupted run.
// The program writes train_log.csv, test_curve.csv, results.csv,
// summary.json and PNG plots of the meta-train and meta-test accuracy
// against training time to -out, and ends with one line
// "result: key=value ...". Each train_log.csv row is one meta-iteration:
// the batch's query loss and accuracy, ‖meta-gradient‖, and whether the
// head's inner loop converged (inner_ratio: the largest over the tasks of
// ‖∇y g(y_T)‖/‖∇y g(y_0)‖; 1 or more means the inner step is too large for
// the head's curvature) and, for AID-BiO, CG's largest relative residual
// (cg_residual); see meta.StepStats.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

// config holds every setting of a run.
type config struct {
	Mode                 string
	Data                 string
	Seed                 uint64
	Seeds                []uint64
	Out                  string
	Methods              []string
	Shots                []int
	Ways, Queries        int
	Filters              int
	Lambda               float64
	Iters                int
	MaxSeconds           float64
	Batch                int
	Steps, ANILSteps     int
	MAMLSteps            int
	Growth               float64
	Alpha, ANILAlpha     float64
	MAMLAlpha            float64
	CG                   int
	LR                   float64
	FirstOrder           bool
	Float32              bool
	Backprop             string
	EvalTasks            int
	EvalEvery, CurveSize int
	ProbeSteps           int
	PretrainSteps        int
	PretrainBatch        int
	CheckpointEvery      int
	Resume               bool
	Threads              int
	Workers              int
	NATS                 string
	Quiet                bool
	Baselines            bool
	PlotCPU              bool

	cluster *dist.Cluster // the workers of -workers, nil in process
}

// modes holds the values of the flags that differ between modes.
var modes = map[string]map[string]string{
	"quick": {"data": "embedded", "shots": "1", "queries": "5", "filters": "16", "batch": "4", "iters": "150", "eval-every": "50",
		"curve-tasks": "60", "pretrain-steps": "150"},
	"full": {"data": "fashion", "shots": "1,5", "queries": "15", "filters": "32", "batch": "32", "iters": "2000",
		"eval-every": "100", "curve-tasks": "200", "pretrain-steps": "1000"},
}

func main() {
	dist.ServeIfWorker()
	experiment.Main("metalearn", parseFlags, func(c config) error {
		_, err := run(c)
		return err
	})
}

var allMethods = []string{"itd", "aid", "aid-inc", "anil", "maml", "fomaml"}

// maxSize bounds the sizes (tasks, images, steps): far beyond the
// paper's, a typo.
const maxSize = 100_000

// parseFlags reads and checks the command line, without doing any work.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var methods, shots, seeds string
	fs.StringVar(&c.Mode, "mode", "quick", "quick: embedded data, reduced sizes, a few minutes on two cores; full: the full data set and the paper's sizes. The mode sets the flags marked (mode); any flag given overrides it")
	fs.StringVar(&c.Data, "data", "embedded", "(mode) the images: "+experiment.DataHelp)
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed: class split, initial backbone, tasks, minibatches")
	fs.StringVar(&seeds, "seeds", "", "comma-separated seeds: run the whole experiment once per seed (in -out/seed-N, each as with -seed N) and write the median over the seeds with its 95% interval (seeds.csv, pairs.csv, seeds_test_accuracy_*.png); empty: the one -seed")
	fs.StringVar(&c.Out, "out", "out/metalearn", "folder for CSV, JSON, PNG output and checkpoints")
	fs.StringVar(&methods, "methods", "itd,aid,aid-inc,anil,maml,fomaml", "meta-learning methods, comma-separated: itd (ITD-BiO), aid (AID-BiO, constant D), aid-inc (AID-BiO, D_k = ⌈c(k+1)^{1/4}⌉), anil, maml (MAML: the whole network adapted, second order), fomaml (first-order MAML); the random and pre-trained baselines run too unless -baselines=false")
	fs.StringVar(&shots, "shots", "1", "(mode) shots K per class, comma-separated: one experiment each (full: 1,5)")
	fs.IntVar(&c.Ways, "ways", 5, "classes N per task")
	fs.IntVar(&c.Queries, "queries", 5, "(mode) query images per class, in training and evaluation (full: 15)")
	fs.IntVar(&c.Filters, "filters", 16, "(mode) filters of each of the four 3×3 convolutions (full: 32, the paper's)")
	fs.Float64Var(&c.Lambda, "lambda", 0.1, "λ of the head's penalty (λ/2)‖w‖² in the lower objective (ITD, AID, baselines; ANIL uses λ = 0)")
	fs.IntVar(&c.Iters, "iters", 150, "(mode) meta-iterations per method (full: 2000)")
	fs.Float64Var(&c.MaxSeconds, "max-seconds", 0, "stop each method's training after this many seconds of training time (0: no limit); -iters still caps it")
	fs.IntVar(&c.Batch, "batch", 4, "(mode) tasks per meta-iteration (full: 32, the paper's)")
	fs.IntVar(&c.Steps, "steps", 50, "inner gradient steps T (ITD) and D (AID constant); with -backprop features they cost little")
	fs.IntVar(&c.ANILSteps, "anil-steps", 5, "ANIL's inner steps (the paper's 5)")
	fs.IntVar(&c.MAMLSteps, "maml-steps", 3, "inner steps of MAML and FOMAML on the whole network (the paper's 3)")
	fs.Float64Var(&c.Growth, "growth", 10, "c of AID-increasing's D_k = ⌈c(k+1)^{1/4}⌉ (10: D_0 = 10, D_150 = 35, D_1000 = 57)")
	fs.Float64Var(&c.Alpha, "alpha", 0.1, "inner step size α of ITD, AID and the baselines' head fit (AID needs α·L < 2 for the inner loop to converge, L the head's curvature)")
	fs.Float64Var(&c.ANILAlpha, "anil-alpha", 0.1, "ANIL's inner step size (the paper's 0.1)")
	fs.Float64Var(&c.MAMLAlpha, "maml-alpha", 0.5, "inner step size of MAML and FOMAML (the paper's 0.5)")
	fs.IntVar(&c.CG, "cg", 10, "AID's conjugate-gradient steps N")
	fs.Float64Var(&c.LR, "lr", 1e-3, "Adam's step size for the outer variables (backbone, ANIL's head initialization, pre-training)")
	fs.BoolVar(&c.FirstOrder, "anil-first-order", false, "first-order ANIL (default: full, the meta-gradient flows through the inner steps)")
	fs.BoolVar(&c.Float32, "float32", false, "meta-train in float32 arithmetic (meta.Settings.Float32: the tasks' values, adjoints and second-order products in float32; meta-gradients agree with float64 to about 1e-6 relative); pre-training and evaluation stay float64")
	fs.StringVar(&c.Backprop, "backprop", "features", "how derivatives of ITD, AID and ANIL reach the backbone: features (chain rule at the features, one backward pass per image set) or direct (graph.FixX on the whole CNN, one backward pass per mixed product); same meta-gradient. MAML always differentiates through the whole CNN")
	fs.IntVar(&c.EvalTasks, "eval-tasks", 600, "meta-test tasks of the final evaluation (the same tasks for every method and baseline)")
	fs.IntVar(&c.EvalEvery, "eval-every", 50, "(mode) meta-iterations between evaluations for the meta-test accuracy curve (full: 100)")
	fs.IntVar(&c.CurveSize, "curve-tasks", 60, "(mode) meta-test tasks of each curve evaluation (the first ones of the final evaluation; full: 200)")
	fs.IntVar(&c.ProbeSteps, "probe-steps", 100, "gradient steps of the baselines' head fit")
	fs.IntVar(&c.PretrainSteps, "pretrain-steps", 150, "(mode) Adam steps of the pre-trained baseline (full: 1000)")
	fs.IntVar(&c.PretrainBatch, "pretrain-batch", 64, "images per pre-training step")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", 200, "meta-iterations (or pre-training steps) between checkpoints")
	fs.BoolVar(&c.Resume, "resume", false, "continue each run from its checkpoint in -out/checkpoints (runs without one start afresh; finished runs are not redone)")
	fs.IntVar(&c.Threads, "threads", runtime.GOMAXPROCS(0), fmt.Sprintf("tasks processed in parallel in this process (training without -workers, baselines, evaluation), 1 to %d", experiment.MaxWorkers()))
	fs.IntVar(&c.Workers, "workers", 0, "worker processes computing the meta-training tasks' meta-gradients, a batch's tasks spread over them (package dist; the same results, bit for bit; the CPU seconds reported are then this process's alone); 0: in this process")
	fs.StringVar(&c.NATS, "nats", "", "a NATS server URL to use instead of an embedded one; the -workers workers are then not started here: start them on any machine (docs/distributed.md)")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress report")
	fs.BoolVar(&c.PlotCPU, "plot-cpu", false, "plot accuracy against training CPU time instead of wall time (fairer on a machine shared with other jobs)")
	fs.BoolVar(&c.Baselines, "baselines", true, "run the random and pre-trained baselines (false: the methods only, for tuning)")
	experiment.Usage(fs, "metalearn", "Meta-trains a CNN backbone for few-shot classification with ITD-BiO, AID-BiO, ANIL, MAML\nand FOMAML and compares them with a random and a pre-trained backbone on the meta-test classes.", modes, nil)
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	ck.Data("data", c.Data)
	ck.Out("out", c.Out)
	c.Methods = ck.Names("methods", methods, allMethods)
	if seeds != "" {
		c.Seeds = ck.Seeds("seeds", seeds)
	}
	c.Shots = ck.Ints("shots", shots, 1, 1000)
	// The meta-test split has 2 base classes × 4 rotations.
	ck.Int("ways", c.Ways, 2, 8)
	for _, f := range []struct {
		name   string
		v, low int
	}{{"queries", c.Queries, 1}, {"filters", c.Filters, 1}, {"iters", c.Iters, 1}, {"batch", c.Batch, 1}, {"steps", c.Steps, 1},
		{"anil-steps", c.ANILSteps, 1}, {"maml-steps", c.MAMLSteps, 1}, {"cg", c.CG, 1}, {"eval-tasks", c.EvalTasks, 2}, {"eval-every", c.EvalEvery, 1},
		{"curve-tasks", c.CurveSize, 2}, {"probe-steps", c.ProbeSteps, 1}, {"pretrain-steps", c.PretrainSteps, 1},
		{"pretrain-batch", c.PretrainBatch, 1}, {"checkpoint-every", c.CheckpointEvery, 1}} {
		ck.Int(f.name, f.v, f.low, maxSize)
	}
	ck.Float("lambda", c.Lambda, 0, 1e6)
	ck.Float("max-seconds", c.MaxSeconds, 0, 1e9)
	// D_k = ⌈c(k+1)^{1/4}⌉ inner steps: c beyond maxSize is a typo.
	ck.Float("growth", c.Growth, 1e-3, maxSize)
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha", c.Alpha}, {"anil-alpha", c.ANILAlpha}, {"maml-alpha", c.MAMLAlpha}, {"lr", c.LR}} {
		ck.Positive(f.name, f.v)
	}
	if c.Backprop != "features" && c.Backprop != "direct" {
		ck.Failf("backprop", "%q: give features or direct", c.Backprop)
	}
	ck.Workers("threads", c.Threads)
	ck.Int("workers", c.Workers, 0, 64)
	if c.NATS != "" {
		if err := dist.CheckURL(c.NATS); err != nil {
			ck.Failf("nats", "%v", err)
		} else if c.Workers == 0 {
			ck.Failf("nats", "%s with -workers 0: give the number of workers that compute the tasks", c.NATS)
		}
	}
	c.CurveSize = min(c.CurveSize, c.EvalTasks)
	return c, ck.Err()
}

// where says where the meta-training tasks run.
func (c config) where() string {
	if c.Workers == 0 {
		return fmt.Sprintf("%d tasks in parallel in this process", c.Threads)
	}
	return fmt.Sprintf("tasks on %d worker processes", c.Workers)
}

// workerPool is the pool of the workers: BILEVEL_DIST_POOL or "metalearn".
func workerPool() string {
	if p := os.Getenv(dist.EnvPool); p != "" {
		return p
	}
	return "metalearn"
}

// cnnSettings are the backbone's settings.
func (c config) cnnSettings() models.CNNSettings {
	return models.CNNSettings{Filters: c.Filters, Lambda: c.Lambda, Seed: c.Seed}
}

// learnerSettings maps a method name to the learner's settings.
func learnerSettings(c config, method string) (meta.Settings, error) {
	s := meta.Settings{Steps: c.Steps, Alpha: c.Alpha, CGSteps: c.CG, TaskBatch: c.Batch,
		Outer: optim.Adam{LR: c.LR}, Workers: c.Threads, Float32: c.Float32}
	if c.Backprop == "direct" {
		s.Backprop = meta.Direct
	}
	switch method {
	case "itd":
		s.Gradient = meta.ITD
	case "aid":
		s.Gradient = meta.AID
	case "aid-inc":
		s.Gradient, s.Growth, s.Steps = meta.AID, c.Growth, 0
	case "anil":
		s.Gradient, s.Steps, s.Alpha, s.FirstOrder = meta.ANIL, c.ANILSteps, c.ANILAlpha, c.FirstOrder
	case "maml", "fomaml":
		s.Gradient, s.Steps, s.Alpha, s.FirstOrder = meta.MAML, c.MAMLSteps, c.MAMLAlpha, method == "fomaml"
	default:
		return s, fmt.Errorf("-methods: unknown method %q (give some of %s)", method, strings.Join(allMethods, ", "))
	}
	return s, nil
}

// Rows of the logs.
type trainRow struct {
	Setting, Method   string
	Iter, InnerSteps  int
	Seconds           float64 // training time at the end of the iteration
	Loss, Accuracy    float64 // batch means
	GradNorm, IterSec float64
	// InnerRatio and CGResidual are meta.StepStats's: whether the inner
	// loop converged and how far CG left its system (AID).
	InnerRatio, CGResidual float64
	CPUSec                 float64 // CPU time of the process during the iteration, all threads
	CPUSeconds             float64 // training CPU time at the end of the iteration
}

type curveRow struct {
	Setting, Method string
	Iter            int
	Seconds         float64 // training time at the evaluation
	CPUSeconds      float64 // training CPU time at the evaluation
	Accuracy, CI95  float64
}

type resultRow struct {
	Setting, Method string
	Accuracy, CI95  float64
	Tasks, Iters    int
	TrainSeconds    float64
	SecPerIter      float64 // median wall time of a meta-iteration
	CPUPerIter      float64 // median CPU time of a meta-iteration (unaffected by other load)
	Note            string
	// Error says why the method's training stopped (a non-finite
	// meta-gradient, say); its other figures are then those of the last
	// iteration reached, not a result.
	Error string `json:",omitempty"`
}

// runCheckpoint is the checkpoint of one training run: everything needed
// to continue it and to redo its outputs.
type runCheckpoint struct {
	Key        string // setting, method and every setting that shapes the run
	State      meta.Snapshot
	Seconds    float64 // training wall time so far
	CPUSeconds float64 // training CPU time so far
	Train      []trainRow
	Curve      []curveRow
	Final      *resultRow
}

// setting is one N-way K-shot experiment.
type setting struct {
	c                config
	name             string // "5w1s"
	shots            int
	train, test      *meta.Tasks
	ckptDir          string
	trainLog         []trainRow
	curve            []curveRow
	results          []resultRow
	pretrained, phi0 []float64
}

// run runs the experiment for the seed, or for each of the seeds and their
// summary, and returns the result line's values.
func run(c config) (map[string]any, error) {
	if c.Workers > 0 {
		start := c.Workers
		if c.NATS != "" {
			start = 0 // the user starts them
		}
		var err error
		if c.cluster, err = dist.StartCluster(dist.ClusterSettings{URL: c.NATS, Workers: start, Pool: workerPool()}); err != nil {
			return nil, err
		}
		defer c.cluster.Close()
	}
	if len(c.Seeds) > 0 {
		return runSeeds(c)
	}
	res, _, err := runSeed(c)
	return res, err
}

// runSeed runs the experiment for the seed c.Seed and returns the result
// line's values and the settings with their logs and results.
func runSeed(c config) (map[string]any, []*setting, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, nil, err
	}
	ckptDir := filepath.Join(c.Out, "checkpoints")
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		return nil, nil, err
	}
	images, err := experiment.LoadImages(c.Data)
	if err != nil {
		return nil, nil, err
	}
	train, test := images.Train, images.Test
	split, err := data.SplitClasses(10, c.Seed, 6, 2, 2)
	if err != nil {
		return nil, nil, err
	}
	fmt.Printf("meta-train base classes %v, meta-test %v (meta-validation %v unused); %s\n", split[0], split[2], split[1], c.where())

	var pre []float64
	var preSec float64
	if c.Baselines {
		if pre, preSec, err = pretrain(c, train, split[0], ckptDir); err != nil {
			return nil, nil, err
		}
	}
	// The random backbone is the initial one of every learner.
	l0, err := meta.NewLearner(meta.Settings{}, c.cnnSettings(), c.Ways)
	if err != nil {
		return nil, nil, err
	}
	phi0 := l0.Backbone()

	result := map[string]any{}
	var all []*setting
	var failed []string
	for _, k := range c.Shots {
		e := &setting{c: c, name: fmt.Sprintf("%dw%ds", c.Ways, k), shots: k, ckptDir: ckptDir, pretrained: pre, phi0: phi0,
			train: &meta.Tasks{Data: train, Base: split[0], Ways: c.Ways, Shots: k, Queries: c.Queries, Seed: c.Seed*1000 + uint64(k)},
			test:  &meta.Tasks{Data: test, Base: split[2], Ways: c.Ways, Shots: k, Queries: c.Queries, Seed: c.Seed*1000 + 500 + uint64(k)}}
		for _, ts := range []*meta.Tasks{e.train, e.test} {
			if err := ts.Check(); err != nil {
				return nil, nil, err
			}
		}
		if c.Baselines {
			if err := e.baselines(preSec); err != nil {
				return nil, nil, err
			}
		}
		for _, m := range c.Methods {
			if err := e.trainMethod(m); err != nil {
				return nil, nil, err
			}
		}
		all = append(all, e)
		for _, r := range e.results {
			key := e.name + "_" + strings.ReplaceAll(r.Method, "-", "_")
			if r.Error != "" {
				failed = append(failed, key)
				continue
			}
			result[key+"_acc"] = round(r.Accuracy, 4)
			result[key+"_ci95"] = round(r.CI95, 4)
			if r.SecPerIter > 0 {
				result[key+"_sec_per_iter"] = round(r.SecPerIter, 4)
				result[key+"_cpu_per_iter"] = round(r.CPUPerIter, 4)
			}
		}
	}
	if err := write(path, c, all); err != nil {
		return nil, nil, err
	}
	failErr := experiment.Failed(result, failed, len(c.Methods)*len(c.Shots))
	result["seconds"] = round(time.Since(start).Seconds(), 1)
	report.Result(os.Stdout, result)
	return result, all, failErr
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// progress returns a progress report on standard error, or none with
// -quiet.
func progress(c config, label string, total int) *report.Progress {
	if c.Quiet {
		return nil
	}
	return report.NewProgress(os.Stderr, label, total)
}

// pretrainCheckpoint is the checkpoint of the pre-trained baseline.
type pretrainCheckpoint struct {
	Key     string
	State   meta.Snapshot
	Seconds float64
}

// pretrain trains (or, with -resume, continues or reloads) the
// pre-trained backbone and returns it with its training time.
func pretrain(c config, train *data.Dataset, base []int, dir string) ([]float64, float64, error) {
	p, err := meta.NewPretrainer(train, base, c.cnnSettings(), meta.PretrainSettings{Batch: c.PretrainBatch,
		Outer: optim.Adam{LR: c.LR}, Workers: c.Threads, Seed: c.Seed})
	if err != nil {
		return nil, 0, err
	}
	key := fmt.Sprintf("pretrain data=%s seed=%d filters=%d batch=%d lr=%g", c.Data, c.Seed, c.Filters, c.PretrainBatch, c.LR)
	path := filepath.Join(dir, "pretrain.ckpt")
	var ck pretrainCheckpoint
	if c.Resume {
		switch err := meta.ReadCheckpoint(path, &ck); {
		case errors.Is(err, fs.ErrNotExist):
			ck = pretrainCheckpoint{}
		case err != nil:
			return nil, 0, err
		case ck.Key != key:
			return nil, 0, fmt.Errorf("checkpoint %s was made with other settings (%s); now %s: remove it or drop -resume", path, ck.Key, key)
		default:
			if err := p.Restore(ck.State); err != nil {
				return nil, 0, fmt.Errorf("checkpoint %s: %w", path, err)
			}
		}
	}
	done := p.Snapshot().Iter
	if done >= c.PretrainSteps {
		return p.Backbone(), ck.Seconds, nil
	}
	bar := progress(c, "pre-training", c.PretrainSteps-done)
	save := func() error {
		ck = pretrainCheckpoint{Key: key, State: p.Snapshot(), Seconds: ck.Seconds}
		return meta.WriteCheckpoint(path, ck)
	}
	var accs []float64
	for k := done; k < c.PretrainSteps; k++ {
		st, err := p.Step()
		if err != nil {
			return nil, 0, err
		}
		ck.Seconds += st.Seconds
		accs = append(accs, st.Accuracy)
		bar.Step(fmt.Sprintf("loss %.3f, running accuracy %.1f%% (%d classes)", st.Loss, 100*runningMean(accs, 20), p.Classes()))
		if (k+1)%c.CheckpointEvery == 0 {
			if err := save(); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := save(); err != nil {
		return nil, 0, err
	}
	return p.Backbone(), ck.Seconds, nil
}

func runningMean(v []float64, n int) float64 {
	v = v[max(0, len(v)-n):]
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// baselinesCheckpoint keeps the baselines' results of one setting, so
// that -resume does not evaluate them again.
type baselinesCheckpoint struct {
	Key     string
	Results []resultRow
}

// baselines evaluates a head on the random and on the pre-trained
// backbone (or, with -resume, reloads the results).
func (e *setting) baselines(preSec float64) error {
	c := e.c
	key := fmt.Sprintf("%s baselines data=%s seed=%d filters=%d queries=%d lambda=%g eval-tasks=%d probe-steps=%d alpha=%g pretrain-steps=%d pretrain-batch=%d lr=%g",
		e.name, c.Data, c.Seed, c.Filters, c.Queries, c.Lambda, c.EvalTasks, c.ProbeSteps, c.Alpha, c.PretrainSteps, c.PretrainBatch, c.LR)
	path := filepath.Join(e.ckptDir, e.name+"-baselines.ckpt")
	if c.Resume {
		var ck baselinesCheckpoint
		switch err := meta.ReadCheckpoint(path, &ck); {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case ck.Key == key:
			for _, r := range ck.Results {
				fmt.Printf("%s %-10s meta-test accuracy %.2f%% ± %.2f%% (%d tasks) [checkpoint]\n", e.name, r.Method, 100*r.Accuracy, 100*r.CI95, r.Tasks)
			}
			e.results = append(e.results, ck.Results...)
			return nil
		}
	}
	first := len(e.results)
	defer func() {
		if len(e.results) == first+2 {
			if err := meta.WriteCheckpoint(path, baselinesCheckpoint{Key: key, Results: e.results[first:]}); err != nil {
				fmt.Fprintln(os.Stderr, "metalearn:", err)
			}
		}
	}()
	ev := &meta.Evaluator{CNN: c.cnnSettings(), Ways: c.Ways, Steps: c.ProbeSteps, Alpha: c.Alpha, Workers: c.Threads}
	for _, b := range []struct {
		name string
		phi  []float64
		sec  float64
		note string
	}{
		{"random", e.phi0, 0, "head on the initial backbone"},
		{"pretrained", e.pretrained, preSec, fmt.Sprintf("head on a backbone pre-trained %d steps", c.PretrainSteps)},
	} {
		t := time.Now()
		acc, err := ev.Evaluate(b.phi, e.test, 0, c.EvalTasks)
		if err != nil {
			return fmt.Errorf("%s baseline: %w", b.name, err)
		}
		fmt.Printf("%s %-10s meta-test accuracy %v [evaluation %.1fs]\n", e.name, b.name, acc, time.Since(t).Seconds())
		e.results = append(e.results, resultRow{Setting: e.name, Method: b.name, Accuracy: acc.Mean, CI95: acc.CI95,
			Tasks: acc.N, TrainSeconds: b.sec, Note: b.note})
	}
	return nil
}

// trainMethod meta-trains one method (continuing from its checkpoint with
// -resume), then evaluates it on the test tasks.
func (e *setting) trainMethod(method string) error {
	c := e.c
	s, err := learnerSettings(c, method)
	if err != nil {
		return err
	}
	if c.cluster != nil {
		r, err := dist.NewMetaTasks(c.cluster.Conn, s, c.cnnSettings(), c.Ways, dist.Settings{Workers: c.Workers, Pool: workerPool()})
		if err != nil {
			return fmt.Errorf("%s %s on %d workers: %w", e.name, method, c.Workers, err)
		}
		defer r.Close()
		s.Runner = r
	}
	l, err := meta.NewLearner(s, c.cnnSettings(), c.Ways)
	if err != nil {
		return err
	}
	s = l.Settings()
	key := fmt.Sprintf("%s %s data=%s seed=%d filters=%d queries=%d lambda=%g batch=%d steps=%d growth=%g alpha=%g cg=%d lr=%g first-order=%v eval-every=%d curve=%d",
		e.name, method, c.Data, c.Seed, c.Filters, c.Queries, c.Lambda, s.TaskBatch, s.Steps, s.Growth, s.Alpha, s.CGSteps, c.LR, s.FirstOrder, c.EvalEvery, c.CurveSize)
	if s.Float32 {
		key += " float32" // float64 runs keep the keys of their earlier checkpoints
	}
	path := filepath.Join(e.ckptDir, e.name+"-"+method+".ckpt")
	var ck runCheckpoint
	if c.Resume {
		switch err := meta.ReadCheckpoint(path, &ck); {
		case errors.Is(err, fs.ErrNotExist):
			ck = runCheckpoint{}
		case err != nil:
			return err
		case ck.Key != key:
			return fmt.Errorf("checkpoint %s was made with other settings (%s); now %s: remove it or drop -resume", path, ck.Key, key)
		default:
			if err := l.Restore(ck.State); err != nil {
				return fmt.Errorf("checkpoint %s: %w", path, err)
			}
		}
	}
	ck.Key = key
	save := func() error {
		ck.State = l.Snapshot()
		return meta.WriteCheckpoint(path, ck)
	}
	if ck.Final != nil && (ck.State.Iter >= c.Iters || c.MaxSeconds > 0 && ck.Seconds >= c.MaxSeconds) {
		fmt.Printf("%s %-10s already trained (checkpoint %s)\n", e.name, method, path)
		e.collect(ck)
		return nil
	}
	ck.Final = nil
	label := fmt.Sprintf("%s %-7s", e.name, method)
	bar := progress(c, label, c.Iters-l.Snapshot().Iter)
	var accs []float64
	for _, r := range ck.Train {
		accs = append(accs, r.Accuracy)
	}
	tasks := make([]*data.Task, s.TaskBatch)
	lastTest := ""
	if n := len(ck.Curve); n > 0 {
		lastTest = fmt.Sprintf(", meta-test %.1f%%", 100*ck.Curve[n-1].Accuracy)
	}
	evalCurve := func() error {
		acc, err := l.Evaluate(e.test, 0, c.CurveSize)
		if err != nil {
			return err
		}
		ck.Curve = append(ck.Curve, curveRow{Setting: e.name, Method: method, Iter: l.Snapshot().Iter, Seconds: ck.Seconds,
			CPUSeconds: ck.CPUSeconds, Accuracy: acc.Mean, CI95: acc.CI95})
		lastTest = fmt.Sprintf(", meta-test %.1f%%", 100*acc.Mean)
		return nil
	}
	if len(ck.Curve) == 0 {
		if err := evalCurve(); err != nil {
			return err
		}
	}
	firstBad, _ := unconverged(ck.Train) // a resumed run has warned already
	for k := l.Snapshot().Iter; k < c.Iters; k++ {
		if c.MaxSeconds > 0 && ck.Seconds >= c.MaxSeconds {
			fmt.Printf("%s %-10s stopped after %.0fs of training at iteration %d (-max-seconds)\n", e.name, method, ck.Seconds, k)
			break
		}
		for j := range tasks {
			if tasks[j], err = e.train.Task(k*s.TaskBatch+j, tasks[j]); err != nil {
				return err
			}
		}
		cpu0 := cpuSeconds()
		st, err := l.Step(tasks)
		if err != nil {
			// The method failed: reported as such, and the others go on.
			msg := fmt.Sprintf("failed at iteration %d: %v", k, err)
			fmt.Printf("%s %-10s %s\n", e.name, method, msg)
			e.trainLog = append(e.trainLog, ck.Train...)
			e.curve = append(e.curve, ck.Curve...)
			e.results = append(e.results, resultRow{Setting: e.name, Method: method, Iters: k, TrainSeconds: ck.Seconds, Error: msg})
			return nil
		}
		cpu := cpuSeconds() - cpu0
		ck.Seconds += st.Seconds
		ck.CPUSeconds += cpu
		accs = append(accs, st.Accuracy)
		if firstBad < 0 && st.InnerRatio >= 1 {
			firstBad = k
			flag := "alpha"
			if method == "anil" {
				flag = "anil-alpha"
			}
			fmt.Printf("%s %-10s warning: iteration %d: the inner loop did not converge on a task (‖∇y g(y_T)‖/‖∇y g(y_0)‖ = %.3g ≥ 1): the inner step -%s %g is too large for the head's curvature now, and AID-BiO's meta-gradient assumes y_T ≈ y* (inner_ratio in train_log.csv)\n",
				e.name, method, k, st.InnerRatio, flag, s.Alpha)
		}
		ck.Train = append(ck.Train, trainRow{Setting: e.name, Method: method, Iter: k, InnerSteps: st.InnerSteps, Seconds: ck.Seconds,
			Loss: st.Loss, Accuracy: st.Accuracy, GradNorm: st.GradNorm, InnerRatio: st.InnerRatio, CGResidual: st.CGResidual,
			IterSec: st.Seconds, CPUSec: cpu, CPUSeconds: ck.CPUSeconds})
		if (k+1)%c.EvalEvery == 0 || k+1 == c.Iters {
			if err := evalCurve(); err != nil {
				return err
			}
		}
		bar.Step(fmt.Sprintf("D=%d loss %.3f, running accuracy %.1f%%%s", st.InnerSteps, st.Loss, 100*runningMean(accs, 20), lastTest))
		if (k+1)%c.CheckpointEvery == 0 {
			if err := save(); err != nil {
				return err
			}
		}
	}
	t := time.Now()
	acc, err := l.Evaluate(e.test, 0, c.EvalTasks)
	if err != nil {
		return err
	}
	iters := l.Snapshot().Iter
	ck.Final = &resultRow{Setting: e.name, Method: method, Accuracy: acc.Mean, CI95: acc.CI95, Tasks: acc.N, Iters: iters,
		TrainSeconds: ck.Seconds, SecPerIter: median(ck.Train, func(r trainRow) float64 { return r.IterSec }),
		CPUPerIter: median(ck.Train, func(r trainRow) float64 { return r.CPUSec }),
		Note:       fmt.Sprintf("%d meta-iterations, evaluation with %d inner steps", iters, evalSteps(l))}
	if first, n := unconverged(ck.Train); first >= 0 {
		ck.Final.Note += fmt.Sprintf("; inner loop not converging on %d iterations from iteration %d (inner_ratio ≥ 1)", n, first)
	}
	fmt.Printf("%s %-10s meta-test accuracy %v after %d iterations (%.1fs training, %.3fs and %.3f CPU-s per iteration) [evaluation %.1fs]\n",
		e.name, method, acc, iters, ck.Seconds, ck.Final.SecPerIter, ck.Final.CPUPerIter, time.Since(t).Seconds())
	if err := save(); err != nil {
		return err
	}
	e.collect(ck)
	return nil
}

// unconverged returns the first iteration of the log whose inner loop did
// not converge on some task (meta.StepStats.InnerRatio ≥ 1) and how many
// iterations did not; -1 and 0 when all did.
func unconverged(rows []trainRow) (first, n int) {
	first = -1
	for _, r := range rows {
		if r.InnerRatio >= 1 {
			if first < 0 {
				first = r.Iter
			}
			n++
		}
	}
	return first, n
}

func evalSteps(l *meta.Learner) int {
	if s := l.Settings().EvalSteps; s > 0 {
		return s
	}
	steps, _ := l.InnerSteps(l.Snapshot().Iter) // the Evaluate before this note checked it
	return steps
}

func (e *setting) collect(ck runCheckpoint) {
	e.trainLog = append(e.trainLog, ck.Train...)
	e.curve = append(e.curve, ck.Curve...)
	e.results = append(e.results, *ck.Final)
}

// median returns the median of field over the rows (0 for none).
func median(rows []trainRow, field func(trainRow) float64) float64 {
	if len(rows) == 0 {
		return 0
	}
	v := make([]float64, len(rows))
	for i, r := range rows {
		v[i] = field(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// cpuSeconds returns the user and system CPU time of the process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func write(path func(string) string, c config, all []*setting) error {
	tl := report.Table{Columns: []string{"setting", "method", "iter", "inner_steps", "seconds", "cpu_seconds", "loss", "accuracy", "grad_norm", "inner_ratio", "cg_residual", "iter_seconds", "iter_cpu_seconds"}}
	cv := report.Table{Columns: []string{"setting", "method", "iter", "seconds", "cpu_seconds", "accuracy", "ci95"}}
	rs := report.Table{Columns: []string{"setting", "method", "accuracy", "ci95", "tasks", "iters", "train_seconds", "sec_per_iter", "cpu_sec_per_iter", "note"}}
	var results []resultRow
	for _, e := range all {
		for _, r := range e.trainLog {
			tl.Add(r.Setting, r.Method, r.Iter, r.InnerSteps, r.Seconds, r.CPUSeconds, r.Loss, r.Accuracy, r.GradNorm, r.InnerRatio, r.CGResidual, r.IterSec, r.CPUSec)
		}
		for _, r := range e.curve {
			cv.Add(r.Setting, r.Method, r.Iter, r.Seconds, r.CPUSeconds, r.Accuracy, r.CI95)
		}
		for _, r := range e.results {
			note := r.Note
			if r.Error != "" {
				note = "FAILED " + r.Error
			}
			rs.Add(r.Setting, r.Method, r.Accuracy, r.CI95, r.Tasks, r.Iters, r.TrainSeconds, r.SecPerIter, r.CPUPerIter, note)
		}
		results = append(results, e.results...)
		if err := e.plots(path); err != nil {
			return err
		}
	}
	for name, t := range map[string]*report.Table{"train_log.csv": &tl, "test_curve.csv": &cv, "results.csv": &rs} {
		if err := t.WriteCSV(path(name)); err != nil {
			return err
		}
	}
	return report.WriteJSON(path("summary.json"), map[string]any{"config": c, "results": results})
}

// plots draws, for the experiment, the meta-train accuracy (running mean
// over 20 iterations) and the meta-test accuracy of every method against
// training time (wall, or CPU with -plot-cpu), the baselines as flat lines
// on the second.
func (e *setting) plots(path func(string) string) error {
	var train, test []report.Series
	tmax := 1.0
	xlabel := "training seconds (wall)"
	tt, tc := func(r trainRow) float64 { return r.Seconds }, func(r curveRow) float64 { return r.Seconds }
	if e.c.PlotCPU {
		// Training CPU time at the end of each iteration, summed from the
		// per-iteration times of the log.
		cpu := map[[2]string]map[int]float64{}
		for _, r := range e.trainLog {
			k := [2]string{r.Setting, r.Method}
			if cpu[k] == nil {
				cpu[k] = map[int]float64{-1: 0}
			}
			cpu[k][r.Iter] = cpu[k][r.Iter-1] + r.CPUSec
		}
		xlabel = "training CPU seconds"
		tt = func(r trainRow) float64 { return cpu[[2]string{r.Setting, r.Method}][r.Iter] }
		tc = func(r curveRow) float64 { return cpu[[2]string{r.Setting, r.Method}][r.Iter-1] }
	}
	failures := map[string]string{}
	for _, r := range e.results {
		failures[r.Method] = r.Error
	}
	for _, m := range e.c.Methods {
		s := report.Series{Name: m, Note: failures[m]}
		var accs []float64
		for _, r := range e.trainLog {
			if r.Method == m {
				accs = append(accs, r.Accuracy)
				s.X, s.Y = append(s.X, tt(r)), append(s.Y, runningMean(accs, 20))
				tmax = math.Max(tmax, tt(r))
			}
		}
		train = append(train, s)
		s = report.Series{Name: m, Note: failures[m]}
		for _, r := range e.curve {
			if r.Method == m {
				s.X, s.Y = append(s.X, tc(r)), append(s.Y, r.Accuracy)
			}
		}
		test = append(test, s)
	}
	for _, r := range e.results {
		if r.Method == "random" || r.Method == "pretrained" {
			test = append(test, report.Series{Name: r.Method + " backbone", X: []float64{0, tmax}, Y: []float64{r.Accuracy, r.Accuracy}, Reference: true})
		}
	}
	pl := report.Plot{Title: e.name + ": meta-train accuracy (running mean of 20 batches)", XLabel: xlabel, YLabel: "query accuracy",
		XScale: report.Linear, YScale: report.Linear, Series: train}
	if err := pl.Save(path("train_accuracy_" + e.name + ".png")); err != nil {
		return err
	}
	pl.Title, pl.Series = fmt.Sprintf("%s: meta-test accuracy (%d tasks; baselines on %d)", e.name, e.c.CurveSize, e.c.EvalTasks), test
	return pl.Save(path("test_accuracy_" + e.name + ".png"))
}
