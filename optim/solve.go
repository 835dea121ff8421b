package optim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gobilevel/bilevel/oracle"
)

// DefaultMaxIter is the iteration limit when Settings.MaxIter is 0.
const DefaultMaxIter = 1000

// Settings control a run. The zero value runs DefaultMaxIter iterations with
// seed 0, no other stopping rule, the upper objective monitored at every
// iteration on the whole upper data set, and no recorder.
type Settings struct {
	// MaxIter bounds State.Iter, the total number of outer iterations
	// (counting those before a Resume). 0 means DefaultMaxIter.
	MaxIter int
	// MaxTime bounds State.Elapsed, the time spent in Init and Iterate
	// (monitoring excluded, counting time before a Resume). 0: no limit.
	MaxTime time.Duration
	// GradTol stops the run when an iteration's hypergradient-estimate norm
	// is ≤ GradTol. 0: off.
	GradTol float64
	// FTol stops the run when two successive monitored upper objectives
	// differ by at most FTol·max(1, |previous|). 0: off.
	FTol float64

	// EvalEvery is how often the upper objective f(x, y) and Metrics are
	// evaluated: after iterations k with k % EvalEvery == 0. 0 means every
	// iteration, < 0 never. These calls are not counted in Calls and their
	// time is not in Elapsed.
	EvalEvery int
	// EvalBatch is the upper-level batch on which f is monitored; nil is the
	// whole upper data set.
	EvalBatch []int
	// Metrics, if set, returns user figures (test loss, distance to a known
	// solution, ...) at the monitored iterations; it must not modify x or y.
	Metrics func(x, y []float64) map[string]float64
	// Recorder, if set, receives every iteration's Record. If it has a
	// Flush() error method, that is called when the run ends.
	Recorder Recorder

	// Seed seeds the run's random stream (PCG). Ignored by Resume, which
	// continues the stream saved in the State.
	Seed uint64
	// Sampling is how minibatches are drawn (default WithReplacement).
	Sampling Sampling
	// ProjectX constrains x: Solve projects x0 onto it and methods project
	// after each x-update. ProjectY constrains y for methods that support
	// it. nil: unconstrained.
	ProjectX, ProjectY Projection

	// Checkpoint saves the run to a file every few iterations, when it
	// stops and when it fails, atomically; the zero value saves nothing.
	// See CheckpointSettings.
	Checkpoint CheckpointSettings
}

// Status says why a run stopped.
type Status int

const (
	NotTerminated       Status = iota // the run has not stopped
	IterationLimit                    // State.Iter reached Settings.MaxIter
	TimeLimit                         // State.Elapsed reached Settings.MaxTime
	GradientThreshold                 // the hypergradient norm fell to Settings.GradTol
	FunctionConvergence               // the monitored f changed by at most Settings.FTol
	Failure                           // an error stopped the run
)

