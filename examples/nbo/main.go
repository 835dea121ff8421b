// Command nbo runs the synthetic hyperparameter problem of paper 002
// (Dong, Yang, Yao, Zhang, ICML 2025, Sec. 4.1 and App. C.1): binary
// logistic regression with one penalty weight e^{λ_i} per feature,
//
//	f(λ, w) = mean_val ψ(s_e x_eᵀw),   g(λ, w) = mean_train ψ(s_e x_eᵀw) + ½ Σ_i e^{λ_i} w_i²,
//
// ψ(t) = log(1 + e^{−t}), on data x_e ~ N(0, r'²I), labels the sign of
// wᵗʳᵘᵉ·x_e + 0.1z about its median (data.LogisticData), 16000 training and
// 4000 validation samples, p = 50. It compares NBO-GD (T inexact-Newton GD
// rounds, T = 1 highlighted) with AmIGO-GD (Q = 10 and Q = 1 gradient
// steps on each inner problem), all deterministic, outer step 1, inner step
// 0.03, as in the paper, and plots the suboptimality Φ(λ_k) − Φ* against
// iterations, time and oracle calls, with Φ(λ) = f(λ, w*(λ)) computed by
// Newton's method and, as in the paper (App. C.1), Φ* the value reached by
// a long reference run (NBO-GD, T = 1, 5000 iterations in full mode) or the
// lowest value any run reached, whichever is lower. On this nearly
// separable data Φ keeps decreasing as some λ_i → −∞, so Φ* is a
// reference, not the infimum.
//
// -mode quick (the default) runs in well under two minutes on 4000/1000
// samples; -mode full runs the paper's sizes for r' = 0.5, 1 and 2. Output:
// traces.csv, runs.csv, summary.json and PNG plots in -out, then the line
// "result: key=value ...".
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

type config struct {
	Mode       string
	Train, Val int
	P          int
	Rs         []float64
	Methods    []string
	Iters      int
	Points     int
	Seeds      []uint64
	Params     experiment.Params
	RefIters   int
	Unit       bool
	Out        string
	Quiet      bool
}

type methodInfo struct {
	name, paper string
	make        func(hp func(string) float64) optim.Method
}

var allMethods = []string{"nbo1", "nbo10", "amigo10", "amigo1", "soba"}

var methods = map[string]methodInfo{
	"nbo1": {"NBO-GD (T = 1)", "paper 002 Alg. 2-3: one inexact Newton step from T+1 = 2 GD updates", func(hp func(string) float64) optim.Method {
		return optim.NBOGD{Gamma: hp("inner"), Updates: 2, Outer: optim.SGD{LR: hp("outer")}}
	}},
	"nbo10": {"NBO-GD (T = 10)", "paper 002 Alg. 2-3 with T = 10 HVP rounds", func(hp func(string) float64) optim.Method {
		return optim.NBOGD{Gamma: hp("inner"), Updates: 11, Outer: optim.SGD{LR: hp("outer")}}
	}},
	"amigo10": {"AmIGO-GD (Q = 10)", "Arbel & Mairal 2022 as in paper 002: 10 GD steps on y and on v, full batches", func(hp func(string) float64) optim.Method {
		return optim.AmIGO{Alpha: hp("inner"), Eta: hp("inner"), D: 10, Q: 10, Outer: optim.SGD{LR: hp("outer")}}
	}},
	"amigo1": {"AmIGO-GD (Q = 1)", "as above with one step each", func(hp func(string) float64) optim.Method {
		return optim.AmIGO{Alpha: hp("inner"), Eta: hp("inner"), D: 1, Q: 1, Outer: optim.SGD{LR: hp("outer")}}
	}},
	"soba": {"NBO-GD (T = 0) = SOBA", "paper 002 Remark 2.1(i): the single-loop method, no HVP round", func(hp func(string) float64) optim.Method {
		return optim.NBOGD{Gamma: hp("inner"), Updates: 1, Outer: optim.SGD{LR: hp("outer")}}
	}},
}

