package experiment

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits on flag values that no experiment of this module needs to pass:
// above them a typo (an extra zero) would run for days or exhaust memory
// before failing.
const (
	// MaxSamples bounds the samples of a data set (Fashion-MNIST and MNIST
	// have 70000 images).
	MaxSamples = 10_000_000
	// MaxElements bounds the numbers a synthetic data set holds (samples
	// times features): 2²⁷ float64 values are 1 GiB.
	MaxElements = 1 << 27
	// MaxIters bounds iteration counts.
	MaxIters = 100_000_000
	// MaxPoints bounds the checkpoints of a run.
	MaxPoints = 100_000
)

// MaxWorkers is the largest worker count a flag accepts: four per CPU
// core, at least 16. More goroutines than that only add memory (each
// holds its own buffers) and contention.
func MaxWorkers() int { return max(16, 4*runtime.NumCPU()) }

// Check collects what is wrong with the values of a program's flags, each
// as a message that names the flag, the value given and what to give
// instead, so that a program can refuse a bad command line before any
// work:
//
//	var c experiment.Check
//	c.Int("train", cfg.Train, 1, experiment.MaxSamples)
//	c.Probability("corrupt", cfg.Corrupt)
//	if err := c.Err(); err != nil { ... }
type Check struct {
	errs []error
}

// Err returns every problem found, one per line, or nil.
func (c *Check) Err() error { return errors.Join(c.errs...) }

// Failf records a problem with flag name: "-name: " and the message.
func (c *Check) Failf(name, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("-%s: %s", name, fmt.Sprintf(format, args...)))
}

// Add records err, which must name its flag, if it is not nil.
func (c *Check) Add(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// Int requires lo ≤ v ≤ hi.
func (c *Check) Int(name string, v, lo, hi int) {
	if v < lo || v > hi {
		c.errs = append(c.errs, fmt.Errorf("-%s %d: give an integer from %d to %d", name, v, lo, hi))
	}
}

// Float requires a finite v with lo ≤ v ≤ hi.
func (c *Check) Float(name string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) || math.IsInf(v, 0) {
		c.errs = append(c.errs, fmt.Errorf("-%s %v: give a number from %v to %v", name, v, lo, hi))
	}
}

// Positive requires a finite v > 0.
func (c *Check) Positive(name string, v float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		c.errs = append(c.errs, fmt.Errorf("-%s %v: give a positive number", name, v))
	}
}

// Probability requires 0 ≤ p ≤ 1.
func (c *Check) Probability(name string, p float64) {
	if !(p >= 0 && p <= 1) {
		c.errs = append(c.errs, fmt.Errorf("-%s %v: give a probability from 0 to 1", name, p))
	}
}

// Duration requires d > 0, or d ≥ 0 when zero (which the flag's help
// says what it means) is allowed.
func (c *Check) Duration(name string, d time.Duration, zero bool) {
	if d < 0 || d == 0 && !zero {
		what := "a positive duration such as 30s or 2m"
		if zero {
			what += ", or 0"
		}
		c.errs = append(c.errs, fmt.Errorf("-%s %v: give %s", name, d, what))
	}
}

// Workers requires 1 ≤ n ≤ MaxWorkers().
func (c *Check) Workers(name string, n int) {
	if hi := MaxWorkers(); n < 1 || n > hi {
		c.errs = append(c.errs, fmt.Errorf("-%s %d: give 1 to %d workers (%d CPU cores here)", name, n, hi, runtime.NumCPU()))
	}
}

// Out checks the value of an -out flag: a folder, made if missing, so not
// empty and not an existing file.
func (c *Check) Out(name, dir string) {
	if dir == "" {
		c.Failf(name, "give a folder for the output files, e.g. out")
	} else if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		c.Failf(name, "%q is a file: give a folder", dir)
	}
}

// Floats parses the comma-separated list of numbers s given to flag name;
// each must be finite and in [lo, hi], none given twice, and there must be
// at least one.
func (c *Check) Floats(name, s string, lo, hi float64) []float64 {
	var r []float64
	for _, f := range Strings(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v >= lo && v <= hi) || math.IsInf(v, 0) {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: give a comma-separated list of numbers from %v to %v", name, s, lo, hi))
			return nil
		}
		if slices.Contains(r, v) {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: %v is given twice", name, s, v))
			return nil
		}
		r = append(r, v)
	}
	if len(r) == 0 {
		c.errs = append(c.errs, fmt.Errorf("-%s %q: give at least one number from %v to %v", name, s, lo, hi))
	}
	return r
}

