package report

import (
	"bytes"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func TestResult(t *testing.T) {
	for _, c := range []struct {
		kv   map[string]any
		want string
	}{
		{map[string]any{"b": 2, "a": 0.5, "t": 1500 * time.Millisecond}, "result: a=0.5 b=2 t=1.5\n"},
		{map[string]any{"p": math.NaN(), "a": 1.0, "q": math.Inf(-1)}, "result: a=1 undefined=p,q\n"},
	} {
		var b bytes.Buffer
		Result(&b, c.kv)
		if got := b.String(); got != c.want {
			t.Errorf("Result(%v) wrote %q, want %q", c.kv, got, c.want)
		}
	}
}

func TestCSV(t *testing.T) {
	dir := t.TempDir()
	tab := Table{Columns: []string{"n", "err"}}
	tab.Add(1, 0.25)
	tab.Add(2, 1e-9)
	if err := tab.WriteCSV(filepath.Join(dir, "t.csv")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "t.csv"))
	if got, want := string(b), "n,err\n1,0.25\n2,1e-09\n"; got != want {
		t.Errorf("CSV %q, want %q", got, want)
	}
}

func seq(n int, f func(i int) float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	return v
}

// TestPlotKinds renders every kind of plot the programs draw, and the
// degenerate ones, and checks the axes and the legend: tick labels are
// short (at most 9 characters: 10^-12, 0.25, 2.5×10^7 — drawn 10⁻¹²,
// 2.5×10⁷ — never
// 0.09999999999999998), each axis has at least two labelled ticks, the
// scale is the one the data call for, and every series is in the legend,
// with a note when it has nothing to draw. REPORT_PLOTS=folder keeps the
// images there.
func TestPlotKinds(t *testing.T) {
	iters := seq(41, func(i int) float64 { return float64(i) })
	geo := []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 400}
	cases := []struct {
		name         string
		plot         Plot
		logX, logY   bool
		notes        map[string]string // series name → a part of its legend note
		minXLabelled int
	}{
		{"linear", Plot{Series: []Series{{Name: "acc", X: iters, Y: seq(41, func(i int) float64 { return 0.5 + 0.01*float64(i) })}}}, false, false, nil, 2},
		{"log y over 13 decades", Plot{Series: []Series{
			{Name: "CG", X: []float64{1, 2, 5, 10, 20, 50, 100}, Y: []float64{1, 0.3, 1e-2, 1e-5, 1e-8, 1e-11, 1.2e-13}},
			{Name: "Neumann", X: []float64{1, 2, 5, 10, 20, 50, 100}, Y: []float64{1, 0.9, 0.8, 0.6, 0.3, 0.1, 0.03}}}}, true, true, nil, 2},
		{"log y within a decade", Plot{YScale: Log, Series: []Series{{Name: "loss", X: iters, Y: seq(41, func(i int) float64 { return 0.05 + 0.2/float64(i+1) })}}}, false, true, nil, 2},
		{"geometric sweep", Plot{Series: []Series{
			{Name: "ITD", X: []float64{10, 100, 1000}, Y: []float64{6e5, 6e6, 6e7}},
			{Name: "AID", X: []float64{10, 100, 1000}, Y: []float64{0, 0, 16}}}, YScale: Log}, true, true,
			map[string]string{"AID": "2 values ≤ 0 not drawn"}, 2},
		{"geometric iterations from 0", Plot{Series: []Series{{Name: "subopt", X: geo, Y: seq(len(geo), func(i int) float64 { return math.Exp(-float64(i)) })},
			{Name: "baseline", X: []float64{0, 400}, Y: []float64{0.01, 0.01}, Reference: true}}}, true, true, nil, 2},
		{"large counts", Plot{Series: []Series{{Name: "a", X: seq(30, func(i int) float64 { return 7e5 * float64(i) }), Y: seq(30, func(i int) float64 { return 2.3 - 0.01*float64(i) })}}}, false, false, nil, 2},
		{"failed method", Plot{YScale: Log, Series: []Series{
			{Name: "MGBiO", X: iters, Y: seq(41, func(i int) float64 { return math.Pow(0.7, float64(i)) })},
			{Name: "AID-BiO", X: []float64{0}, Y: []float64{1.7}, Note: "stopped at iteration 0: negative curvature"},
			{Name: "ITD-BiO", X: []float64{0, 1, 2}, Y: []float64{1, math.NaN(), math.Inf(1)}, Note: "failed at iteration 1: NaN"}}},
			false, true, map[string]string{"AID-BiO": "negative curvature", "ITD-BiO": "failed at iteration 1"}, 2},
		{"all zero on a log axis", Plot{YScale: Log, Series: []Series{{Name: "z", X: iters, Y: make([]float64, 41)}}}, false, false, nil, 2},
		{"all NaN", Plot{Series: []Series{{Name: "n", X: iters, Y: seq(41, func(int) float64 { return math.NaN() })}}}, false, false, map[string]string{"n": "no data"}, 2},
		{"no series", Plot{}, false, false, nil, 2},
		{"one point", Plot{XScale: Log, YScale: Log, Series: []Series{{Name: "p", X: []float64{3}, Y: []float64{0.2}}}}, true, true, nil, 1},
		{"fit after the start", Plot{FitAfterStart: true, Series: []Series{
			{Name: "acc", X: iters, Y: seq(41, func(i int) float64 { return 0.1 + 0.6*math.Min(1, float64(i)) + 0.002*float64(i) })},
			{Name: "acc2", X: iters, Y: seq(41, func(i int) float64 { return 0.2 + 0.5*math.Min(1, float64(i)) + 0.003*float64(i) })}}},
			false, false, map[string]string{"acc": "starts at 0.1, off the axis", "acc2": "starts at 0.2, off the axis"}, 2},
		{"constant", Plot{Series: []Series{{Name: "c", X: iters, Y: seq(41, func(int) float64 { return 0.1 })}}}, false, false, nil, 2},
		{"counts to a million", Plot{Series: []Series{{Name: "a", X: seq(22, func(i int) float64 { return 5e4 * float64(i) }), Y: seq(22, func(i int) float64 { return 2.3 - 0.01*float64(i) })}}}, false, false, nil, 2},
		{"log time from iteration 0, fit after the start", Plot{XScale: Log, FitAfterStart: true, Series: []Series{
			{Name: "STABLE", X: []float64{0, 0.01, 0.1, 1, 10}, Y: []float64{2.3, 0.675, 0.6, 0.55, 0.5}}}},
			true, false, nil, 2},
		{"failed method with a long error", Plot{YScale: Log, Series: []Series{
			{Name: "MGBiO", X: iters, Y: seq(41, func(i int) float64 { return math.Pow(0.7, float64(i)) })},
			{Name: "AID-BiO", Note: "stopped at iteration 0: negative curvature in CG (dᵀ ∇yy g d = −114)"}}},
			false, true, map[string]string{"AID-BiO": "(dᵀ grad yy g d = −114)"}, 2},
		{"baseline and negative values", Plot{Series: []Series{{Name: "d", X: iters, Y: seq(41, func(i int) float64 { return float64(i) - 20 })},
			{Name: "baseline", X: []float64{0, 40}, Y: []float64{3, 3}, Reference: true}}}, false, false, nil, 2},
	}
	dir := os.Getenv("REPORT_PLOTS") // a folder to keep the plots in, to look at them
	if dir == "" {
		dir = t.TempDir()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.plot.Title, c.plot.XLabel, c.plot.YLabel = c.name, "x", "y"
			b := c.plot.build()
			_, lx := b.p.X.Scale.(plot.LogScale)
			_, ly := b.p.Y.Scale.(plot.LogScale)
			if lx != c.logX || ly != c.logY {
				t.Errorf("log x %v, log y %v; want %v, %v", lx, ly, c.logX, c.logY)
			}
			for axis, a := range map[string]*plot.Axis{"x": &b.p.X, "y": &b.p.Y} {
				var labels []string
				for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
					if tk.Label == "" {
						continue
					}
					if tk.Value < a.Min-1e-9*math.Abs(a.Min) || tk.Value > a.Max+1e-9*math.Abs(a.Max) {
						continue // outside the axis: not drawn
					}
					labels = append(labels, tk.Label)
					if n := len([]rune(tk.Label)); n > 9 || strings.Contains(tk.Label, "99999") || strings.Contains(tk.Label, "e") {
						t.Errorf("%s tick label %q at %g is not short", axis, tk.Label, tk.Value)
					}
				}
				sci := 0
				for _, l := range labels {
					if strings.Contains(l, "×") {
						sci++
					}
				}
				if sci > 0 && sci < len(labels) && !(sci == len(labels)-1 && slices.Contains(labels, "0")) {
					t.Errorf("%s axis mixes plain and power-of-ten labels: %q", axis, labels)
				}
				want := 2
				if axis == "x" {
					want = c.minXLabelled
				}
				if len(labels) < want {
					t.Errorf("%s axis [%g, %g] has labels %q; want at least %d", axis, a.Min, a.Max, labels, want)
				}
			}
			if len(b.curves) != len(c.plot.Series) {
				t.Errorf("%d legend entries for %d series", len(b.curves), len(c.plot.Series))
			}
			for _, cv := range b.curves {
				if want, ok := c.notes[cv.name]; ok && !strings.Contains(cv.note, want) {
					t.Errorf("legend note of %s is %q; want it to say %q", cv.name, cv.note, want)
				}
				if len(cv.pts) == 0 && cv.note == "" {
					t.Errorf("%s has no curve and its legend entry does not say why", cv.name)
				}
				if strings.Contains(cv.note, "starts at") && cv.startDropped {
					t.Errorf("%s: %q, but its start is not drawn on the log x axis and its first drawn point is no start", cv.name, cv.note)
				}
				for _, r := range cv.name + cv.note {
					if !hasGlyph(r) {
						t.Errorf("legend entry of %s has %q, which the font cannot draw", cv.name, r)
					}
				}
				if cv.reference && len(cv.pts) != 2 {
					t.Errorf("baseline %s has %d points to draw; want its two ends", cv.name, len(cv.pts))
				}
			}
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".png")
			if err := c.plot.Save(path); err != nil {
				t.Fatal(err)
			}
			if png, _ := os.ReadFile(path); !bytes.HasPrefix(png, []byte("\x89PNG")) {
				t.Errorf("%s is not a PNG (%d bytes)", path, len(png))
			}
		})
	}
}

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		n    int64
		e    int
		want string
	}{
		{0, 5, "0"}, {1, -1, "0.1"}, {3, -1, "0.3"}, {25, -2, "0.25"}, {5, -3, "0.005"}, {5, -5, "5×10^-5"},
		{12, 0, "12"}, {1, 5, "100000"}, {1, 6, "1×10^6"}, {25, 6, "2.5×10^7"}, {-4, -1, "-0.4"}, {200, -2, "2"},
	} {
		if got := decimal(c.n, c.e); got != c.want {
			t.Errorf("decimal(%d, %d) = %q, want %q", c.n, c.e, got, c.want)
		}
	}
	for k, want := range map[int]string{-13: "10^-13", 0: "10^0", 2: "10^2"} {
		if got := power(k); got != want {
			t.Errorf("power(%d) = %q, want %q", k, got, want)
		}
	}
}

