// Command compare computes the hypergradient of a bilevel problem by
// implicit differentiation (AID: conjugate gradient, Neumann series, fixed
// point) and by iterative differentiation (ITD: full and truncated reverse
// sweeps), for a range of linear-solver steps N and inner steps T, and
// measures each against the exact hypergradient.
//
// With no flags it runs, in under a minute on two cores, on the embedded
// Fashion-MNIST subset for two models: data hyper-cleaning (a weight σ(λ_i)
// per training sample, half the labels corrupted) and multinomial logistic
// regression with one L2 weight exp(λ_j) per pixel. The exact
// hypergradient ∇Φ(x) = ∇x f − ∇xy g·[∇yy g]⁻¹∇y f is computed at the inner
// solution y*(x), found by Newton-CG to ‖∇y g‖ ≤ 1e-10, with CG run to a
// relative residual of 1e-13.
//
// It prints a table, writes results.csv, memory.csv, summary.json and PNG
// plots (AID's error against N, ITD's against T, every error against time,
// memory against T) to -out, and ends with one line "result: key=value ...".
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

type config struct {
	models     []string
	dataDir    string
	train, val int
	corrupt    float64
	reg        float64
	center     bool
	ns, ts     []int
	memTs      []int
	trunc      int
	seed       uint64
	out        string
	quiet      bool
}

// maxSteps bounds -N, -T and -memT: ITD keeps T iterates of y (62720
// bytes each for hyper-cleaning with 1000 samples), so T = 10⁴ keeps
// 0.6 GB.
const maxSteps = 10000

var allModels = []string{"cleaning", "logistic"}

func main() {
	experiment.Main("compare", parseFlags, func(c config) error {
		_, err := run(c, os.Stdout, os.Stderr)
		return err
	})
}

// parseFlags reads and checks the command line, without doing any work.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	var modelList, ns, ts, memTs string
	fs.StringVar(&modelList, "model", strings.Join(allModels, ","), "models to compare, comma-separated: cleaning (data hyper-cleaning), logistic (per-pixel regularized logistic regression)")
	fs.StringVar(&c.dataDir, "data", "embedded", "the images: "+experiment.DataHelp)
	fs.IntVar(&c.train, "train", 1000, "training samples (lower level)")
	fs.IntVar(&c.val, "val", 500, "validation samples (upper level)")
	fs.Float64Var(&c.corrupt, "corrupt", 0.5, "hyper-cleaning: probability in [0, 1] that a training label is replaced by a random class")
	fs.Float64Var(&c.reg, "reg", 0.01, "strength (> 0) of the L2 penalty at the point compared: C_r for hyper-cleaning (the paper's 0.001 makes g 10× worse conditioned), the mean of e^λ_j/(c·d) for logistic regression")
	fs.BoolVar(&c.center, "center", true, "subtract the training mean from every pixel (better-conditioned inner problems)")
	fs.StringVar(&ns, "N", "1,2,5,10,20,50,100", fmt.Sprintf("AID linear-solver steps to try, comma-separated, 1 to %d each", maxSteps))
	fs.StringVar(&ts, "T", "5,10,20,50,100,200", fmt.Sprintf("ITD inner steps to try, comma-separated, 1 to %d each", maxSteps))
	fs.StringVar(&memTs, "memT", "10,100,1000", fmt.Sprintf("inner steps at which ITD's and AID's memory is measured (first model only), 1 to %d each; the growth per step needs two or more", maxSteps))
	fs.IntVar(&c.trunc, "K", 10, "truncated ITD: back-propagate through the last K ≥ 1 steps only")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed (data subset, label corruption, the point x)")
	fs.StringVar(&c.out, "out", "out/compare", "folder for CSV, JSON and PNG output")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress report")
	experiment.Usage(fs, "compare", "Compares AID and ITD hypergradients with the exact one.", nil, nil)
	if err := experiment.Parse(fs, args); err != nil {
		return c, err
	}
	var ck experiment.Check
	c.models = ck.Names("model", modelList, allModels)
	ck.Data("data", c.dataDir)
	ck.Int("train", c.train, 1, experiment.MaxSamples)
	ck.Int("val", c.val, 1, experiment.MaxSamples)
	ck.Probability("corrupt", c.corrupt)
	ck.Positive("reg", c.reg)
	c.ns = ck.Ints("N", ns, 1, maxSteps)
	c.ts = ck.Ints("T", ts, 1, maxSteps)
	c.memTs = ck.Ints("memT", memTs, 1, maxSteps)
	ck.Int("K", c.trunc, 1, maxSteps)
	ck.Out("out", c.out)
	return c, ck.Err()
}

