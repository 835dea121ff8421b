package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Scale says how an axis maps values to positions.
type Scale int

const (
	// Auto picks Log or Linear from the data. A y axis is logarithmic
	// when every finite value is positive and they span at least a
	// factor of ten; an x axis when its positive values span at least a
	// factor of 30 and are spaced geometrically (more than 40% of them in
	// the lowest tenth of the range, as T = 10, 100, 1000 are).
	Auto Scale = iota
	Linear
	// Log is a logarithmic axis, labelled 10ᵏ. Values ≤ 0 cannot be drawn
	// on it: a series that has some says so in the legend. An axis with no
	// positive value at all is drawn linear.
	Log
)

// Series is one curve of a Plot.
type Series struct {
	Name string
	X, Y []float64
	// Note, if not empty, is written in the legend under the name: why the
	// curve is missing or ends early ("stopped at iteration 0: negative
	// curvature"). A series with nothing to draw says so even without one.
	Note string
	// Reference draws the series as a thin dotted line without markers:
	// a baseline, not a method.
	Reference bool
}

// Plot is a line plot fit for a paper: tick labels that are short (10ᵏ on
// logarithmic axes), the legend to the right of the data so that it
// covers no curve, a few markers per curve placed so that curves can be
// told apart in grey print, and every series in the legend, with a note
// when it has no curve.
type Plot struct {
	Title, XLabel, YLabel string
	XScale, YScale        Scale
	Series                []Series
	// FitAfterStart fits a linear y axis to the points after each curve's
	// first, so that curves that rise at once from a poor start (an
	// accuracy of 0.1 before training, 0.7 after the first checkpoint) do
	// not bunch at the top: the start is then below the axis, and its
	// segment enters from the bottom edge.
	FitAfterStart bool
}

// Sizes of the saved image.
const (
	plotWidth  = 6.5 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	plotDPI    = 150
	// maxNoteWidth is where legend notes are wrapped.
	maxNoteWidth = 2.4 * vg.Inch
	// maxNote is the most characters of a legend note (an error message
	// can be long: the CSV and JSON files keep it whole).
	maxNote = 160
	// markersPerCurve is the number of markers drawn on a long curve.
	markersPerCurve = 8
)

// palette holds distinct colours that survive colour blindness (Okabe and
// Ito's eight, yellow left out, and four more).
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xFF}, {0xD5, 0x5E, 0x00, 0xFF}, {0x00, 0x9E, 0x73, 0xFF}, {0xCC, 0x79, 0xA7, 0xFF},
	{0xE6, 0x9F, 0x00, 0xFF}, {0x56, 0xB4, 0xE9, 0xFF}, {0x00, 0x00, 0x00, 0xFF}, {0x8C, 0x56, 0x4B, 0xFF},
	{0x7F, 0x7F, 0x7F, 0xFF}, {0xBC, 0xBD, 0x22, 0xFF}, {0x17, 0xBE, 0xCF, 0xFF}, {0x94, 0x67, 0xBD, 0xFF},
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}

// curve is a series ready to draw.
type curve struct {
	name, note string
	pts        plotter.XYs
	marks      plotter.XYs
	line       draw.LineStyle
	glyph      draw.GlyphStyle
	reference  bool
	// startDropped says that the series' first point (iteration 0, at
	// x = 0) was left out for the logarithmic x axis, so that pts[0] is
	// not the curve's start.
	startDropped bool
}

// built is a plot laid out but not yet drawn.
type built struct {
	p      *plot.Plot
	curves []curve
	// yNote is added to the y axis's label: where all curves start when
	// that is off the axis (Plot.FitAfterStart).
	yNote string
}