// TestProgress: on something that is not a terminal, progress is plain
// lines (the first, then at most one every two seconds, and the last)
// with no carriage return or escape sequence, and the time left comes
// from the steps after the first, which here holds a 10 s set-up.
func TestProgress(t *testing.T) {
	var b bytes.Buffer
	clock := time.Unix(0, 0)
	p := NewProgress(&b, "work", 50)
	p.now = func() time.Time { return clock }
	p.start = clock
	clock = clock.Add(10 * time.Second)
	p.Step("set-up")
	if _, ok := p.Left(); ok {
		t.Error("an estimate after the first step")
	}
	for i := 2; i <= 50; i++ {
		clock = clock.Add(time.Second)
		p.Step("step")
		if i == 2 {
			if d, ok := p.Left(); !ok || d != 48*time.Second {
				t.Errorf("after 2 of 50 one-second steps: %v left (%v); want 48s", d, ok)
			}
		}
	}
	out := b.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("progress on a non-terminal writes \\r or escapes: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 10 || len(lines) > 30 || !strings.HasPrefix(lines[len(lines)-1], "work: 50/50, 59s") {
		t.Errorf("%d lines, last %q; want one every 2 s and the last one", len(lines), lines[len(lines)-1])
	}
	var q *Progress
	q.Step("nothing") // a nil Progress (-quiet) does nothing
	NewProgress(nil, "quiet", 3).Step("nothing")
}

