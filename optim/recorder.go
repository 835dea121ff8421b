package optim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gobilevel/bilevel/oracle"
)

// Record is one iteration's figures, passed by Solve to a Recorder.
type Record struct {
	// Iter is the iteration k (from 0) that just completed, x_k → x_{k+1}.
	Iter int
	// Time is State.Elapsed after the iteration: wall time in Init and
	// Iterate since the run began, monitoring and recording excluded.
	Time time.Duration
	// Calls is the cumulative oracle count after the iteration (Init
	// included); subtract the previous Record's to get one iteration's.
	Calls oracle.Calls
	// Upper is f(x_{k+1}, y_{k+1}) on Settings.EvalBatch, NaN at iterations
	// that are not monitored (see Settings.EvalEvery).
	Upper float64
	// HypergradNorm is ‖ĥ∇Φ(x_k)‖₂.
	HypergradNorm float64
	// Metrics is Settings.Metrics at x_{k+1}, y_{k+1}; nil when not monitored.
	Metrics map[string]float64
}

// Recorder receives every iteration's Record. Record must not keep r (it may
// keep r's Metrics map). An error stops the run.
type Recorder interface {
	Record(r *Record) error
}

// MemoryRecorder keeps every Record in memory.
type MemoryRecorder struct {
	Records []Record
}

var _ Recorder = (*MemoryRecorder)(nil)

// Record implements Recorder.
func (m *MemoryRecorder) Record(r *Record) error {
	m.Records = append(m.Records, *r)
	return nil
}

// CSVRecorder writes a header and then one CSV row per iteration:
//
//	iter,time_s,calls_f,calls_g,calls_gradf,calls_gradg,calls_hvp,calls_mixedxy,calls_mixedyx,calls_dense,upper,hypergrad_norm,<metrics...>
//
// The metric columns are the names given to NewCSVRecorder; a metric that a
// Record lacks is an empty cell, and one not among the columns is an error.
// NaN figures (iterations not monitored) are empty cells; other floats are
// written in the shortest form that parses back to the same value.
type CSVRecorder struct {
	w       *csv.Writer
	out     *countingWriter // what w writes to; its count is the recorder's position
	metrics []string
	header  bool
	rows    int64
}

var _ Recorder = (*CSVRecorder)(nil)

// NewCSVRecorder returns a CSVRecorder writing to w with the given metric
// columns (the names returned by Settings.Metrics). Solve calls Flush at the
// end of a run.
func NewCSVRecorder(w io.Writer, metrics ...string) *CSVRecorder {
	out := &countingWriter{w: w}
	return &CSVRecorder{w: csv.NewWriter(out), out: out, metrics: slices.Clone(metrics)}
}

// Record implements Recorder.
func (c *CSVRecorder) Record(r *Record) error {
	if !c.header {
		c.header = true
		head := []string{"iter", "time_s", "calls_f", "calls_g", "calls_gradf", "calls_gradg",
			"calls_hvp", "calls_mixedxy", "calls_mixedyx", "calls_dense", "upper", "hypergrad_norm"}
		if err := c.w.Write(append(head, c.metrics...)); err != nil {
			return err
		}
	}
	for k := range r.Metrics {
		if !slices.Contains(c.metrics, k) {
			return fmt.Errorf("CSVRecorder: metric %q is not a column: pass it to NewCSVRecorder (columns %q)", k, c.metrics)
		}
	}
	n := r.Calls
	row := []string{
		strconv.Itoa(r.Iter), num(r.Time.Seconds()),
		i64(n.F), i64(n.G), i64(n.GradF), i64(n.GradG), i64(n.HVP), i64(n.MixedXY), i64(n.MixedYX), i64(n.Dense),
		num(r.Upper), num(r.HypergradNorm),
	}
	for _, k := range c.metrics {
		v, ok := r.Metrics[k]
		if !ok {
			v = math.NaN()
		}
		row = append(row, num(v))
	}
	if err := c.w.Write(row); err != nil {
		return err
	}
	c.rows++
	return nil
}

// Flush flushes the underlying writer and reports any write error.
func (c *CSVRecorder) Flush() error {
	c.w.Flush()
	return c.w.Error()
}

func num(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }
