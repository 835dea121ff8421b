// Package report gives the example programs one command-line experience:
// a progress bar on standard error, CSV and JSON files, PNG line plots made
// with gonum/plot, and the final machine-readable result line.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Progress draws a one-line progress bar with the elapsed time, an
// estimate of the time left and a status text. A zero Width means 30.
type Progress struct {
	W      io.Writer
	Label  string
	Total  int
	Width  int
	start  time.Time
	done   int
	last   time.Time
	status string
}

// NewProgress starts a progress bar over total steps on standard error.
func NewProgress(label string, total int) *Progress {
	return &Progress{W: os.Stderr, Label: label, Total: total, start: time.Now()}
}

// Step advances the bar by one step and sets its status text; it redraws
// at most ten times a second, and always on the last step.
func (p *Progress) Step(status string) {
	if p.start.IsZero() { // a Progress made as a literal starts at its first step
		p.start = time.Now()
	}
	p.done++
	p.status = status
	if now := time.Now(); p.done >= p.Total || now.Sub(p.last) > 100*time.Millisecond {
		p.last = now
		p.draw()
	}
}

func (p *Progress) draw() {
	width := p.Width
	if width == 0 {
		width = 30
	}
	frac := 1.0
	if p.Total > 0 {
		frac = math.Min(1, float64(p.done)/float64(p.Total))
	}
	fill := int(frac * float64(width))
	el := time.Since(p.start)
	left := ""
	if frac > 0 && frac < 1 {
		left = " left " + (time.Duration(float64(el) * (1 - frac) / frac)).Round(time.Second).String()
	}
	fmt.Fprintf(p.W, "\r%s [%s%s] %d/%d %s%s %s\x1b[K", p.Label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		p.done, p.Total, el.Round(time.Second), left, p.status)
	if p.done >= p.Total {
		fmt.Fprintln(p.W)
	}
}

// Table is a named table of rows for CSV and JSON output.
type Table struct {
	Columns []string
	Rows    [][]any
}

// Add appends a row; it must have one value per column.
func (t *Table) Add(values ...any) {
	if len(values) != len(t.Columns) {
		panic(fmt.Sprintf("report: row of %d values for %d columns", len(values), len(t.Columns)))
	}
	t.Rows = append(t.Rows, values)
}

func format(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', 10, 64)
	case time.Duration:
		return strconv.FormatFloat(v.Seconds(), 'g', 6, 64)
	}
	return fmt.Sprint(v)
}

// WriteCSV writes the table to path.
func (t *Table) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(t.Columns)
	for _, r := range t.Rows {
		rec := make([]string, len(r))
		for i, v := range r {
			rec[i] = format(v)
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteJSON writes v, indented, to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// LinePlot writes a PNG line plot of the series to path; logY plots the
// logarithm of y (non-positive values are dropped).
func LinePlot(path, title, xLabel, yLabel string, logY bool, series ...Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	var args []any
	for _, s := range series {
		pts := make(plotter.XYs, 0, len(s.X))
		for i := range s.X {
			if logY && !(s.Y[i] > 0) || math.IsNaN(s.Y[i]) || math.IsInf(s.Y[i], 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: s.X[i], Y: s.Y[i]})
		}
		if len(pts) > 0 {
			args = append(args, s.Name, pts)
		}
	}
	if len(args) > 0 {
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// Result prints the final line, "result: key=value ...", with the keys in
// sorted order, to w.
func Result(w io.Writer, kv map[string]any) {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + format(kv[k])
	}
	fmt.Fprintln(w, "result: "+strings.Join(parts, " "))
}

// OutDir creates dir (and its parents) and returns a function joining
// file names onto it.
func OutDir(dir string) (func(name string) string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the output folder: %w", err)
	}
	return func(name string) string { return filepath.Join(dir, name) }, nil
}