// row is one hypergradient computation.
type row struct {
	Model, Method string
	Steps         int
	RelError      float64
	Seconds       float64
	GradG, GradF  int
	HVP, Mixed    int
	AllocBytes    uint64
}

type memRow struct {
	Method        string
	T             int
	RetainedBytes int64
	Seconds       float64
}

// run performs the comparison and returns the figures of the result line.
func run(c config, stdout, stderr io.Writer) (map[string]any, error) {
	start := time.Now()
	path, err := report.OutDir(c.out)
	if err != nil {
		return nil, err
	}
	images, err := experiment.LoadImages(c.dataDir)
	if err != nil {
		return nil, err
	}
	train := images.Train
	if c.train+c.val > train.N {
		return nil, fmt.Errorf("-train %d plus -val %d exceed the %d training images of %s", c.train, c.val, train.N, c.dataDir)
	}
	perm := rand.New(rand.NewPCG(c.seed, 11)).Perm(train.N)
	tr, va := train.Subset(perm[:c.train]), train.Subset(perm[c.train:c.train+c.val])
	if c.center {
		experiment.Center(tr, va)
	}

	var rows []row
	var mem []memRow
	result := map[string]any{}
	total := len(c.models) * (3*len(c.ns) + 3*len(c.ts) + 1)
	var w io.Writer
	if !c.quiet {
		w = stderr
	}
	bar := report.NewProgress(w, "compare", total+2*len(c.memTs))
	for mi, name := range c.models {
		p, x, err := buildModel(name, tr, va, c)
		if err != nil {
			return nil, err
		}
		e, err := newExperiment(name, p, x)
		if err != nil {
			return nil, err
		}
		bar.Step(name + ": exact hypergradient")
		rs, err := e.compare(c, bar)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
		best := map[string]float64{}
		for _, r := range rs {
			k := strings.ToLower(strings.NewReplacer("-", "_", " ", "_", "(", "", ")", "", "=", "").Replace(r.Method))
			if v, ok := best[k]; !ok || r.RelError < v {
				best[k] = r.RelError
			}
		}
		for k, v := range best {
			result[name+"_"+k+"_err"] = v
		}
		if mi == 0 {
			m, err := e.memory(c, bar)
			if err != nil {
				return nil, err
			}
			mem = append(mem, m...)
			result["y_bytes"] = p.DimY() * 8
			// The growth per step needs two values of -memT.
			if itd, ok := memSlope(m, "ITD"); ok {
				result["itd_bytes_per_step"] = math.Round(itd)
			}
			if aid, ok := memSlope(m, "AID-CG"); ok {
				result["aid_bytes_growth"] = aid
			} else {
				fmt.Fprintln(stdout, "memory: the growth per step needs two or more values of -memT; itd_bytes_per_step and aid_bytes_growth are left out")
			}
		}
	}
	printTable(stdout, rows, mem)
	if err := write(path, rows, mem, c); err != nil {
		return nil, err
	}
	result["seconds"] = math.Round(time.Since(start).Seconds()*10) / 10
	report.Result(stdout, result)
	return result, nil
}

// buildModel returns a compiled model and the point x at which the
// hypergradients are compared.
func buildModel(name string, tr, va *data.Dataset, c config) (*graph.Problem, []float64, error) {
	rng := rand.New(rand.NewPCG(c.seed, 12))
	switch name {
	case "cleaning":
		noisy, _, err := tr.Corrupt(c.corrupt, c.seed)
		if err != nil {
			return nil, nil, err
		}
		m, err := models.HyperCleaning(experiment.ModelData(noisy), experiment.ModelData(va), tr.Classes, models.CleaningSettings{Cr: c.reg})
		if err != nil {
			return nil, nil, err
		}
		p, err := m.Compile()
		if err != nil {
			return nil, nil, err
		}
		x := p.X0(nil)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return p, x, nil
	case "logistic":
		m, err := models.LogisticRegression(experiment.ModelData(tr), experiment.ModelData(va), tr.Classes, models.LogisticSettings{})
		if err != nil {
			return nil, nil, err
		}
		p, err := m.Compile()
		if err != nil {
			return nil, nil, err
		}
		// Penalty weights e^λ_j/(c·d) around reg·(1 ± 50%).
		x := p.X0(nil)
		base := math.Log(c.reg * float64(tr.Classes*tr.D))
		for i := range x {
			x[i] = base + 0.5*rng.NormFloat64()
		}
		return p, x, nil
	}
	return nil, nil, fmt.Errorf("unknown model %q (want cleaning or logistic)", name)
}