func (s Status) String() string {
	switch s {
	case NotTerminated:
		return "NotTerminated"
	case IterationLimit:
		return "IterationLimit"
	case TimeLimit:
		return "TimeLimit"
	case GradientThreshold:
		return "GradientThreshold"
	case FunctionConvergence:
		return "FunctionConvergence"
	case Failure:
		return "Failure"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is the outcome of a run.
type Result struct {
	// X and Y are State.X and State.Y (same memory).
	X, Y []float64
	// State is the final state, ready for MarshalBinary or Resume. After a
	// failure it is the last finite state, before the failing iteration.
	State *State
	// Status says why the run stopped.
	Status Status
	// Iter, Calls and Runtime are State.Iter, State.Calls and State.Elapsed.
	Iter    int
	Calls   oracle.Calls
	Runtime time.Duration
	// Upper is the last monitored upper objective (NaN if none);
	// HypergradNorm is the last iteration's estimate norm (NaN if none).
	Upper         float64
	HypergradNorm float64
}

// runContext is what a State needs from the Settings during a run.
type runContext struct {
	projX, projY Projection
	sampling     Sampling
}

// Solve minimizes Φ(x) = f(x, y*(x)) from (x0, y0) with method m (nil means
// AIDBiO{}) under settings s (nil means the zero Settings).
//
// Every oracle call goes through a counting wrapper of p; after every
// iteration Solve checks that the oracle outputs and x, y, v and the named
// vectors are finite, and on failure returns a *NonFiniteError with the
// Result of the last finite state (also saved to Settings.Checkpoint.Path,
// if set). It validates x0, y0 and s before any oracle call, and m in
// m.Init. The returned Result is non-nil whenever the run started, also
// with an error.
func Solve(p oracle.Problem, x0, y0 []float64, s *Settings, m Method) (*Result, error) {
	if p == nil {
		return nil, errors.New("optim: Solve: nil Problem")
	}
	if s == nil {
		s = &Settings{}
	}
	if len(x0) != p.DimX() {
		return nil, fmt.Errorf("optim: Solve: len(x0) = %d, but the problem has DimX() = %d", len(x0), p.DimX())
	}
	if len(y0) != p.DimY() {
		return nil, fmt.Errorf("optim: Solve: len(y0) = %d, but the problem has DimY() = %d", len(y0), p.DimY())
	}
	if err := validateSettings(p, s); err != nil {
		return nil, err
	}
	st := NewState(x0, y0, s.Seed)
	if s.ProjectX != nil {
		s.ProjectX.Project(st.X, st.X)
	}
	if s.ProjectY != nil {
		s.ProjectY.Project(st.Y, st.Y)
	}
	return run(p, st, s, orDefaultMethod(m), 0)
}

// orDefaultMethod returns m, or AIDBiO{} if m is nil.
func orDefaultMethod(m Method) Method {
	if m == nil {
		return AIDBiO{}
	}
	return m
}

// Resume continues a run from st, typically read with LoadCheckpoint from a
// checkpoint file (or decoded with UnmarshalBinary). With the same Problem,
// Settings (Seed aside) and Method as the original run, it gives bit for bit
// the iterates the original run would have given. It modifies st in place;
// on failure st holds the non-finite state and Result.State the last finite
// one.
//
// A State from LoadCheckpoint also carries its run's Method and Recorder
// position: Resume refuses another Method, and hands the position to
// Settings.Recorder if it implements encoding.BinaryUnmarshaler
// (MemoryRecorder and CSVRecorder do), so that the records continue those
// of the checkpointed run.
func Resume(p oracle.Problem, st *State, s *Settings, m Method) (*Result, error) {
	if p == nil || st == nil {
		return nil, errors.New("optim: Resume: nil Problem or State")
	}
	if s == nil {
		s = &Settings{}
	}
	if len(st.X) != p.DimX() || len(st.Y) != p.DimY() {
		return nil, fmt.Errorf("optim: Resume: State has len(X) = %d, len(Y) = %d, but the problem has DimX() = %d, DimY() = %d", len(st.X), len(st.Y), p.DimX(), p.DimY())
	}
	if st.rng == nil || st.pcg == nil {
		return nil, errors.New("optim: Resume: State has no random stream: make it with NewState or UnmarshalBinary")
	}
	if err := validateState(p, st); err != nil {
		return nil, err
	}
	if err := validateSettings(p, s); err != nil {
		return nil, err
	}
	m = orDefaultMethod(m)
	records := 0
	if ri := st.resume; ri != nil {
		if ri.method != "" && ri.method != methodName(m) {
			return nil, fmt.Errorf("optim: Resume: %s was written by a run of %s, not %s: pass the same Method, or start a new run with Solve from State.X and State.Y", ri.describe(), ri.method, methodName(m))
		}
		if err := restoreRecorder(ri, s.Recorder); err != nil {
			return nil, err
		}
		records = ri.records
		st.resume = nil
	}
	return run(p, st, s, m, records)
}

// validateState checks a State to resume against the problem.
func validateState(p oracle.Problem, st *State) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("optim: Resume: State does not fit the problem: "+format, args...)
	}
	if st.V != nil && len(st.V) != p.DimY() {
		return bad("len(V) = %d, DimY() = %d", len(st.V), p.DimY())
	}
	for _, o := range []struct {
		name string
		s    OptState
		n    int
	}{{"XOpt", st.XOpt, p.DimX()}, {"YOpt", st.YOpt, p.DimY()}} {
		if (o.s.M != nil && len(o.s.M) != o.n) || (o.s.S != nil && len(o.s.S) != o.n) || o.s.T < 0 {
			return bad("%s has T = %d, len(M) = %d, len(S) = %d for a variable of %d entries", o.name, o.s.T, len(o.s.M), len(o.s.S), o.n)
		}
	}
	if err := st.checkConsistent(); err != nil {
		return bad("%v", err)
	}
	for _, e := range []struct {
		name string
		ep   Epoch
		n    int
	}{{"LowerEpoch", st.LowerEpoch, p.NumLower()}, {"UpperEpoch", st.UpperEpoch, p.NumUpper()}} {
		if len(e.ep.Perm) > 0 && len(e.ep.Perm) != e.n {
			return bad("%s permutes %d samples, the data set has %d", e.name, len(e.ep.Perm), e.n)
		}
	}
	return nil
}