// TestStartsOffAxis: with FitAfterStart, curves that all start at the same
// value off the axis say so once, beside the y label, not in every legend
// entry.
func TestStartsOffAxis(t *testing.T) {
	x := []float64{0, 1, 2, 3}
	pl := Plot{FitAfterStart: true, Series: []Series{{Name: "a", X: x, Y: []float64{0.1, 0.7, 0.72, 0.75}},
		{Name: "b", X: x, Y: []float64{0.1, 0.6, 0.65, 0.7}}, {Name: "base", X: []float64{0, 3}, Y: []float64{0.69, 0.69}, Reference: true}}}
	b := pl.build()
	if b.yNote != "every curve starts at 0.1, off the axis" || b.curves[0].note != "" || b.curves[1].note != "" {
		t.Errorf("y note %q, legend notes %q, %q", b.yNote, b.curves[0].note, b.curves[1].note)
	}
	if b.p.Y.Min != 0.6 || b.p.Y.Max != 0.75 {
		t.Errorf("y axis [%g, %g]; want [0.6, 0.75], the points after the starts", b.p.Y.Min, b.p.Y.Max)
	}
}

// TestLogTimeStart: on a log x axis the start (x = 0) is not drawn, and the
// first drawn point, a real iterate, is fitted, not called a start off the
// axis (hyperparam's stable_test_loss_vs_time said "starts at 0.675, off
// the axis" of a point drawn on it).
func TestLogTimeStart(t *testing.T) {
	pl := Plot{XScale: Log, FitAfterStart: true, Series: []Series{
		{Name: "a", X: []float64{0, 0.01, 0.1, 1}, Y: []float64{2.3, 0.675, 0.6, 0.55}},
		{Name: "b", X: []float64{0, 0.02, 0.2, 2}, Y: []float64{2.3, 0.7, 0.62, 0.58}}}}
	b := pl.build()
	if b.yNote != "" || b.curves[0].note != "" || b.curves[1].note != "" {
		t.Errorf("y note %q, legend notes %q, %q; want none", b.yNote, b.curves[0].note, b.curves[1].note)
	}
	if b.p.Y.Min != 0.55 || b.p.Y.Max != 0.7 {
		t.Errorf("y axis [%g, %g]; want [0.55, 0.7], every drawn point", b.p.Y.Min, b.p.Y.Max)
	}
}

