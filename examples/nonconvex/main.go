// Command nonconvex runs the experiments of paper 001 (Huang 2023, "On
// momentum-based gradient methods for bilevel optimization with nonconvex
// lower-level", Sec. 5), whose lower levels are not strongly convex:
//
//   - "pl": the bilevel PL game of eq. (33), d = 50, l = 48, n = 2500, with
//     the well-posedness fix of the digest (R2 restricted to range(Q), see
//     plGame), plotting the exact ‖∇Φ(x_t)‖ against iterations and time;
//   - "sensing": matrix-sensing hyper-representation, eqs. (34)–(35), for d
//     in {50, 100, 200}, plotting the relative error ‖UUᵀ − H*‖²_F/‖H*‖²_F
//     and the loss against iterations and time.
//
// Methods: MGBiO (deterministic, Algorithm 1), MSGBiO and VR-MSGBiO
// (stochastic, Algorithms 2 and 3, minibatches of 10), and, because the
// paper's baselines (BOME, V-PBGD, GALET, BVFSM) are not in this toolkit,
// the AID-BiO, ITD-BiO and stocBiO of paper 003, which assume a strongly
// convex lower level. Every method uses the paper's "basic learning rate"
// (0.01 for the game, 0.008 for sensing) for both levels.
//
// -mode quick (the default) runs in about a minute; -mode full runs the
// paper's sizes. Output: traces.csv, runs.csv, summary.json and PNG plots in
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

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

type config struct {
	Mode        string
	Problems    []string
	Methods     []string
	Seeds       []uint64
	Points      int
	Batch       int
	PLIters     int
	PLDim, PLL  int
	PLN         int
	PLMu, PLMax float64
	PLFix       bool
	PLRate      float64
	Dims        []int
	Rank        int
	SIters      int
	SRate       float64
	Cap         time.Duration
	Out         string
	Quiet       bool
}

var mgMu = 0.0

var allMethods = []string{"mgbio", "msgbio", "vrmsgbio", "aid", "itd", "stocbio"}

var names = map[string]string{
	"mgbio": "MGBiO", "msgbio": "MSGBiO", "vrmsgbio": "VR-MSGBiO",
	"aid": "AID-BiO", "itd": "ITD-BiO", "stocbio": "stocBiO",
}

// method builds a method with step size lr on both levels and stochastic
// batches of b. MSGBiO and VR-MSGBiO move x by η_t γ w_t and y by η_t λ v_t
// with η_t = k/(m+t)^p; with optim's defaults (k = 1 and the smallest m
// of Theorems 3 and 4: m = (c1 k)² = 100 with c1 = 10, and
// m = (c1 k)³ = (10 + 2/3)³ ≈ 1214 with c1 = 2/(3k³) + 10) η_1 is about
// 0.1, so γ = λ = lr/η_1 makes their first step lr, as for the other
// methods, after which it decays as the theorems prescribe. (Paper 001 does
// not say which of γ, λ, η its "basic learning rate" is.)
func method(name string, lr float64, b int) optim.Method {
	switch name {
	case "mgbio":
		return optim.MGBiO{Gamma: lr, Lambda: lr, Mu: mgMu}
	case "msgbio":
		s := lr * math.Sqrt(100+1)
		return optim.MSGBiO{Gamma: s, Lambda: s, Mu: mgMu, LowerBatch: b, UpperBatch: b}
	case "vrmsgbio":
		s := lr * math.Cbrt(math.Pow(10+2.0/3, 3)+1)
		return optim.VRMSGBiO{Gamma: s, Lambda: s, Mu: mgMu, LowerBatch: b, UpperBatch: b}
	case "aid":
		return optim.AIDBiO{Alpha: lr, D: 10, N: 10, Outer: optim.SGD{LR: lr}}
	case "itd":
		return optim.ITDBiO{Alpha: lr, D: 10, Outer: optim.SGD{LR: lr}}
	case "stocbio":
		return optim.StocBiO{Alpha: lr, Eta: lr, D: 10, Q: 10, InnerBatch: b, HessianBatch: b, MixedBatch: b, UpperBatch: b, Outer: optim.SGD{LR: lr}}
	}
	panic("unknown method " + name)
}

