package report

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Progress reports the progress of a program through its steps on
// standard error. On a terminal it draws one bar, redrawn in place; on
// anything else (a file, a pipe, a CI log) it writes plain lines, one per
// step at most every lineEvery and the last, with no carriage return and
// no escape sequence.
//
// The estimate of the time left is the mean duration of the steps after
// the first, times the steps left: the first step of a program usually
// holds its set-up (loading data, compiling a model, a reference solve)
// and says little about the others. There is no estimate before the
// second step ends.
//
// github.com/schollz/progressbar/v3 was tried instead: it writes "\r" and escape sequences whatever the
// writer is, and its estimate is the mean rate since the start, the
// estimate that said 4m51s left after the first step of a 48 s run.
type Progress struct {
	w        io.Writer
	label    string
	total    int
	terminal bool
	width    int // of the terminal line

	now        func() time.Time
	start      time.Time
	firstEnd   time.Time // when the first step ended
	done       int
	lastStep   time.Time
	lastDraw   time.Time
	lastStatus string
}

// Intervals between drawings.
const (
	redrawEvery = 100 * time.Millisecond // of the bar on a terminal
	lineEvery   = 2 * time.Second        // of lines elsewhere
)

// NewProgress starts reporting the progress through total steps to w; a
// nil w (the -quiet flag) reports nothing. Whether w is a terminal decides
// between the bar and plain lines.
func NewProgress(w io.Writer, label string, total int) *Progress {
	p := &Progress{w: w, label: label, total: total, now: time.Now, terminal: IsTerminal(w), width: 80}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 20 {
		p.width = n
	}
	p.start = p.now()
	return p
}

// IsTerminal reports whether w is a character device (a terminal) on
// which a bar redrawn in place makes sense; TERM=dumb says it is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Step advances by one step and sets the status text, which says what
// the step did. A nil *Progress does nothing.
func (p *Progress) Step(status string) {
	if p == nil || p.w == nil {
		return
	}
	now := p.now()
	p.done++
	if p.done == 1 {
		p.firstEnd = now
	}
	p.lastStep, p.lastStatus = now, status
	every := lineEvery
	if p.terminal {
		every = redrawEvery
	}
	if p.done >= p.total || p.done == 1 || now.Sub(p.lastDraw) >= every {
		p.lastDraw = now
		p.draw(now)
	}
}

// Left returns the estimate of the time left, and false when there is
// none yet (before the second step) or no step is left.
func (p *Progress) Left() (time.Duration, bool) {
	if p.done < 2 || p.done >= p.total {
		return 0, false
	}
	per := p.lastStep.Sub(p.firstEnd) / time.Duration(p.done-1)
	return per * time.Duration(p.total-p.done), true
}

func (p *Progress) draw(now time.Time) {
	elapsed := now.Sub(p.start).Round(time.Second)
	left := ""
	if d, ok := p.Left(); ok {
		left = ", about " + d.Round(time.Second).String() + " left"
	}
	count := fmt.Sprintf("%d/%d", p.done, p.total)
	if !p.terminal {
		fmt.Fprintf(p.w, "%s: %s, %s%s: %s\n", p.label, count, elapsed, left, p.lastStatus)
		return
	}
	const barWidth = 20
	fill := barWidth
	if p.total > 0 {
		fill = min(barWidth, barWidth*p.done/p.total)
	}
	line := fmt.Sprintf("%s [%s%s] %s %s%s %s", p.label, strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill),
		count, elapsed, left, p.lastStatus)
	if utf8.RuneCountInString(line) >= p.width { // a wrapped line cannot be redrawn in place
		line = string([]rune(line)[:p.width-2]) + "…"
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	if p.done >= p.total {
		fmt.Fprintln(p.w)
	}
}