// TestYLabelFits: a y label with the note where the curves start is broken
// into lines that each fit the height of the data, and none of it is lost
// (federated's imbalanced plots ended "…starts at 0.108, off the a").
func TestYLabelFits(t *testing.T) {
	x := []float64{0, 1, 2, 3}
	pl := Plot{FitAfterStart: true, YLabel: "class-balanced test accuracy", Series: []Series{
		{Name: "E-AiPOD p=0.3", X: x, Y: []float64{0.108, 0.6, 0.7, 0.75}}, {Name: "FedNest", X: x, Y: []float64{0.108, 0.3, 0.5, 0.6}}}}
	b := pl.build()
	if b.yNote == "" {
		t.Fatal("no y note: the test needs one")
	}
	dc := draw.New(vgimg.New(plotWidth, plotHeight))
	sty := b.p.X.Label.TextStyle
	lh := sty.Height("Xg") * 3 / 2
	data := b.p.DataCanvas(draw.Crop(dc, 2*lh, 0, lh, 0))
	lines := b.yLabelLines(sty, pl.YLabel, data)
	for _, l := range lines {
		if w := sty.Width(l); w > data.Max.Y-data.Min.Y {
			t.Errorf("y label line %q is %v long; the data are %v high", l, w, data.Max.Y-data.Min.Y)
		}
	}
	if got, want := strings.Join(lines, " "), pl.YLabel+" ("+b.yNote+")"; got != want || len(lines) < 2 {
		t.Errorf("y label lines %q; want %q on at least two lines", lines, want)
	}
}

// TestStylesOfDrawnSeries: the colours go to the series that have a curve;
// an empty series (a skipped method) takes none from them.
func TestStylesOfDrawnSeries(t *testing.T) {
	var series []Series
	for i := range len(palette) + 5 {
		s := Series{Name: strconv.Itoa(i), X: []float64{0, 1}, Y: []float64{1, 2}}
		if i%3 == 1 && i < 16 {
			s.X, s.Y, s.Note = nil, nil, "skipped"
		}
		series = append(series, s)
	}
	b := (&Plot{Series: series}).build()
	seen := map[color.Color]string{}
	for _, c := range b.curves {
		if len(c.pts) == 0 {
			continue
		}
		if other, ok := seen[c.line.Color]; ok {
			t.Errorf("series %s and %s have the same colour, with %d drawn curves for %d colours", other, c.name, len(b.curves)-5, len(palette))
		}
		seen[c.line.Color] = c.name
	}
}