// defaultParams are paper 002's step sizes (App. C.1): outer 1, inner 0.03.
var defaultParams = experiment.Params{
	"nbo1":    {"outer": 1, "inner": 0.03},
	"nbo10":   {"outer": 1, "inner": 0.03},
	"amigo10": {"outer": 1, "inner": 0.03},
	"amigo1":  {"outer": 1, "inner": 0.03},
	"soba":    {"outer": 1, "inner": 0.03},
}

var modes = map[string]map[string]string{
	"quick": {"train": "4000", "val": "1000", "r": "1", "iters": "400", "points": "30", "seeds": "1", "ref-iters": "1000"},
	"full":  {"train": "16000", "val": "4000", "r": "0.5,1,2", "iters": "2000", "points": "50", "seeds": "1", "ref-iters": "5000"},
}

func main() {
	experiment.Main("nbo", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var rs, methodList, seeds, set string
	fs.StringVar(&c.Mode, "mode", "quick", "quick (4000/1000 samples, r' = 1, well under two minutes) or full (the paper's 16000/4000 samples, r' = 0.5, 1, 2); sets the defaults of the flags marked (mode)")
	fs.IntVar(&c.Train, "train", 0, "(mode) training samples (lower level)")
	fs.IntVar(&c.Val, "val", 0, "(mode) validation samples (upper level)")
	fs.IntVar(&c.P, "p", 50, "features p (the dimension of λ and w)")
	fs.StringVar(&rs, "r", "", "(mode) comma-separated feature scales r' (x ~ N(0, r'²I))")
	fs.StringVar(&methodList, "methods", strings.Join(allMethods, ","), "methods, from "+strings.Join(allMethods, ", "))
	fs.IntVar(&c.Iters, "iters", 0, "(mode) outer iterations per run")
	fs.IntVar(&c.Points, "points", 0, "(mode) checkpoints per run (geometrically spaced in iterations)")
	fs.StringVar(&seeds, "seeds", "", "(mode) comma-separated seeds; each draws its own data")
	fs.IntVar(&c.RefIters, "ref-iters", 0, "(mode) iterations of the reference run (NBO-GD, T = 1) whose final Φ is Φ* (paper 002: 5000)")
	fs.StringVar(&set, "set", "", "override step sizes, e.g. amigo1.inner=0.1 (outer: SGD step on λ; inner: γ of NBO, α = η of AmIGO); defaults: "+defaultParams.Describe())
	fs.BoolVar(&c.Unit, "unit", true, "draw the ground truth wᵗʳᵘᵉ with unit norm (false: N(0, I) entries, norm ≈ √p, nearly separable labels)")
	fs.StringVar(&c.Out, "out", "out/nbo", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	experiment.Usage(fs, "nbo", "Paper 002's synthetic logistic hyperparameter problem: NBO-GD against AmIGO-GD.", modes, func(w io.Writer) {
		fmt.Fprintf(w, "\nMethods:\n")
		for _, m := range allMethods {
			fmt.Fprintf(w, "  %-8s %s: %s\n", m, methods[m].name, methods[m].paper)
		}
	})
	if err := experiment.ParseMode(fs, args, &c.Mode, modes); err != nil {
		return c, err
	}
	var ck experiment.Check
	ck.Int("train", c.Train, 1, experiment.MaxSamples)
	ck.Int("val", c.Val, 1, experiment.MaxSamples)
	ck.Int("p", c.P, 1, experiment.MaxElements)
	if n := int64(c.Train + c.Val); c.P > 0 && n > 0 && n*int64(c.P) > experiment.MaxElements {
		ck.Add(fmt.Errorf("-p %d: %d features for %d samples (-train plus -val) are %d values, more than %d (1 GiB): give at most %d features",
			c.P, c.P, n, n*int64(c.P), experiment.MaxElements, experiment.MaxElements/n))
	}
	c.Rs = ck.Floats("r", rs, 0, 1e6)
	for _, r := range c.Rs {
		if r == 0 {
			ck.Failf("r", "%q: give positive scales r'", rs)
			break
		}
	}
	c.Seeds = ck.Seeds("seeds", seeds)
	c.Methods = ck.Names("methods", methodList, allMethods)
	ck.Int("iters", c.Iters, 1, experiment.MaxIters)
	ck.Int("points", c.Points, 1, experiment.MaxPoints)
	ck.Int("ref-iters", c.RefIters, 0, experiment.MaxIters)
	ck.Out("out", c.Out)
	c.Params = defaultParams.Clone()
	if err := c.Params.Set(set); err != nil {
		ck.Add(err)
	} else {
		ck.Add(c.Params.Positive("outer")) // SGD's step has no default
	}
	return c, ck.Err()
}

type runRow struct {
	R       float64
	Method  string
	Seed    uint64
	Iters   int
	Seconds float64
	Oracles int64
	// Subopt is Φ(λ_K) − Φ*, RelSubopt the same over Φ(λ_0) − Φ*.
	Subopt, RelSubopt float64
	// ItersTo3 and SecondsTo3 are the first checkpoint with RelSubopt ≤
	// 1e-3 (paper 002's Fig. 8 criterion); −1 if never reached.
	ItersTo3   int
	SecondsTo3 float64
	Error      string `json:",omitempty"`
}

type outcome struct {
	Runs   []runRow
	Refs   map[string]float64
	Result map[string]any
}

func run(c config, stdout, stderr io.Writer) (*outcome, error) {
	start := time.Now()
	path, err := report.OutDir(c.Out)
	if err != nil {
		return nil, err
	}
	out := &outcome{Refs: map[string]float64{}, Result: map[string]any{}}
	traces := report.Table{Columns: []string{"r", "method", "seed", "iter", "time_s", "oracle_calls", "calls_gradg", "calls_gradf", "calls_hvp", "calls_mixed", "phi", "subopt", "rel_subopt", "val_loss"}}
	var w io.Writer
	if !c.Quiet {
		w = stderr
	}
	step := report.NewProgress(w, "nbo", len(c.Rs)*len(c.Seeds)*(len(c.Methods)+1)).Step
	var failed []string
	all := map[string][]*experiment.Trace{}
	for _, r := range c.Rs {
		for _, seed := range c.Seeds {
			e, err := newSetup(c, r, seed)
			if err != nil {
				return nil, err
			}
			step(fmt.Sprintf("r'=%g seed %d: Φ(λ0) = %.6f, reference Φ = %.6f", r, seed, e.phi0, e.phiStar))
			var trs []*experiment.Trace
			for _, name := range c.Methods {
				tr, err := e.solve(c, name)
				if err != nil {
					return nil, err
				}
				trs = append(trs, tr)
				step(fmt.Sprintf("r'=%g seed %d %s: Φ %.6f, %s", r, seed, name, tr.Last().Metrics["phi"], tr.Describe()))
			}
			// Φ* is the reference value or the lowest value reached.
			for _, tr := range trs {
				for _, pt := range tr.Points {
					e.phiStar = math.Min(e.phiStar, pt.Metrics["phi"])
				}
			}
			out.Refs[fmt.Sprintf("r%g_seed%d_phistar", r, seed)] = e.phiStar
			out.Refs[fmt.Sprintf("r%g_seed%d_phi0", r, seed)] = e.phi0
			for i, name := range c.Methods {
				tr := trs[i]
				row := e.finish(name, tr)
				out.Runs = append(out.Runs, row)
				if tr.Err != nil {
					failed = append(failed, fmt.Sprintf("r%g_%s_seed%d", r, name, seed))
				}
				all[fmt.Sprintf("%g|%s", r, name)] = append(all[fmt.Sprintf("%g|%s", r, name)], tr)
				for _, pt := range tr.Points {
					m, k := pt.Metrics, pt.Calls
					traces.Add(r, name, seed, pt.Iter, pt.Seconds, pt.Oracles, k.GradG, k.GradF, k.HVP, k.MixedXY, m["phi"], m["subopt"], m["rel_subopt"], m["val_loss"])
				}
			}
		}
	}
	if err := traces.WriteCSV(path("traces.csv")); err != nil {
		return nil, err
	}
	runs := report.Table{Columns: []string{"r", "method", "seed", "iters", "seconds", "oracle_calls", "subopt", "rel_subopt", "iters_to_1e-3", "seconds_to_1e-3", "error"}}
	for _, r := range out.Runs {
		runs.Add(r.R, r.Method, r.Seed, r.Iters, r.Seconds, r.Oracles, r.Subopt, r.RelSubopt, r.ItersTo3, r.SecondsTo3, r.Error)
	}
	if err := runs.WriteCSV(path("runs.csv")); err != nil {
		return nil, err
	}
	for _, r := range c.Rs {
		for _, axis := range []experiment.Axis{experiment.Iters, experiment.Seconds, experiment.Oracles} {
			var series []report.Series
			for _, name := range c.Methods {
				series = append(series, experiment.MedianSeries(methods[name].name, all[fmt.Sprintf("%g|%s", r, name)], axis, "subopt"))
			}
			name := map[experiment.Axis]string{experiment.Iters: "iters", experiment.Seconds: "time", experiment.Oracles: "oracles"}[axis]
			pl := report.Plot{Title: fmt.Sprintf("synthetic logistic problem, r' = %g, p = %d", r, c.P), XLabel: axis.Label(),
				YLabel: "Φ(λ) − Φ*", Series: series}
			if err := pl.Save(path(fmt.Sprintf("r%g_subopt_vs_%s.png", r, name))); err != nil {
				return nil, err
			}
		}
	}
	summarize(c, out)
	for _, r := range c.Rs {
		fmt.Fprintf(stdout, "r'=%g, relative suboptimality after the run over %d seed(s): median [95%% interval]\n", r, len(c.Seeds))
		for _, name := range c.Methods {
			var rel, secs, orc []float64
			for _, row := range out.Runs {
				switch {
				case row.R != r || row.Method != name:
				case row.Error != "":
					fmt.Fprintf(stdout, "  %-22s seed %d FAILED at iteration %d: %s\n", methods[name].name, row.Seed, row.Iters, row.Error)
				default:
					rel, secs, orc = append(rel, row.RelSubopt), append(secs, row.Seconds), append(orc, float64(row.Oracles))
				}
			}
			if len(rel) > 0 {
				fmt.Fprintf(stdout, "  %-22s %s  %.0f oracle calls, %.2fs\n", methods[name].name, experiment.Summarize(rel).Format("%.3g"),
					experiment.MedianOf(orc), experiment.MedianOf(secs))
			}
		}
	}
	failErr := experiment.Failed(out.Result, failed, len(out.Runs))
	out.Result["seconds"] = math.Round(time.Since(start).Seconds())
	if err := experiment.WriteJSON(path("summary.json"), map[string]any{"config": c, "runs": out.Runs, "references": out.Refs, "result": out.Result}); err != nil {
		return nil, err
	}
	report.Result(stdout, out.Result)
	return out, failErr
}

type setup struct {
	r             float64
	seed          uint64
	prob          *experiment.Counting
	x0, y0        []float64
	value         *experiment.Value
	phi0, phiStar float64
}

func newSetup(c config, r float64, seed uint64) (*setup, error) {
	// data.LogisticData draws wᵗʳᵘᵉ ~ N(0, I), whose norm is about √p; paper
	// 002 does not give its wᵗʳᵘᵉ. A unit-norm wᵗʳᵘᵉ with the paper's noise
	// 0.1 gives the same labels as N(0, I) weights with noise 0.1·√p (the
	// labels do not change when the response is scaled), which is what
	// -unit selects.
	noise := 0.1
	if c.Unit {
		noise = 0.1 * math.Sqrt(float64(c.P))
	}
	ds, _ := data.LogisticData(c.Train+c.Val, c.P, &data.LogisticOptions{Scale: r, Noise: noise}, seed)
	parts, err := data.RandomSplit(ds, seed+1, c.Train, c.Val)
	if err != nil {
		return nil, err
	}
	m, err := models.BinaryLogisticRegression(experiment.ModelData(parts[0]), experiment.ModelData(parts[1]), models.BinarySettings{})
	if err != nil {
		return nil, err
	}
	p, err := m.Compile()
	if err != nil {
		return nil, err
	}
	e := &setup{r: r, seed: seed, prob: experiment.NewCounting(p), x0: p.X0(nil), y0: p.Y0(nil)}
	e.value = experiment.NewValue(p, e.y0)
	e.value.Tol = 1e-11
	if e.phi0, _, err = e.value.At(e.x0); err != nil {
		return nil, err
	}
	ref := methods["nbo1"].make(func(k string) float64 { return c.Params.Get("nbo1", k) })
	res, err := optim.Solve(p, e.x0, e.y0, &optim.Settings{MaxIter: c.RefIters, EvalEvery: -1}, ref)
	if err != nil {
		return nil, fmt.Errorf("reference run: %w", err)
	}
	if e.phiStar, _, err = e.value.At(res.X); err != nil {
		return nil, err
	}
	return e, nil
}

// metrics evaluates Φ at a state (suboptimality is added by finish, once
// Φ* is known).
func (e *setup) metrics(st *optim.State) map[string]float64 {
	phi, _, err := e.value.At(st.X)
	if err != nil {
		phi = math.NaN()
	}
	return map[string]float64{"phi": phi, "val_loss": e.prob.F(st.X, st.Y, nil)}
}

func (e *setup) solve(c config, name string) (*experiment.Trace, error) {
	m := methods[name].make(func(k string) float64 { return c.Params.Get(name, k) })
	tr, err := experiment.Run(e.prob, e.x0, e.y0, m, optim.Settings{Seed: e.seed}, experiment.Budget{Iters: c.Iters, Points: c.Points, LogIters: true}, e.prob, e.metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return tr, nil
}

// finish adds the suboptimality Φ − Φ* (clipped at 1e-12 for logarithmic
// plots) and its ratio to Φ(λ0) − Φ* to the checkpoints of tr and returns
// the run's row.
func (e *setup) finish(name string, tr *experiment.Trace) runRow {
	for _, pt := range tr.Points {
		sub := math.Max(pt.Metrics["phi"]-e.phiStar, 1e-12)
		pt.Metrics["subopt"], pt.Metrics["rel_subopt"] = sub, sub/(e.phi0-e.phiStar)
	}
	last := tr.Last()
	row := runRow{R: e.r, Method: name, Seed: e.seed, Iters: tr.State.Iter, Seconds: last.Seconds, Oracles: last.Oracles,
		Subopt: last.Metrics["subopt"], RelSubopt: last.Metrics["rel_subopt"], ItersTo3: -1, SecondsTo3: math.NaN()}
	for _, pt := range tr.Points {
		if pt.Metrics["rel_subopt"] <= 1e-3 {
			row.ItersTo3, row.SecondsTo3 = pt.Iter, pt.Seconds
			break
		}
	}
	if tr.Err != nil {
		row.Error = tr.Err.Error()
	}
	return row
}

func summarize(c config, out *outcome) {
	put := func(k string, v []float64) {
		switch sm := experiment.Summarize(v); {
		case sm.N > 1:
			sm.AddResult(out.Result, k)
		case sm.N == 1:
			out.Result[k] = sm.Median
		}
	}
	for _, r := range c.Rs {
		rel := map[string]map[uint64]float64{} // method → seed → relative suboptimality
		for _, name := range c.Methods {
			var sub, it []float64
			rel[name] = map[uint64]float64{}
			for _, row := range out.Runs {
				if row.R == r && row.Method == name && row.Error == "" {
					sub = append(sub, row.RelSubopt)
					it = append(it, float64(row.ItersTo3))
					rel[name][row.Seed] = row.RelSubopt
				}
			}
			if len(sub) == 0 {
				continue // every run failed: in the key "failed"
			}
			put(fmt.Sprintf("r%g_%s_rel_subopt", r, name), sub)
			out.Result[fmt.Sprintf("r%g_%s_iters_to_1e-3", r, name)] = experiment.MedianOf(it)
		}
		// The claims of paper 002, per seed: NBO-GD (T = 1) against AmIGO
		// (Q = 10), and AmIGO (Q = 1) against NBO-GD (T = 1).
		for _, q := range [][2]string{{"nbo1", "amigo10"}, {"amigo1", "nbo1"}} {
			var ratio []float64
			for seed, a := range rel[q[0]] {
				if b, ok := rel[q[1]][seed]; ok {
					ratio = append(ratio, a/b)
				}
			}
			put(fmt.Sprintf("r%g_ratio_%s_%s", r, q[0], q[1]), ratio)
		}
	}
}