// comparison holds one model at one point x with its exact hypergradient.
type comparison struct {
	name         string
	p            *graph.Problem
	x, ystar     []float64
	exact        []float64
	lmax         float64 // largest eigenvalue of ∇yy g along the path
	solveSeconds float64
}

func newExperiment(name string, p *graph.Problem, x []float64) (*comparison, error) {
	e := &comparison{name: name, p: p, x: x}
	t := time.Now()
	// y*(x) to ‖∇y g‖ ≤ 1e-10·max(1, ‖∇y g(y0)‖), by Newton-CG.
	y0 := p.Y0(nil)
	g0 := make([]float64, p.DimY())
	p.GradG(nil, g0, x, y0, nil)
	sol, err := bilevel.SolveLower(p, x, &bilevel.Settings{Tol: 1e-10 * math.Max(1, floats.Norm(g0, 2)), Y0: y0})
	if err != nil {
		return nil, fmt.Errorf("%s: solving the inner problem: %w", name, err)
	}
	y := sol.Y
	e.ystar = y
	e.exact = make([]float64, p.DimX())
	res, err := implicit.Hypergradient(e.exact, p, x, y, &implicit.Settings{
		Solver: &implicit.CG{Tol: 1e-13, MaxIter: 10 * p.DimY()}})
	if err != nil {
		return nil, fmt.Errorf("%s: exact hypergradient: %w", name, err)
	}
	if !res.Converged {
		return nil, fmt.Errorf("%s: exact hypergradient: CG stopped at residual %.2e after %d steps", name, res.Residual, res.Iterations)
	}
	e.solveSeconds = time.Since(t).Seconds()
	// The step sizes of ITD and of the Neumann and fixed-point solvers come
	// from the largest Hessian eigenvalue at the start and at the solution.
	for _, yy := range [][]float64{p.Y0(nil), y} {
		l := p.Linearize(x, yy, nil)
		lm, err := implicit.LargestEigenvalue(l.HVP, p.DimY(), 100, 1)
		if err != nil {
			return nil, err
		}
		e.lmax = math.Max(e.lmax, lm)
	}
	e.lmax *= 1.05 // the Lanczos estimate approaches λmax from below
	return e, nil
}

// measure runs f, returning its wall time, the bytes it allocated and the
// oracle calls it made.
func (e *comparison) measure(method string, steps int, f func(dst []float64) error) (row, error) {
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	s0 := e.p.Stats()
	dst := make([]float64, e.p.DimX())
	t := time.Now()
	err := f(dst)
	sec := time.Since(t).Seconds()
	runtime.ReadMemStats(&ms1)
	s1 := e.p.Stats()
	if err != nil {
		return row{}, fmt.Errorf("%s: %s with %d steps: %w", e.name, method, steps, err)
	}
	return row{Model: e.name, Method: method, Steps: steps, RelError: relErr(dst, e.exact), Seconds: sec,
		GradG: s1.LowerGradients - s0.LowerGradients, GradF: s1.UpperGradients - s0.UpperGradients,
		HVP: s1.HessVecProducts - s0.HessVecProducts, Mixed: s1.MixedXYProducts - s0.MixedXYProducts,
		AllocBytes: ms1.TotalAlloc - ms0.TotalAlloc}, nil
}

func relErr(a, b []float64) float64 {
	d := make([]float64, len(a))
	floats.SubTo(d, a, b)
	return floats.Norm(d, 2) / floats.Norm(b, 2)
}

// aid computes the AID hypergradient at y with a solver, solving on a
// linearization of g at (x, y).
func (e *comparison) aid(dst, y []float64, s implicit.Solver) error {
	p := e.p
	fx, fy := make([]float64, p.DimX()), make([]float64, p.DimY())
	p.GradF(fx, fy, e.x, y, nil)
	l := p.Linearize(e.x, y, nil)
	v := make([]float64, p.DimY())
	if _, err := s.Solve(v, l.HVP, fy); err != nil {
		return err
	}
	l.MixedXY(dst, v)
	floats.SubTo(dst, fx, dst)
	return nil
}

