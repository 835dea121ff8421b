package experiment

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

// Budget bounds one run of a method and says where it is measured.
type Budget struct {
	// Time stops the run when the solver's own time (optim.State.Elapsed,
	// evaluation excluded) reaches it; 0: no time limit.
	Time time.Duration
	// Iters stops the run after this many outer iterations; 0: no limit.
	Iters int
	// Samples stops the run once it has made this many per-sample oracle
	// evaluations (Counting.Samples; the run needs a Counting), give or
	// take one iteration; 0: no limit. Unlike Time it does not depend on
	// the machine or its load. One of Time, Iters and Samples must be set.
	Samples int64
	// Drawn stops the run once it has drawn this many samples
	// (Counting.Drawn), give or take one iteration; 0: no limit.
	Drawn int64
	// Points is the number of checkpoints after the start (default 40),
	// spaced evenly in time when Time is set, else in samples when Samples
	// or Drawn is set, else evenly in iterations (geometrically if
	// LogIters).
	Points   int
	LogIters bool
	// Cap, if positive, also stops the run when the solver's time reaches
	// it, whichever budget above is in use (a guard for slow methods).
	Cap time.Duration
}

// Point is the state of a run at a checkpoint.
type Point struct {
	Iter    int
	Seconds float64 // optim.State.Elapsed
	Calls   oracle.Calls
	// Oracles is the number of oracle calls (gradients, Hessian-vector
	// and mixed products; objective values excluded); Samples the number of
	// per-sample evaluations they made (a call on a batch of b samples
	// counts b), when the problem was wrapped in a Counting.
	Oracles int64
	Samples int64
	Drawn   int64
	Metrics map[string]float64
}

// Trace is one run: its checkpoints, final state and outcome.
type Trace struct {
	Points []Point
	State  *optim.State
	Status optim.Status
	// Err is the error that stopped the run (a diverging method, say), nil
	// if it ran to its budget.
	Err error
}

// Last returns the last checkpoint.
func (t *Trace) Last() Point { return t.Points[len(t.Points)-1] }

// Run solves p with method m from (x0, y0) under the settings s (seed,
// sampling, projections; its MaxIter, MaxTime and EvalEvery are replaced)
// and the budget b, and calls eval at the start and at every checkpoint.
// It drives optim.Solve and then optim.Resume from checkpoint to
// checkpoint, which gives exactly the iterates of one uninterrupted run, so
// evaluation costs the solver nothing and is not in its time. counting,
// if not nil, is the Counting that p is, read for
// Point.Samples and Point.Drawn.
//
// A run that fails (a NaN, a breakdown) ends with the error in Trace.Err
// and the checkpoints reached so far; Run itself returns an error only for
// invalid settings.
func Run(p oracle.Problem, x0, y0 []float64, m optim.Method, s optim.Settings, b Budget, counting *Counting,
	eval func(st *optim.State) map[string]float64) (*Trace, error) {
	if b.Time <= 0 && b.Iters <= 0 && b.Samples <= 0 && b.Drawn <= 0 {
		return nil, errors.New("experiment.Run: set a time, sample or iteration budget")
	}
	if (b.Samples > 0 || b.Drawn > 0) && counting == nil {
		return nil, errors.New("experiment.Run: a sample budget needs a Counting")
	}
	points := b.Points
	if points <= 0 {
		points = 40
	}
	maxIter := b.Iters
	if maxIter <= 0 {
		maxIter = math.MaxInt32
	}
	s.MaxIter, s.EvalEvery = maxIter, -1
	var base, baseDrawn int64
	if counting != nil {
		base, baseDrawn = counting.Samples(), counting.Drawn()
	}
	tr := &Trace{}
	record := func(st *optim.State) {
		pt := Point{Iter: st.Iter, Seconds: st.Elapsed.Seconds(), Calls: st.Calls}
		pt.Oracles = st.Calls.Products()
		if counting != nil {
			pt.Samples = counting.Samples() - base
			pt.Drawn = counting.Drawn() - baseDrawn
		}
		if eval != nil {
			pt.Metrics = eval(st)
		}
		tr.Points = append(tr.Points, pt)
	}
	record(optim.NewState(x0, y0, s.Seed))

	var st *optim.State
	// advance runs the solver until stop(st) or the iteration limit iters,
	// recording nothing; it returns false when the run is over.
	advance := func(iters int, tm time.Duration) bool {
		if b.Cap > 0 && (tm == 0 || tm > b.Cap) {
			tm = b.Cap
		}
		s.MaxIter, s.MaxTime = min(iters, maxIter), tm
		var res *optim.Result
		var err error
		if st == nil {
			res, err = optim.Solve(p, x0, y0, &s, m)
		} else {
			res, err = optim.Resume(p, st, &s, m)
		}
		if res == nil {
			tr.Err = err
			return false
		}
		st = res.State
		tr.State, tr.Status = st, res.Status
		if err != nil {
			tr.Err = err
			return false
		}
		if b.Cap > 0 && st.Elapsed >= b.Cap {
			return false
		}
		return !(res.Status == optim.IterationLimit && st.Iter >= maxIter)
	}
	used, budget := func() int64 { return counting.Samples() - base }, b.Samples
	if b.Drawn > 0 {
		used, budget = func() int64 { return counting.Drawn() - baseDrawn }, b.Drawn
	}
	for j := 1; j <= points; j++ {
		frac := float64(j) / float64(points)
		more := true
		switch {
		case b.Time > 0:
			tm := time.Duration(float64(b.Time) * frac)
			if st != nil && tm <= st.Elapsed {
				continue // this checkpoint was passed by one long iteration
			}
			more = advance(maxIter, tm)
		case budget > 0:
			target := int64(float64(budget) * frac)
			if st != nil && used() >= target {
				continue
			}
			if st == nil {
				more = advance(1, 0)
			}
			// Predict the iterations left from the cost so far; a few
			// rounds correct for methods whose cost varies.
			for more && used() < target {
				per := float64(used()) / float64(st.Iter)
				need := int(math.Ceil(float64(target-used()) / math.Max(per, 1)))
				more = advance(st.Iter+max(need, 1), 0)
			}
		default:
			var it int
			if b.LogIters {
				it = int(math.Round(math.Pow(float64(maxIter), frac)))
			} else {
				it = int(math.Round(float64(maxIter) * frac))
			}
			if st != nil && it <= st.Iter {
				continue
			}
			more = advance(max(it, 1), 0)
		}
		if st == nil {
			return nil, tr.Err // invalid settings: nothing ran
		}
		record(st)
		if !more {
			break
		}
	}
	return tr, nil
}

// Counting wraps an oracle.Problem and counts what its oracles consume.
//
// Samples counts per-sample evaluations: a call on a batch of b samples
// adds b, a call on the whole data set adds its size, and a dense matrix
// (oracle.Capabilities HessYY, HessXY) on b samples adds b·DimY or
// b·min(DimX, DimY), the products it stands for. Drawn counts the samples
// drawn: a batch passed to several oracles (the same slice, as methods do
// when they reuse a batch) is counted once; the whole data set counts its
// size at every call. The first is the cost in computation, the second the
// sample complexity of the papers. Objective values (F, G) are not
// counted. A Counting declares the wrapped problem's optional oracles,
// wrapped to count, and is itself the problem to hand to the solvers.
type Counting struct {
	oracle.Problem
	samples, drawn int64
	recent         [64][]int // the last batches seen, kept alive so that their addresses stay unique
	next           int
}

var _ oracle.Problem = (*Counting)(nil)

// NewCounting wraps p.
func NewCounting(p oracle.Problem) *Counting { return &Counting{Problem: p} }

// Samples returns the per-sample evaluations counted so far.
func (c *Counting) Samples() int64 { return c.samples }

// Drawn returns the samples drawn so far.
func (c *Counting) Drawn() int64 { return c.drawn }

func (c *Counting) add(batch []int, n int, per int64) {
	if batch == nil {
		c.samples += int64(n) * per
		c.drawn += int64(n)
		return
	}
	c.samples += int64(len(batch)) * per
	if len(batch) == 0 {
		return
	}
	for _, b := range c.recent {
		if len(b) > 0 && &b[0] == &batch[0] && len(b) == len(batch) {
			return
		}
	}
	c.drawn += int64(len(batch))
	c.recent[c.next] = batch
	c.next = (c.next + 1) % len(c.recent)
}

func (c *Counting) GradF(dx, dy, x, y []float64, batch []int) {
	c.add(batch, c.NumUpper(), 1)
	c.Problem.GradF(dx, dy, x, y, batch)
}