var modes = map[string]map[string]string{
	"quick": {"pl-iters": "1000", "dims": "30", "s-iters": "300", "seeds": "1", "points": "30", "cap": "0"},
	"full":  {"pl-iters": "5000", "dims": "50,100,200", "s-iters": "1000", "seeds": "1,2,3", "points": "50", "cap": "1m"},
}

func main() {
	experiment.Main("nonconvex", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var problems, methodList, seeds, dims string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (about a minute) or full (the paper's sizes, d = 50, 100, 200 for sensing); sets the defaults of the flags marked (mode)")
	fs.StringVar(&problems, "problem", "pl,sensing", "problems: pl (the bilevel PL game, eq. 33), sensing (matrix-sensing hyper-representation, eqs. 34-35)")
	fs.StringVar(&methodList, "methods", strings.Join(allMethods, ","), "methods, from "+strings.Join(allMethods, ", "))
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds; each draws its own data and starting point")
	fs.IntVar(&c.Points, "points", 0, "(mode) checkpoints per run (geometrically spaced in iterations)")
	fs.IntVar(&c.Batch, "batch", 10, "minibatch of the stochastic methods (paper 001: 10)")
	fs.IntVar(&c.PLIters, "pl-iters", 0, "(mode) pl: iterations per run")
	fs.IntVar(&c.PLDim, "pl-d", 50, "pl: dimension d of x and y")
	fs.IntVar(&c.PLL, "pl-l", 48, "pl: rank l of P and Q")
	fs.IntVar(&c.PLN, "pl-n", 2500, "pl: samples n")
	fs.Float64Var(&c.PLMu, "pl-mu", 1, "pl: smallest nonzero eigenvalue scale μ of P and Q (D ~ Uniform[μ, L]; not given in the paper)")
	fs.Float64Var(&c.PLMax, "pl-L", 10, "pl: largest eigenvalue scale L of P and Q (not given in the paper)")
	fs.BoolVar(&c.PLFix, "pl-fix", true, "pl: restrict R2 to range(Q) so that g(x, ·) is bounded below (false: the game as printed, whose argmin is empty)")
	fs.Float64Var(&c.PLRate, "pl-lr", 0.01, "pl: step size of every method on both levels (paper 001: 0.01)")
	fs.StringVar(&dims, "dims", "", "(mode) sensing: comma-separated dimensions d (n = 20d samples)")
	fs.IntVar(&c.Rank, "rank", 3, "sensing: rank r of H* (x has r−1 columns; not given in the paper)")
	fs.IntVar(&c.SIters, "s-iters", 0, "(mode) sensing: iterations per run")
	fs.Float64Var(&c.SRate, "s-lr", 0.008, "sensing: step size of every method on both levels (paper 001: 0.008)")
	fs.Float64Var(&mgMu, "mu", 1, "eigenvalue floor μ of the projection S_[μ,L_g] of MGBiO, MSGBiO and VR-MSGBiO (paper 001's μ, not given; smaller floors let the indefinite sensing Hessians blow w_t up)")
	fs.DurationVar(&c.Cap, "cap", 0, "(mode) stop any run whose solver time reaches this, whatever its iterations (0: no cap)")
	fs.StringVar(&c.Out, "out", "out/nonconvex", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "nonconvex", "Paper 001's bilevel problems with nonconvex (PL) lower levels: MGBiO, MSGBiO, VR-MSGBiO\nagainst AID-BiO, ITD-BiO and stocBiO.", modes, nil)
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.Problems = ck.Names("problem", problems, []string{"pl", "sensing"})
	c.Methods = ck.Names("methods", methodList, allMethods)
	c.Seeds = ck.Seeds("seeds", seeds)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	ck.Int("batch", c.Batch, 1, experiment.MaxSamples)
	ck.Int("pl-iters", c.PLIters, 1, experiment.MaxIters)
	ck.Int("s-iters", c.SIters, 1, experiment.MaxIters)
	ck.Int("pl-d", c.PLDim, 1, maxPLDim)
	ck.Int("pl-l", c.PLL, 1, max(1, c.PLDim))
	ck.Int("pl-n", c.PLN, max(1, c.Batch), max(1, c.Batch, experiment.MaxElements/max(1, c.PLDim)))
	ck.Positive("pl-mu", c.PLMu)
	ck.Float("pl-L", c.PLMax, c.PLMu, math.MaxFloat64)
	ck.Positive("pl-lr", c.PLRate)
	ck.Positive("s-lr", c.SRate)
	ck.Positive("mu", mgMu)
	// Sensing with dimension d holds 40d³ numbers (n = 20d samples of two
	// d×d matrices), and its minibatches come from 8d of them.
	c.Dims = ck.Ints("dims", dims, max(2, (c.Batch+7)/8), maxSensingDim)
	ck.Int("rank", c.Rank, 2, maxSensingDim)
	for _, d := range c.Dims {
		if c.Rank > d && c.Rank <= maxSensingDim {
			ck.Failf("rank", "%d exceeds the dimension %d of -dims: give a rank from 2 to the smallest dimension", c.Rank, d)
			break
		}
	}
	ck.Duration("cap", c.Cap, true)
	ck.Out("out", c.Out)
	return c, ck.Err()
}

// Largest dimensions: the PL game's d×d matrices, and the 40d³ numbers of
// sensing within experiment.MaxElements.
const (
	maxPLDim      = 2000
	maxSensingDim = 149
)

type runRow struct {
	Problem string
	D       int
	Method  string
	Seed    uint64
	Iters   int
	Seconds float64
	// Final figures: ‖∇Φ‖ (pl) or relative error and loss (sensing), and
	// the best relative error along the run.
	GradNorm, RelErr, Loss, BestRelErr float64
	Error                              string `json:",omitempty"`
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
	traces := report.Table{Columns: []string{"problem", "d", "method", "seed", "iter", "time_s", "oracle_calls", "dense", "sample_evals", "grad_norm", "rel_err", "loss"}}
	total := 0
	for _, p := range c.Problems {
		k := 1
		if p == "sensing" {
			k = len(c.Dims)
		}
		total += k * len(c.Seeds) * len(c.Methods)
	}
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	bar := report.NewProgress(w, "nonconvex", total)
	var failed []string
	all := map[string][]*experiment.Trace{}
	for _, prob := range c.Problems {
		dims := []int{c.PLDim}
		if prob == "sensing" {
			dims = c.Dims
		}
		for _, d := range dims {
			for _, seed := range c.Seeds {
				p, x0, y0, eval, err := newProblem(c, prob, d, seed)
				if err != nil {
					return nil, err
				}
				iters, lr := c.PLIters, c.PLRate
				if prob == "sensing" {
					iters, lr = c.SIters, c.SRate
				}
				// Counting prices a dense matrix as the products it stands for,
				// so that the MGBiO family and the HVP methods share an axis.
				cp := experiment.NewCounting(p)
				for _, name := range c.Methods {
					tr, err := experiment.Run(cp, x0, y0, method(name, lr, c.Batch), optim.Settings{Seed: seed*100 + 3},
						experiment.Budget{Iters: iters, Points: c.Points, LogIters: true, Cap: c.Cap}, cp, eval)
					if err != nil {
						return nil, fmt.Errorf("%s d=%d %s: %w", prob, d, name, err)
					}
					key := fmt.Sprintf("%s|%d|%s", prob, d, name)
					all[key] = append(all[key], tr)
					row := runRow{Problem: prob, D: d, Method: name, Seed: seed, Iters: tr.State.Iter, Seconds: tr.State.Elapsed.Seconds(),
						GradNorm: math.NaN(), RelErr: math.NaN(), Loss: math.NaN(), BestRelErr: math.NaN()}
					last := tr.Last().Metrics
					if prob == "pl" {
						row.GradNorm = last["grad_norm"]
					} else {
						row.RelErr, row.Loss = last["rel_err"], last["loss"]
						for _, pt := range tr.Points {
							if v := pt.Metrics["rel_err"]; !(v >= row.BestRelErr) {
								row.BestRelErr = v
							}
						}
					}
					if tr.Err != nil {
						row.Error = tr.Err.Error()
						failed = append(failed, fmt.Sprintf("%s_d%d_%s_seed%d", prob, d, name, seed))
					}
					out.Runs = append(out.Runs, row)
					for _, pt := range tr.Points {
						m := pt.Metrics
						traces.Add(prob, d, name, seed, pt.Iter, pt.Seconds, pt.Oracles, pt.Calls.Dense, pt.Samples, m["grad_norm"], m["rel_err"], m["loss"])
					}
					bar.Step(fmt.Sprintf("%s d=%d seed %d %s: %s", prob, d, seed, name, tr.Describe()))
				}
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	rt := report.Table{Columns: []string{"problem", "d", "method", "seed", "iters", "seconds", "grad_norm", "rel_err", "loss", "best_rel_err", "error"}}
	for _, r := range out.Runs {
		rt.Add(r.Problem, r.D, r.Method, r.Seed, r.Iters, r.Seconds, r.GradNorm, r.RelErr, r.Loss, r.BestRelErr, r.Error)
	}
	if err := rt.WriteCSV(path("runs.csv")); err != nil {
		return nil, err
	}
	if err := plots(path, c, all); err != nil {
		return nil, err
	}
	summarize(c, out)
	printSummary(stdout, c, out)
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "result": out.Result}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

// newProblem builds one problem instance, its starting point and its
// evaluation.
func newProblem(c config, prob string, d int, seed uint64) (oracle.Problem, []float64, []float64, func(*optim.State) map[string]float64, error) {
	if prob == "pl" {
		g := newPLGame(d, c.PLL, c.PLN, c.PLMu, c.PLMax, c.PLFix, seed)
		obj, err := g.objective()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		p, err := graph.Compile(obj)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		rng := rand.New(rand.NewPCG(seed, 0x30))
		x0 := make([]float64, d)
		for i := range x0 {
			x0[i] = rng.NormFloat64()
		}
		var qinv mat.Dense
		pinv(&qinv, g.Q, 1e-9)
		eval := func(st *optim.State) map[string]float64 {
			// The distance of y to y*(x) = −Q⁺R2ᵀx, in range(Q).
			var ys mat.VecDense
			ys.MulVec(g.R2.T(), mat.NewVecDense(d, st.X))
			ys.MulVec(&qinv, &ys)
			ys.AddVec(&ys, mat.NewVecDense(d, slices.Clone(st.Y)))
			return map[string]float64{"grad_norm": g.gradNorm(st.X), "y_err": mat.Norm(&ys, 2)}
		}
		return p, x0, make([]float64, d), eval, nil
	}
	s := newSensing(d, c.Rank, seed)
	x0, y0 := s.start(seed)
	eval := func(st *optim.State) map[string]float64 {
		return map[string]float64{"rel_err": s.relErr(st.X, st.Y), "loss": s.loss(st.X, st.Y)}
	}
	return s, x0, y0, eval, nil
}

func plots(path func(string) string, c config, all map[string][]*experiment.Trace) error {
	for _, prob := range c.Problems {
		dims := []int{c.PLDim}
		metrics := []struct{ key, label string }{{"grad_norm", "‖grad Φ(x)‖"}}
		if prob == "sensing" {
			dims = c.Dims
			metrics = []struct{ key, label string }{{"rel_err", "‖UUᵀ − H*‖² / ‖H*‖² (Frobenius norms)"}, {"loss", "loss l(U)"}}
		}
		for _, d := range dims {
			for _, m := range metrics {
				for _, axis := range []experiment.Axis{experiment.Iters, experiment.Seconds, experiment.Samples} {
					var series []report.Series
					for _, name := range c.Methods {
						series = append(series, experiment.MedianSeries(names[name], all[fmt.Sprintf("%s|%d|%s", prob, d, name)], axis, m.key))
					}
					title := fmt.Sprintf("bilevel PL game, d = %d", d)
					if prob == "sensing" {
						title = fmt.Sprintf("matrix sensing, d = %d, r = %d", d, c.Rank)
					}
					an := map[experiment.Axis]string{experiment.Iters: "iters", experiment.Seconds: "time", experiment.Samples: "samples"}[axis]
					pl := report.Plot{Title: title, XLabel: axis.Label(), YLabel: m.label, Series: series}
					if err := pl.Save(path(fmt.Sprintf("%s_d%d_%s_vs_%s.png", prob, d, m.key, an))); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// finals returns, for each problem instance (problem and d) and method,
// the final figures of the runs that succeeded (‖∇Φ‖ for pl, the relative
// error for sensing), and the failures.
func finals(out *outcome, prob string, d int, name string) (vals, secs []float64, fails []runRow) {
	for _, r := range out.Runs {
		switch {
		case r.Problem != prob || r.D != d || r.Method != name:
		case r.Error != "":
			fails = append(fails, r)
		case prob == "pl":
			vals, secs = append(vals, r.GradNorm), append(secs, r.Seconds)
		default:
			vals, secs = append(vals, r.RelErr), append(secs, r.Seconds)
		}
	}
	return vals, secs, fails
}

// dimsOf returns the dimensions run for a problem.
func dimsOf(c config, prob string) []int {
	if prob == "sensing" {
		return c.Dims
	}
	return []int{c.PLDim}
}

// summarize fills the result line with medians over the seeds whose run
// succeeded, and their 95% intervals when there are several seeds
// (experiment.Summarize); a method whose runs all failed has no figure
// (its runs are in the key "failed").
func summarize(c config, out *outcome) {
	for _, prob := range c.Problems {
		for _, d := range dimsOf(c, prob) {
			for _, name := range c.Methods {
				v, _, _ := finals(out, prob, d, name)
				key := fmt.Sprintf("sensing_d%d_%s_rel_err", d, name)
				if prob == "pl" {
					key = fmt.Sprintf("pl_%s_grad_norm", name)
				}
				switch sm := experiment.Summarize(v); {
				case sm.N > 1:
					sm.AddResult(out.Result, key)
				case sm.N == 1:
					out.Result[key] = sm.Median
				}
			}
		}
	}
}

// printSummary prints each method's final figure over the seeds, median
// [95% interval], with its median solver time, and every failed run.
func printSummary(w io.Writer, c config, out *outcome) {
	for _, prob := range c.Problems {
		for _, d := range dimsOf(c, prob) {
			what := "‖∇Φ‖"
			if prob == "sensing" {
				what = "relative error"
			}
			fmt.Fprintf(w, "%s d=%d, %s after the run, over %d seed(s): median [95%% interval]\n", prob, d, what, len(c.Seeds))
			for _, name := range c.Methods {
				v, secs, fails := finals(out, prob, d, name)
				if len(v) > 0 {
					fmt.Fprintf(w, "  %-10s %s  (%.2fs)\n", names[name], experiment.Summarize(v).Format("%.3g"), experiment.MedianOf(secs))
				}
				for _, r := range fails {
					fmt.Fprintf(w, "  %-10s seed %d FAILED at iteration %d: %s\n", names[name], r.Seed, r.Iters, r.Error)
				}
			}
		}
	}
}