// Ints parses the comma-separated list of integers s given to flag name;
// each must be in [lo, hi], none given twice, and there must be at least
// one.
func (c *Check) Ints(name, s string, lo, hi int) []int {
	var r []int
	for _, f := range Strings(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v < lo || v > hi {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: give a comma-separated list of integers from %d to %d", name, s, lo, hi))
			return nil
		}
		if slices.Contains(r, v) {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: %d is given twice", name, s, v))
			return nil
		}
		r = append(r, v)
	}
	if len(r) == 0 {
		c.errs = append(c.errs, fmt.Errorf("-%s %q: give at least one integer from %d to %d", name, s, lo, hi))
	}
	return r
}

// Seeds parses the comma-separated list of seeds s given to flag name
// ("1,2,3"): at least one, none repeated.
func (c *Check) Seeds(name, s string) []uint64 {
	var r []uint64
	for _, f := range Strings(s) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: give a comma-separated list of seeds ≥ 0, e.g. 1,2,3", name, s))
			return nil
		}
		if slices.Contains(r, v) {
			c.errs = append(c.errs, fmt.Errorf("-%s %q: seed %d is given twice", name, s, v))
			return nil
		}
		r = append(r, v)
	}
	if len(r) == 0 {
		c.errs = append(c.errs, fmt.Errorf("-%s %q: give at least one seed, e.g. 1", name, s))
	}
	return r
}

// Names parses the comma-separated list s given to flag name, whose items
// must be among known, none twice, at least one: a list of methods,
// problems or parts.
func (c *Check) Names(name, s string, known []string) []string {
	r := Strings(s)
	want := strings.Join(known, ", ")
	if len(r) == 0 {
		c.errs = append(c.errs, fmt.Errorf("-%s %q: give at least one of %s", name, s, want))
		return nil
	}
	for i, m := range r {
		switch {
		case !slices.Contains(known, m):
			c.errs = append(c.errs, fmt.Errorf("-%s: unknown %q (give some of %s)", name, m, want))
			return nil
		case slices.Contains(r[:i], m):
			c.errs = append(c.errs, fmt.Errorf("-%s: %q is given twice", name, m))
			return nil
		}
	}
	return r
}

// Strings splits a comma-separated list, trimming spaces and dropping
// empty items.
func Strings(s string) []string {
	var r []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			r = append(r, f)
		}
	}
	return r
}

// ApplyMode sets, for every flag of fs that the command line did not set,
// the value that mode gives it in modes (flag name → value). It returns an
// error for an unknown mode. Call it after fs.Parse.
func ApplyMode(fs *flag.FlagSet, mode string, modes map[string]map[string]string) error {
	vals, ok := modes[mode]
	if !ok {
		names := make([]string, 0, len(modes))
		for k := range modes {
			names = append(names, k)
		}
		slices.Sort(names)
		return fmt.Errorf("-mode %q: give one of %s", mode, strings.Join(names, ", "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range vals {
		if set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("-mode %s: -%s=%s: %w", mode, name, v, err)
		}
	}
	return nil
}

// ModeHelp describes the values each mode gives, for -h.
func ModeHelp(modes map[string]map[string]string, order ...string) string {
	var b strings.Builder
	for _, m := range order {
		fmt.Fprintf(&b, "  -mode %s sets (unless given):", m)
		keys := make([]string, 0, len(modes[m]))
		for k := range modes[m] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " -%s=%s", k, modes[m][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Main is an experiment program's main. parse must register the flags on
// the flag set, parse the arguments and check every value (a Check)
// without doing any work; run does the work. A value that parse refuses
// is printed after the program's name and exits with status 1; what the
// flag package itself cannot parse exits with status 2 and -h with 0 (the
// flag package's own handling); a run that fails exits with status 1.
func Main[C any](name string, parse func(*flag.FlagSet, []string) (C, error), run func(C) error) {
	c, err := parse(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n(%s -h lists the flags and what they take)\n", name, err, name)
		os.Exit(1)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Usage sets fs's -h message: the command line of name, about, the flags,
// what the quick and full modes set (if modes is not nil), and then what
// extra writes (a list of methods, say), when it is not nil.
func Usage(fs *flag.FlagSet, name, about string, modes map[string]map[string]string, extra func(w io.Writer)) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags:\n", name, about)
		fs.PrintDefaults()
		if modes != nil {
			fmt.Fprintf(w, "\nModes:\n%s", ModeHelp(modes, "quick", "full"))
		}
		if extra != nil {
			extra(w)
		}
	}
}

// ParseMode parses args into fs, refuses arguments that are not flags,
// then applies the mode *mode names (the value of the -mode flag, set by
// the parse): see ApplyMode.
func ParseMode(fs *flag.FlagSet, args []string, mode *string, modes map[string]map[string]string) error {
	if err := Parse(fs, args); err != nil {
		return err
	}
	return ApplyMode(fs, *mode, modes)
}

// Parse parses args into fs and refuses arguments that are not flags
// (a value given after a space to a boolean flag, say).
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: give flags only, -name=value (a boolean flag takes -name=false, not -name false)", fs.Arg(0))
	}
	return nil
}