func (e *comparison) compare(c config, bar *report.Progress) ([]row, error) {
	var rows []row
	add := func(method string, steps int, f func(dst []float64) error) error {
		r, err := e.measure(method, steps, f)
		if err != nil {
			return err
		}
		rows = append(rows, r)
		bar.Step(fmt.Sprintf("%s %s %d: error %.1e", e.name, method, steps, r.RelError))
		return nil
	}
	eta := 1 / e.lmax
	for _, n := range c.ns {
		solvers := []struct {
			name string
			s    implicit.Solver
		}{
			{"AID-CG", &implicit.CG{Tol: -1, MaxIter: n}},
			{"AID-Neumann", &implicit.Neumann{Eta: eta, Terms: n, LambdaMax: e.lmax}},
			{"AID-FP", &implicit.FixedPoint{Eta: eta, MaxIter: n, Tol: -1}},
		}
		for _, s := range solvers {
			if err := add(s.name, n, func(dst []float64) error { return e.aid(dst, e.ystar, s.s) }); err != nil {
				return nil, err
			}
		}
	}
	y0 := e.p.Y0(nil)
	for _, t := range c.ts {
		itd := func(k int) func(dst []float64) error {
			return func(dst []float64) error {
				u := &unroll.Unroller{Steps: t, Alpha: eta, Truncate: k}
				_, err := u.Hypergradient(dst, e.p, e.x, y0, nil)
				return err
			}
		}
		if err := add("ITD", t, itd(0)); err != nil {
			return nil, err
		}
		if err := add(fmt.Sprintf("ITD-trunc(K=%d)", c.trunc), t, itd(c.trunc)); err != nil {
			return nil, err
		}
		// AID after the same T inner steps: paper 003's AID-BiO with D = T
		// and N = 20 CG steps.
		if err := add("AID-CG(N=20) at y_T", t, func(dst []float64) error {
			u := &unroll.Unroller{Steps: t, Alpha: eta, Truncate: 1}
			if err := u.Forward(e.p, e.x, y0); err != nil {
				return err
			}
			return e.aid(dst, u.Final(), &implicit.CG{Tol: -1, MaxIter: 20})
		}); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// heapGrowth returns the growth of the live heap, after collections,
// across a call of f. Two collections each time empty the sync.Pool caches
// (graph keeps scratch for matrix products there), which survive one.
func heapGrowth(f func()) int64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&b)
	return int64(b.HeapAlloc) - int64(a.HeapAlloc)
}

// itdForward runs T inner steps storing the iterates and returns the heap
// they keep. The reverse sweep allocates nothing (see unroll's
// benchmarks), so this is ITD's peak.
func (e *comparison) itdForward(t int) (int64, error) {
	var err error
	var u *unroll.Unroller
	grown := heapGrowth(func() {
		u = &unroll.Unroller{Steps: t, Alpha: 1 / e.lmax}
		err = u.Forward(e.p, e.x, e.p.Y0(nil))
	})
	runtime.KeepAlive(u)
	return grown, err
}

// aidSolve runs N CG steps on a linearization at y* and returns the heap
// the solve keeps.
func (e *comparison) aidSolve(n int) (int64, error) {
	fy := make([]float64, e.p.DimY())
	e.p.GradF(nil, fy, e.x, e.ystar, nil)
	l := e.p.Linearize(e.x, e.ystar, nil)
	v := make([]float64, e.p.DimY())
	cg := &implicit.CG{Tol: -1, MaxIter: n}
	var err error
	grown := heapGrowth(func() { _, err = cg.Solve(v, l.HVP, fy) })
	runtime.KeepAlive(cg)
	return grown, err
}

// memory measures the heap that ITD's stored iterates and AID's solver
// keep, for each T of -memT.
func (e *comparison) memory(c config, bar *report.Progress) ([]memRow, error) {
	var rows []memRow
	for _, t := range c.memTs {
		start := time.Now()
		bytes, err := e.itdForward(t)
		if err != nil {
			return nil, err
		}
		rows = append(rows, memRow{"ITD", t, bytes, time.Since(start).Seconds()})
		bar.Step(fmt.Sprintf("memory: ITD T=%d keeps %d bytes", t, bytes))
		start = time.Now()
		if bytes, err = e.aidSolve(t); err != nil {
			return nil, err
		}
		rows = append(rows, memRow{"AID-CG", t, bytes, time.Since(start).Seconds()})
		bar.Step(fmt.Sprintf("memory: AID-CG N=%d keeps %d bytes", t, bytes))
	}
	return rows, nil
}