func (c *Counting) GradG(dx, dy, x, y []float64, batch []int) {
	c.add(batch, c.NumLower(), 1)
	c.Problem.GradG(dx, dy, x, y, batch)
}

func (c *Counting) HVP(dst, x, y, v []float64, batch []int) {
	c.add(batch, c.NumLower(), 1)
	c.Problem.HVP(dst, x, y, v, batch)
}

func (c *Counting) MixedXY(dst, x, y, v []float64, batch []int) {
	c.add(batch, c.NumLower(), 1)
	c.Problem.MixedXY(dst, x, y, v, batch)
}

func (c *Counting) MixedYX(dst, x, y, u []float64, batch []int) {
	c.add(batch, c.NumLower(), 1)
	c.Problem.MixedYX(dst, x, y, u, batch)
}

// Capabilities declares the wrapped problem's optional oracles, each
// counting what it consumes: a product of the linearized HVP operator as
// an HVP, a dense matrix as the products it stands for, and the oracles at
// a fixed outer point as those they stand for (countingFixed).
func (c *Counting) Capabilities() oracle.Capabilities {
	in := c.Problem.Capabilities()
	out := oracle.Capabilities{CheckBatch: in.CheckBatch, Err: in.Err}
	if in.FixX != nil {
		out.FixX = func(x []float64, batch []int) oracle.FixedLower {
			return &countingFixed{c: c, f: in.FixX(x, batch), batch: batch}
		}
	}
	if in.HVPAt != nil {
		out.HVPAt = func(x, y []float64, batch []int) func(dst, v []float64) {
			op := in.HVPAt(x, y, batch)
			return func(dst, v []float64) {
				c.add(batch, c.NumLower(), 1)
				op(dst, v)
			}
		}
	}
	if in.HessYY != nil {
		out.HessYY = func(dst *mat.SymDense, x, y []float64, batch []int) {
			c.add(batch, c.NumLower(), int64(c.DimY()))
			in.HessYY(dst, x, y, batch)
		}
	}
	if in.HessXY != nil {
		out.HessXY = func(dst *mat.Dense, x, y []float64, batch []int) {
			c.add(batch, c.NumLower(), int64(min(c.DimX(), c.DimY())))
			in.HessXY(dst, x, y, batch)
		}
	}
	return out
}

// countingFixed counts what the oracles at a fixed outer point
// (oracle.FixedLower) consume, as the oracles they stand for on the batch
// they were fixed at: GradG, HVP and each AddMixedXY add the batch's size
// to Samples, as GradG, HVP and MixedXY on that batch do (each still
// evaluates the part of g that depends on y on every sample), and the
// batch is drawn once however many calls use it, as a batch passed to
// several oracles is. Fixing x and MixedXYSum add nothing: the first is
// the shared part of the calls it serves, the second completes the mixed
// products added before it. A run therefore counts the same samples
// whether its problem declares FixX or not.
type countingFixed struct {
	c     *Counting
	f     oracle.FixedLower
	batch []int // the caller's slice, whose address identifies the draw
}

func (f *countingFixed) count() { f.c.add(f.batch, f.c.NumLower(), 1) }

func (f *countingFixed) GradG(dx, dy, y []float64) { f.count(); f.f.GradG(dx, dy, y) }

func (f *countingFixed) HVP(dst, y, v []float64) { f.count(); f.f.HVP(dst, y, v) }

func (f *countingFixed) AddMixedXY(y, v []float64) { f.count(); f.f.AddMixedXY(y, v) }

func (f *countingFixed) MixedXYSum(dst []float64) { f.f.MixedXYSum(dst) }

// Describe is a short description of a run's outcome for progress lines.
func (t *Trace) Describe() string {
	if t.Err != nil {
		return fmt.Sprintf("stopped at iteration %d: %v", t.State.Iter, t.Err)
	}
	return fmt.Sprintf("%d iterations in %.1fs", t.State.Iter, t.State.Elapsed.Seconds())
}

// LowerIterate returns a run's estimate of the lower-level solution y*(x),
// the model to evaluate: State.Y, except for F2SA, whose y minimizes
// f + λg and so is partly fit to the upper data; its z estimates y*(x)
// (optim.F2SA.LowerIterate).
func LowerIterate(m optim.Method, st *optim.State) []float64 {
	if f, ok := m.(optim.F2SA); ok {
		return f.LowerIterate(st)
	}
	return st.Y
}