// Save writes the plot as a PNG image to path.
func (pl *Plot) Save(path string) error {
	b := pl.build()
	name, note := b.legendStyles()
	legendW, legendH := b.legendSize(name, note)
	// A long legend makes the image taller rather than run off its bottom.
	height := max(plotHeight, legendH+2*vg.Inch)
	img := vgimg.NewWith(vgimg.UseWH(plotWidth+legendW, height), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	// The axis labels are drawn here, not by gonum/plot, which pads a
	// logarithmic axis as if its label sat at the arithmetic mean of the
	// range (a gap above the data when the range spans many decades).
	label := b.p.X.Label.TextStyle
	label.XAlign, label.YAlign = draw.XCenter, draw.YCenter
	lh := label.Height("Xg") * 3 / 2
	ylines := b.yLabelLines(label, pl.YLabel, b.p.DataCanvas(draw.Crop(dc, lh, -legendW, lh, 0)))
	area := draw.Crop(dc, vg.Length(len(ylines))*lh, -legendW, lh, 0)
	b.p.Draw(area)
	data := b.p.DataCanvas(area)
	dc.FillText(label, vg.Point{X: data.Center().X, Y: dc.Min.Y + lh/2}, drawable(pl.XLabel))
	label.Rotation = math.Pi / 2
	for i, line := range ylines {
		dc.FillText(label, vg.Point{X: dc.Min.X + lh/2 + vg.Length(i)*lh, Y: data.Center().Y}, line)
	}
	b.drawLegend(draw.Crop(dc, plotWidth, 0, 0, 0), data.Max.Y, name, note)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// yLabelLines returns the y axis's label, with yNote in brackets after it,
// broken into lines (drawn rotated, side by side) no longer than the data
// canvas is high, so that none runs off the image.
func (b *built) yLabelLines(sty text.Style, label string, data draw.Canvas) []string {
	if b.yNote != "" {
		label += " (" + b.yNote + ")"
	}
	lines := wrap(sty, drawable(label), data.Max.Y-data.Min.Y)
	if len(lines) == 0 {
		return []string{""}
	}
	return lines
}

// build chooses the scales, filters the points each scale can show, and
// adds the lines and markers to a gonum plot.
func (pl *Plot) build() *built {
	p := plot.New()
	p.Title.Text = drawable(pl.Title)
	logX, logY := pl.logX(), pl.logY()
	b := &built{p: p}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	xpos := math.Inf(1) // the smallest positive x
	for _, s := range pl.Series {
		for _, x := range s.X {
			if x > 0 {
				xpos = math.Min(xpos, x)
			}
		}
	}
	drawn := 0 // series with points so far: they take the styles in turn
	for _, s := range pl.Series {
		c := curve{name: drawable(s.Name), reference: s.Reference}
		nonFinite, nonPos := 0, 0
		for k := range min(len(s.X), len(s.Y)) {
			x, y := s.X[k], s.Y[k]
			if !finite(x) || !finite(y) {
				nonFinite++
				continue
			}
			if logY && y <= 0 {
				nonPos++
				continue
			}
			if logX && x <= 0 {
				if !s.Reference {
					// the start (iteration 0) of a run on a log axis
					c.startDropped = c.startDropped || len(c.pts) == 0
					continue
				}
				x = xpos // a baseline from 0 starts at the axis
			}
			c.pts = append(c.pts, plotter.XY{X: x, Y: y})
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
		var notes []string
		if s.Note != "" {
			notes = append(notes, s.Note)
		}
		switch {
		case len(c.pts) == 0 && nonPos > 0:
			notes = append(notes, "no positive value to draw on the log axis")
		case len(c.pts) == 0 && s.Note == "":
			notes = append(notes, "no data")
		case nonPos > 0:
			notes = append(notes, fmt.Sprintf("%d values ≤ 0 not drawn", nonPos))
		}
		if nonFinite > 0 && len(c.pts) > 0 {
			notes = append(notes, fmt.Sprintf("%d non-finite values not drawn", nonFinite))
		}
		c.note = drawable(strings.Join(notes, "; "))
		if r := []rune(c.note); len(r) > maxNote {
			c.note = string(r[:maxNote-1]) + "…"
		}
		i := drawn
		if len(c.pts) > 0 {
			drawn++
		}
		col := palette[i%len(palette)]
		c.line = draw.LineStyle{Color: col, Width: vg.Points(1.6), Dashes: dashes[(i/len(palette)+i)%len(dashes)]}
		c.glyph = draw.GlyphStyle{Color: col, Radius: vg.Points(3.2), Shape: glyphs[i%len(glyphs)]}
		if s.Reference {
			c.line = draw.LineStyle{Color: col, Width: vg.Points(1.1), Dashes: []vg.Length{vg.Points(1.5), vg.Points(2.5)}}
		}
		b.curves = append(b.curves, c)
	}
	if xmin > xmax { // nothing to draw
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
		logX, logY = false, false
	}
	if pl.FitAfterStart && !logY {
		ymin, ymax = fitAfterStart(b.curves, ymin, ymax)
		b.noteStarts(ymin, ymax)
	}
	b.addCurves(logX, xmin, xmax)
	// After the curves, which widen the axes to their data.
	setAxis(&p.X, logX, xmin, xmax)
	setAxis(&p.Y, logY, ymin, ymax)
	return b
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// noteStarts says where the curves whose start lies off [lo, hi] start:
// once, in yNote, when every curve does and at the same value, else in
// each such curve's note.
func (b *built) noteStarts(lo, hi float64) {
	var off []*curve
	same, drawn := true, 0
	for i := range b.curves {
		c := &b.curves[i]
		if len(c.pts) > 0 && !c.reference {
			drawn++
		}
		if len(c.pts) > 0 && !c.startDropped && (c.pts[0].Y < lo || c.pts[0].Y > hi) {
			same = same && (len(off) == 0 || c.pts[0].Y == off[0].pts[0].Y)
			off = append(off, c)
		}
	}
	if len(off) == 0 {
		return
	}
	start := func(c *curve) string { return strconv.FormatFloat(c.pts[0].Y, 'g', 3, 64) }
	if same && len(off) > 1 && len(off) == drawn {
		b.yNote = "every curve starts at " + start(off[0]) + ", off the axis"
		return
	}
	for _, c := range off {
		c.note = strings.TrimPrefix(c.note+"; starts at "+start(c)+", off the axis", "; ")
	}
}

// fitAfterStart returns the range of the y values of the curves without
// the start of each (see Plot.FitAfterStart; a start left out for a log x
// axis is not among the points), or lo, hi when that leaves none.
func fitAfterStart(curves []curve, lo, hi float64) (float64, float64) {
	a, b := math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		pts := c.pts
		if !c.reference && !c.startDropped && len(pts) > 2 {
			pts = pts[1:]
		}
		for _, p := range pts {
			a, b = math.Min(a, p.Y), math.Max(b, p.Y)
		}
	}
	if a > b {
		return lo, hi
	}
	return a, b
}

// logX reports whether the x axis is logarithmic (see Scale).
func (pl *Plot) logX() bool {
	var xs []float64
	for _, s := range pl.Series {
		for _, x := range s.X {
			if finite(x) && x > 0 {
				xs = append(xs, x)
			}
		}
	}
	if len(xs) == 0 || pl.XScale == Linear {
		return false
	}
	if pl.XScale == Log {
		return true
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	lo, hi := xs[0], xs[len(xs)-1]
	if len(xs) < 3 || hi < 30*lo {
		return false
	}
	low := 0
	for _, x := range xs {
		if x <= lo+0.1*(hi-lo) {
			low++
		}
	}
	return float64(low) > 0.4*float64(len(xs))
}

// logY reports whether the y axis is logarithmic (see Scale).
func (pl *Plot) logY() bool {
	lo, hi, nonPos := math.Inf(1), 0.0, false
	for _, s := range pl.Series {
		for _, y := range s.Y {
			switch {
			case !finite(y):
			case y > 0:
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			default:
				nonPos = true
			}
		}
	}
	switch {
	case hi == 0 || pl.YScale == Linear:
		return false
	case pl.YScale == Log:
		return true
	}
	return !nonPos && hi >= 10*lo
}

// setAxis gives the axis its scale, range and ticks; a range of one value
// is widened so that the axis has a length.
func setAxis(a *plot.Axis, log bool, lo, hi float64) {
	if log {
		if lo == hi {
			lo, hi = lo/2, hi*2
		}
		a.Scale = plot.LogScale{}
		a.Tick.Marker = logTicks{}
		a.Tick.Label.Handler = tickText
	} else {
		if lo == hi {
			d := math.Max(math.Abs(lo)/10, 1e-300)
			if lo == 0 {
				d = 1
			}
			lo, hi = lo-d, hi+d
		}
		a.Tick.Marker = linearTicks{}
		a.Tick.Label.Handler = tickText
	}
	a.Min, a.Max = lo, hi
}

// addCurves adds each curve's line and its markers (x from xmin to xmax): all points of a short
// curve, else markersPerCurve points spread evenly along the x axis as
// drawn, shifted from curve to curve so that markers of curves that
// coincide do not hide one another.
func (b *built) addCurves(logX bool, xmin, xmax float64) {
	pos := func(x float64) float64 {
		if logX {
			return math.Log(x)
		}
		return x
	}
	lo, hi := pos(xmin), pos(xmax)
	for i := range b.curves {
		c := &b.curves[i]
		if len(c.pts) == 0 {
			continue
		}
		if len(c.pts) > 1 {
			l, err := plotter.NewLine(c.pts)
			if err == nil { // the points are finite
				l.LineStyle = c.line
				b.p.Add(l)
			}
		}
		if c.reference {
			continue
		}
		if len(c.pts) <= 12 {
			c.marks = c.pts
		} else {
			shift := (float64(i%len(palette)) + 0.5) / float64(len(palette))
			last := -1
			for m := range markersPerCurve {
				target := lo + (hi-lo)*(float64(m)+shift)/markersPerCurve
				k := nearest(c.pts, pos, target)
				if k != last && pos(c.pts[k].X) >= pos(c.pts[0].X) && pos(c.pts[k].X) <= pos(c.pts[len(c.pts)-1].X) {
					c.marks = append(c.marks, c.pts[k])
					last = k
				}
			}
		}
		if s, err := plotter.NewScatter(c.marks); err == nil {
			s.GlyphStyle = c.glyph
			b.p.Add(s)
		}
	}
}

// nearest returns the index of the point whose position is closest to t.
func nearest(pts plotter.XYs, pos func(float64) float64, t float64) int {
	best, arg := math.Inf(1), 0
	for k, p := range pts {
		if d := math.Abs(pos(p.X) - t); d < best {
			best, arg = d, k
		}
	}
	return arg
}

// legendStyles returns the text styles of names and notes.
func (b *built) legendStyles() (name, note text.Style) {
	name = b.p.Legend.TextStyle
	name.Font = font.From(plot.DefaultFont, 11)
	note = name
	note.Font = font.From(plot.DefaultFont, 9)
	note.Color = color.Gray{Y: 0x55}
	return name, note
}

// Layout of the legend.
var (
	legendPad   = vg.Points(8)  // around the legend
	thumbWidth  = vg.Points(26) // the line sample
	thumbGap    = vg.Points(6)  // between the sample and the text
	entryGap    = vg.Points(5)  // between entries
	legendInset = legendPad + thumbWidth + thumbGap
)

// legendSize returns the width and the height the legend needs.
func (b *built) legendSize(name, note text.Style) (w, h vg.Length) {
	for _, c := range b.curves {
		w = max(w, name.Width(c.name))
		h += name.Height(c.name) + entryGap
		for _, line := range wrap(note, c.note, maxNoteWidth) {
			w = max(w, note.Width(line))
			h += note.Height(line)
		}
	}
	return legendInset + w + legendPad, h
}

// wrap breaks s into lines no wider than width (a single word may be
// wider).
func wrap(sty text.Style, s string, width vg.Length) []string {
	if s == "" {
		return nil
	}
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && sty.Width(cur+" "+w) > width {
			lines = append(lines, cur)
			cur = w
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	return append(lines, cur)
}

// drawLegend draws the entries top down from top in c: a sample of the
// line with its marker, the name beside it, the note in smaller grey text
// under the name.
func (b *built) drawLegend(c draw.Canvas, top vg.Length, name, note text.Style) {
	name.XAlign, name.YAlign = draw.XLeft, draw.YTop
	note.XAlign, note.YAlign = draw.XLeft, draw.YTop
	y := top
	x0 := c.Min.X + legendPad
	tx := x0 + thumbWidth + thumbGap
	for _, cv := range b.curves {
		h := name.Height(cv.name)
		mid := y - h/2
		if len(cv.pts) > 0 {
			c.StrokeLine2(cv.line, x0, mid, x0+thumbWidth, mid)
			if !cv.reference {
				c.DrawGlyphNoClip(cv.glyph, vg.Point{X: x0 + thumbWidth/2, Y: mid})
			}
		}
		c.FillText(name, vg.Point{X: tx, Y: y}, cv.name)
		y -= h
		for _, line := range wrap(note, cv.note, maxNoteWidth) {
			c.FillText(note, vg.Point{X: tx, Y: y}, line)
			y -= note.Height(line)
		}
		y -= entryGap
	}
}
