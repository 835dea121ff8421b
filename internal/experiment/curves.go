package experiment

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/internal/report"
	"github.com/gobilevel/bilevel/optim"
)

// Curve is a sampled function, X increasing.
type Curve struct {
	X, Y []float64
}

// At returns the value of c at x read as a step function: the Y of the
// last sample with X ≤ x; NaN before the first sample or after the last
// (a run is not extrapolated past its end).
func (c Curve) At(x float64) float64 {
	if len(c.X) == 0 || x < c.X[0] || x > c.X[len(c.X)-1] {
		return math.NaN()
	}
	i := sort.SearchFloat64s(c.X, x)
	if i == len(c.X) || c.X[i] > x {
		i--
	}
	return c.Y[i]
}

// Held returns c with its last value held up to x: a run that finished
// its budget before x delivers that value at x. It returns c when c is
// empty or already reaches x.
func (c Curve) Held(x float64) Curve {
	n := len(c.X)
	if n == 0 || c.X[n-1] >= x {
		return c
	}
	return Curve{X: append(c.X[:n:n], x), Y: append(c.Y[:n:n], c.Y[n-1])}
}

// Median returns, at each grid point, the median of the curves' values
// there (NaN values ignored; NaN where every curve is NaN).
func Median(curves []Curve, grid []float64) []float64 {
	out := make([]float64, len(grid))
	vals := make([]float64, 0, len(curves))
	for i, x := range grid {
		vals = vals[:0]
		for _, c := range curves {
			if v := c.At(x); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		out[i] = MedianOf(vals)
	}
	return out
}

// MedianOf returns the median of vals (NaN for none); vals is reordered.
func MedianOf(vals []float64) float64 {
	n := len(vals)
	if n == 0 {
		return math.NaN()
	}
	sort.Float64s(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	return (vals[n/2-1] + vals[n/2]) / 2
}

// Grid returns n+1 points evenly spaced from 0 to hi, the last exactly hi
// (hi·n/n can round past it, and a median's last point past every curve
// would be NaN).
func Grid(hi float64, n int) []float64 {
	g := make([]float64, n+1)
	for i := range g {
		g[i] = hi * float64(i) / float64(n)
	}
	g[n] = hi
	return g
}

// Axis selects the x-coordinate of a checkpoint.
type Axis int

const (
	Seconds Axis = iota // solver time, optim.State.Elapsed
	Samples             // per-sample oracle evaluations
	Drawn               // samples drawn
	Iters               // outer iterations
	Oracles             // oracle calls
)

// Label names the axis for plots.
func (a Axis) Label() string {
	switch a {
	case Seconds:
		return "seconds (solver time)"
	case Samples:
		return "per-sample oracle evaluations"
	case Drawn:
		return "samples drawn"
	case Iters:
		return "iterations"
	}
	return "oracle calls"
}

// Of returns the axis coordinate of pt.
func (a Axis) Of(pt Point) float64 {
	switch a {
	case Seconds:
		return pt.Seconds
	case Samples:
		return float64(pt.Samples)
	case Drawn:
		return float64(pt.Drawn)
	case Iters:
		return float64(pt.Iter)
	}
	return float64(pt.Oracles)
}

// CurveOf returns metric against axis along the trace.
func CurveOf(t *Trace, axis Axis, metric string) Curve {
	var c Curve
	for _, pt := range t.Points {
		c.X, c.Y = append(c.X, axis.Of(pt)), append(c.Y, pt.Metrics[metric])
	}
	return c
}

// MedianSeries is the median over the traces (seeds) of metric against
// axis: the median of the starting points, then the median on a grid of 60
// points up to the longest trace, a finished trace holding its last value
// after its end (on a time axis the seeds end at different times, and a
// median over the runs still going would end on the slowest seed's value
// alone), from where every trace has passed its
// first checkpoint after the start (before it a trace would contribute
// its stale starting value, which for a method with costly iterations,
// such as a full-batch AID, drew a plateau at the start value that is no
// run's progress); one trace is returned as it is. Runs that stopped early
// are named in the series' note (FailureNote); one that failed in its first
// iteration adds no point (its lone start, at a time of microseconds,
// stretched logarithmic time axes by decades).
func MedianSeries(name string, traces []*Trace, axis Axis, metric string) report.Series {
	var cs []Curve
	var finished []bool
	hi, begun := 0.0, 0.0
	var starts []float64
	for _, t := range traces {
		c := CurveOf(t, axis, metric)
		if len(c.X) == 0 || failedAtStart(t) {
			continue
		}
		cs, finished = append(cs, c), append(finished, t.Err == nil)
		hi = math.Max(hi, c.X[len(c.X)-1])
		starts = append(starts, c.Y[0])
		if len(c.X) > 1 {
			begun = math.Max(begun, c.X[1])
		}
	}
	for i := range cs {
		if finished[i] { // a run that stopped on an error delivers nothing after it
			cs[i] = cs[i].Held(hi)
		}
	}
	s := report.Series{Name: name, Note: FailureNote(traces)}
	switch len(cs) {
	case 0:
	case 1:
		s.X, s.Y = cs[0].X, cs[0].Y
	default:
		s.X, s.Y = []float64{cs[0].X[0]}, []float64{MedianOf(starts)}
		var grid []float64
		for _, x := range Grid(hi, 60) {
			if x >= begun && x > s.X[0] {
				grid = append(grid, x)
			}
		}
		s.X, s.Y = append(s.X, grid...), append(s.Y, Median(cs, grid)...)
	}
	return s
}

// failedAtStart reports whether t stopped with an error before it
// completed an iteration.
func failedAtStart(t *Trace) bool {
	return t.Err != nil && (len(t.Points) == 0 || t.Last().Iter == 0)
}

// FailureNote says which of the runs stopped early, and why, for a
// legend: "" when none did, Trace.Brief of the run when one did, and
// how many of them with the first reason when several did.
func FailureNote(traces []*Trace) string {
	var failed []*Trace
	for _, t := range traces {
		if t.Err != nil {
			failed = append(failed, t)
		}
	}
	switch {
	case len(failed) == 0:
		return ""
	case len(traces) == 1:
		return failed[0].Brief()
	}
	return fmt.Sprintf("%d of %d runs stopped early; one %s", len(failed), len(traces), failed[0].Brief())
}

// Brief is the legend form of a failed run's outcome, "stopped at
// iteration 0: negative curvature in CG (dᵀHd = −114, H the Hessian of g
// in y)": the iteration and the cause without the chain of callers and
// the advice, which the CSV and JSON files keep (Trace.Err); "" for a run
// that did not fail.
func (t *Trace) Brief() string {
	if t.Err == nil {
		return ""
	}
	iter := 0
	if t.State != nil {
		iter = t.State.Iter
	}
	return fmt.Sprintf("stopped at iteration %d: %s", iter, cause(t.Err))
}

// maxCause is the most characters cause gives an error it does not know.
const maxCause = 100

// cause says in a few words why err stopped a run.
func cause(err error) string {
	num := func(v float64) string { return strings.Replace(strconv.FormatFloat(v, 'g', 3, 64), "-", "−", 1) }
	var (
		curv  *implicit.CurvatureError
		div   *implicit.DivergenceError
		brk   *implicit.BreakdownError
		step  *implicit.StepSizeError
		nonfi *optim.NonFiniteError
	)
	switch {
	case errors.As(err, &curv):
		return fmt.Sprintf("negative curvature in CG (dᵀHd = %s, H the Hessian of g in y)", num(curv.Curvature))
	case errors.As(err, &div):
		return fmt.Sprintf("%s diverged (step η = %s too large, or the Hessian of g in y not positive definite)", div.Solver, num(div.Eta))
	case errors.As(err, &brk):
		return fmt.Sprintf("%s breakdown (%s = %v)", brk.Solver, brk.Quantity, brk.Value)
	case errors.As(err, &step):
		return fmt.Sprintf("%s step η = %s too large (η·λmax = %s)", step.Solver, num(step.Eta), num(step.Eta*step.LambdaMax))
	case errors.As(err, &nonfi):
		where := nonfi.Oracle
		if where == "" {
			where = nonfi.Var
		}
		return fmt.Sprintf("%v in %s", nonfi.Value, where)
	}
	// The innermost error says what happened; the wrappers, where.
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		err = e
	}
	msg := err.Error()
	if pkg, rest, ok := strings.Cut(msg, ": "); ok && !strings.Contains(pkg, " ") {
		msg = rest // "implicit: …", "optim: …"
	}
	if r := []rune(msg); len(r) > maxCause {
		msg = string(r[:maxCause-1]) + "…"
	}
	return msg
}

// Flat is a horizontal reference line at v from 0 to hi, for baselines.
func Flat(name string, v, hi float64) report.Series {
	return report.Series{Name: name, X: []float64{0, hi}, Y: []float64{v, v}, Reference: true}
}

// MaxX returns the largest x of the series.
func MaxX(series []report.Series) float64 {
	hi := 0.0
	for _, s := range series {
		for _, x := range s.X {
			hi = math.Max(hi, x)
		}
	}
	return hi
}

// Failed adds to a program's result line the key "failed", the runs that
// stopped early (their labels, comma-separated), when there are any, and
// returns an error when all of the runs failed, so that the program exits
// with a non-zero status.
func Failed(result map[string]any, failed []string, runs int) error {
	if len(failed) == 0 {
		return nil
	}
	result["failed"] = strings.Join(failed, ",")
	if len(failed) >= runs {
		return fmt.Errorf("every run failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// MedianFinite returns the median of the finite values among vals (NaN
// when there is none).
func MedianFinite(vals []float64) float64 {
	var fin []float64
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			fin = append(fin, v)
		}
	}
	return MedianOf(fin)
}