// memSlope is the least-squares slope of retained bytes against T, if
// there are two or more values of T.
func memSlope(rows []memRow, method string) (float64, bool) {
	var xs, ys []float64
	for _, r := range rows {
		if r.Method == method {
			xs = append(xs, float64(r.T))
			ys = append(ys, float64(r.RetainedBytes))
		}
	}
	mx, my := floats.Sum(xs)/float64(len(xs)), floats.Sum(ys)/float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0, false
	}
	return num / den, true
}

func printTable(out io.Writer, rows []row, mem []memRow) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "model\tmethod\tN or T\trel. error\tms\t∇g\t∇f\tHVP\t∇xy g·v\talloc KiB\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%.2e\t%.1f\t%d\t%d\t%d\t%d\t%d\t\n", r.Model, r.Method, r.Steps, r.RelError,
			r.Seconds*1000, r.GradG, r.GradF, r.HVP, r.Mixed, r.AllocBytes/1024)
	}
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "memory\tT or N\tretained bytes\ts\t")
	for _, r := range mem {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t\n", r.Method, r.T, r.RetainedBytes, r.Seconds)
	}
	w.Flush()
}

func write(path func(string) string, rows []row, mem []memRow, c config) error {
	t := report.Table{Columns: []string{"model", "method", "steps", "rel_error", "seconds", "grad_g", "grad_f", "hvp", "mixed_xy", "alloc_bytes"}}
	for _, r := range rows {
		t.Add(r.Model, r.Method, r.Steps, r.RelError, r.Seconds, r.GradG, r.GradF, r.HVP, r.Mixed, r.AllocBytes)
	}
	if err := t.WriteCSV(path("results.csv")); err != nil {
		return err
	}
	m := report.Table{Columns: []string{"method", "steps", "retained_bytes", "seconds"}}
	for _, r := range mem {
		m.Add(r.Method, r.T, r.RetainedBytes, r.Seconds)
	}
	if err := m.WriteCSV(path("memory.csv")); err != nil {
		return err
	}
	if err := report.WriteJSON(path("summary.json"), map[string]any{
		"models": c.models, "data": c.dataDir, "train": c.train, "val": c.val, "corrupt": c.corrupt, "reg": c.reg, "center": c.center,
		"seed": c.seed, "results": rows, "memory": mem}); err != nil {
		return err
	}
	for _, model := range c.models {
		for _, pl := range []struct {
			file, title, x string
			methods        []string
			time           bool
		}{
			{"_aid_error_vs_N.png", "AID at y*(x)", "linear-solver steps N", []string{"AID-CG", "AID-Neumann", "AID-FP"}, false},
			{"_itd_error_vs_T.png", "after T inner steps from y = 0", "inner steps T",
				[]string{"ITD", fmt.Sprintf("ITD-trunc(K=%d)", c.trunc), "AID-CG(N=20) at y_T"}, false},
			{"_error_vs_time.png", "against time", "seconds (points joined in the order of N or T)", nil, true},
		} {
			series := map[string]*report.Series{}
			var order []string
			for _, r := range rows {
				if r.Model != model || pl.methods != nil && !slices.Contains(pl.methods, r.Method) {
					continue
				}
				s, ok := series[r.Method]
				if !ok {
					s = &report.Series{Name: r.Method}
					series[r.Method] = s
					order = append(order, r.Method)
				}
				x := float64(r.Steps)
				if pl.time {
					x = r.Seconds
				}
				s.X, s.Y = append(s.X, x), append(s.Y, r.RelError)
			}
			p := report.Plot{Title: model + ": hypergradient error, " + pl.title, XLabel: pl.x,
				YLabel: "relative error", XScale: report.Log, YScale: report.Log}
			for _, m := range order {
				p.Series = append(p.Series, *series[m])
			}
			if err := p.Save(path(model + pl.file)); err != nil {
				return err
			}
		}
	}
	p := report.Plot{Title: "memory kept during the hypergradient", XLabel: "T (ITD) or N (AID)", YLabel: "bytes kept",
		XScale: report.Log, YScale: report.Log}
	for _, method := range []string{"ITD", "AID-CG"} {
		s := report.Series{Name: method}
		for _, r := range mem {
			if r.Method == method {
				s.X, s.Y = append(s.X, float64(r.T)), append(s.Y, float64(r.RetainedBytes))
			}
		}
		p.Series = append(p.Series, s)
	}
	return p.Save(path("memory.png"))
}