func validateSettings(p oracle.Problem, s *Settings) error {
	switch {
	case s.MaxIter < 0:
		return fmt.Errorf("optim: Settings.MaxIter = %d: set it ≥ 1, or 0 for %d", s.MaxIter, DefaultMaxIter)
	case s.MaxTime < 0:
		return fmt.Errorf("optim: Settings.MaxTime = %v: set it > 0, or 0 for no limit", s.MaxTime)
	case !(s.GradTol >= 0):
		return fmt.Errorf("optim: Settings.GradTol = %v: set it ≥ 0 (0 disables it)", s.GradTol)
	case !(s.FTol >= 0):
		return fmt.Errorf("optim: Settings.FTol = %v: set it ≥ 0 (0 disables it)", s.FTol)
	case s.Sampling != WithReplacement && s.Sampling != Shuffled:
		return fmt.Errorf("optim: Settings.Sampling = %d: use WithReplacement or Shuffled", s.Sampling)
	case s.EvalBatch != nil && len(s.EvalBatch) == 0:
		return errors.New("optim: Settings.EvalBatch is empty: list at least one upper-level sample, or leave it nil for the whole upper data set")
	}
	if err := validateCheckpoint(s.Checkpoint); err != nil {
		return err
	}
	for _, i := range s.EvalBatch {
		if i < 0 || i >= p.NumUpper() {
			return fmt.Errorf("optim: Settings.EvalBatch holds index %d outside [0, NumUpper() = %d)", i, p.NumUpper())
		}
	}
	if check := p.Capabilities().CheckBatch; check != nil && s.EvalBatch != nil {
		if err := check(true, len(s.EvalBatch)); err != nil {
			return fmt.Errorf("optim: Settings.EvalBatch of %d samples: %w", len(s.EvalBatch), err)
		}
	}
	for _, c := range []struct {
		name string
		pr   Projection
		n    int
	}{{"ProjectX", s.ProjectX, p.DimX()}, {"ProjectY", s.ProjectY, p.DimY()}} {
		if d, ok := c.pr.(interface{ Dim() int }); ok && d.Dim() != c.n {
			return fmt.Errorf("optim: Settings.%s has dimension %d, but the variable has %d", c.name, d.Dim(), c.n)
		}
	}
	return nil
}

// runner drives one run of a method: Solve and Resume make one and call
// run.
type runner struct {
	p      oracle.Problem
	st     *State
	s      *Settings
	m      Method
	cp     *counter
	res    *Result
	ck     *checkpointer
	backup *State // the last finite state, before the current iteration
}

// run drives m from st; records is the number of Records the run's
// lineage has already passed to a Recorder (for checkpoints).
func run(p oracle.Problem, st *State, s *Settings, m Method, records int) (*Result, error) {
	st.run = &runContext{projX: s.ProjectX, projY: s.ProjectY, sampling: s.Sampling}
	defer func() { st.run = nil }()
	r := &runner{p: p, st: st, s: s, m: m, cp: newCounter(p, &st.Calls), res: &Result{HypergradNorm: math.NaN()},
		ck: &checkpointer{s: s, method: methodName(m), records: records, saved: -1}}
	if err := r.init(); err != nil {
		return r.res, err
	}
	status := NotTerminated
	for status == NotTerminated {
		var err error
		if status, err = r.iterate(); err != nil {
			return r.res, err
		}
	}
	r.finish(st, status)
	if r.ck.saved != st.Iter {
		if err := r.ck.save(st); err != nil {
			r.res.Status = Failure
			return r.res, fmt.Errorf("optim: final checkpoint: %w", err)
		}
	}
	if err := r.flush(); err != nil {
		return r.res, fmt.Errorf("optim: recorder: %w", err)
	}
	return r.res, nil
}

// finish fills the Result from st.
func (r *runner) finish(st *State, status Status) {
	res := r.res
	res.X, res.Y, res.State, res.Status = st.X, st.Y, st, status
	res.Iter, res.Calls, res.Runtime, res.Upper = st.Iter, st.Calls, st.Elapsed, st.Upper
}

// flush flushes the Recorder, if it has a Flush() error method.
func (r *runner) flush() error {
	if f, ok := r.s.Recorder.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// fail ends the run on an iteration's err: the Result holds the last
// finite state, the Recorder is flushed (its error is dropped: err is the
// one to report) and the state is saved to the checkpoint.
func (r *runner) fail(err error) error {
	r.finish(r.backup, Failure)
	_ = r.flush()
	return r.save(err)
}

// save saves the Result's state to the checkpoint after a failure err and
// adds a failed save to err.
func (r *runner) save(err error) error {
	if cerr := r.ck.save(r.res.State); cerr != nil {
		return fmt.Errorf("%w; saving the last finite state also failed: %v", err, cerr)
	}
	return err
}

// failed returns the error of a step of the method (Init when k < 0) that
// returned err: a *NonFiniteError naming the first non-finite oracle
// output or state variable, wrapping err too when the method reported the
// trouble as well (a breakdown of its linear solve, say), and the
// problem's own cause (oracle.Capabilities.Err) as its Cause; else err, or
// that cause, named with the method and the iteration; nil when all went
// well.
func (r *runner) failed(k int, err error) error {
	cause := r.cp.cause()
	if nf := nonFiniteError(r.cp, r.st); nf != nil {
		nf.Cause = cause
		if err != nil {
			step := "Init"
			if k >= 0 {
				step = "Iterate"
			}
			return fmt.Errorf("%w; %T.%s reported: %w", nf, r.m, step, err)
		}
		return nf
	}
	if err == nil {
		err = cause // a failure the problem reports with finite outputs
	}
	if err != nil {
		if k < 0 {
			return fmt.Errorf("optim: %T: %w", r.m, err)
		}
		return fmt.Errorf("optim: %T: iteration %d: %w", r.m, k, err)
	}
	return nil
}

// init runs the method's Init.
func (r *runner) init() error {
	st := r.st
	r.backup = st.Clone()
	t := time.Now()
	err := r.m.Init(r.cp, st)
	st.Elapsed += time.Since(t)
	if err := r.failed(-1, err); err != nil {
		r.finish(r.backup, Failure)
		var nf *NonFiniteError
		if errors.As(err, &nf) {
			return r.save(err)
		}
		return err
	}
	return nil
}

// iterate runs one iteration and its monitoring, recording and
// checkpoint, and returns the status after it.
func (r *runner) iterate() (Status, error) {
	st, s := r.st, r.s
	maxIter := s.MaxIter
	if maxIter == 0 {
		maxIter = DefaultMaxIter
	}
	switch {
	case st.Iter >= maxIter:
		return IterationLimit, nil
	case s.MaxTime > 0 && st.Elapsed >= s.MaxTime:
		return TimeLimit, nil
	}
	st.copyInto(r.backup)
	k := st.Iter
	r.cp.reset(k)
	t := time.Now()
	it, err := r.m.Iterate(r.cp, st)
	st.Elapsed += time.Since(t)
	if err := r.failed(k, err); err != nil {
		return Failure, r.fail(err)
	}
	st.Iter++
	r.res.HypergradNorm = it.HypergradNorm
	rec := Record{Iter: k, Time: st.Elapsed, Calls: st.Calls, Upper: math.NaN(), HypergradNorm: it.HypergradNorm}
	status, err := r.monitor(k, &rec)
	if err != nil {
		return Failure, r.fail(err)
	}
	if s.Recorder != nil {
		if err := s.Recorder.Record(&rec); err != nil {
			r.finish(st, Failure)
			return Failure, fmt.Errorf("optim: recorder at iteration %d: %w", k, err)
		}
		r.ck.records++
	}
	if s.GradTol > 0 && it.HypergradNorm <= s.GradTol {
		status = GradientThreshold
	}
	if every := s.Checkpoint.Every; every > 0 && st.Iter%every == 0 {
		if err := r.ck.save(st); err != nil {
			r.finish(st, Failure)
			return Failure, fmt.Errorf("optim: checkpoint after iteration %d: %w", k, err)
		}
	}
	return status, nil
}

// monitor evaluates f (and Metrics) after iteration k when it is monitored,
// into rec and st.Upper, and reports FunctionConvergence by Settings.FTol.
func (r *runner) monitor(k int, rec *Record) (Status, error) {
	st, s := r.st, r.s
	evalEvery := s.EvalEvery
	if evalEvery == 0 {
		evalEvery = 1
	}
	if evalEvery < 0 || k%evalEvery != 0 {
		return NotTerminated, nil
	}
	prev := st.Upper
	st.Upper = r.p.F(st.X, st.Y, s.EvalBatch)
	if !isFinite(st.Upper) {
		// x and y are finite, yet f overflowed there: stop as for any other
		// non-finite oracle output.
		nf := &NonFiniteError{Iter: k, Oracle: "F", Index: -1, Value: st.Upper, Cause: r.cp.cause()}
		return Failure, fmt.Errorf("%w (the monitoring evaluation of f on Settings.EvalBatch after the iteration, not counted in Calls)", nf)
	}
	rec.Upper = st.Upper
	if s.Metrics != nil {
		rec.Metrics = s.Metrics(st.X, st.Y)
	}
	if s.FTol > 0 && !math.IsNaN(prev) && math.Abs(st.Upper-prev) <= s.FTol*math.Max(1, math.Abs(prev)) {
		return FunctionConvergence, nil
	}
	return NotTerminated, nil
}

// nonFiniteError returns the error for a non-finite oracle output or state,
// or nil.
func nonFiniteError(cp *counter, st *State) *NonFiniteError {
	name, i, v := st.nonFinite()
	if cp.bad == nil && name == "" {
		return nil
	}
	e := &NonFiniteError{Iter: cp.iter, Var: name, Index: i, Value: v}
	if cp.bad != nil {
		e.Oracle, e.Call, e.Index, e.Value = cp.bad.Oracle, cp.bad.Call, cp.bad.Index, cp.bad.Value
	}
	return e
}
