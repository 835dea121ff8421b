package experiment

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Floats parses a comma-separated list of numbers.
func Floats(s string) ([]float64, error) {
	var r []float64
	for _, f := range Strings(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a comma-separated list of numbers", s)
		}
		r = append(r, v)
	}
	return r, nil
}

// Ints parses a comma-separated list of integers.
func Ints(s string) ([]int, error) {
	var r []int
	for _, f := range Strings(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a comma-separated list of integers", s)
		}
		r = append(r, v)
	}
	return r, nil
}

// Seeds parses a comma-separated list of seeds, such as "1,2,3".
func Seeds(s string) ([]uint64, error) {
	var r []uint64
	for _, f := range Strings(s) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds %q: want a comma-separated list of seeds ≥ 0, e.g. 1,2,3", s)
		}
		r = append(r, v)
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("-seeds %q: give at least one seed", s)
	}
	return r, nil
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
		var names []string
		for k := range modes {
			names = append(names, k)
		}
		return fmt.Errorf("unknown -mode %q (want one of %s)", mode, strings.Join(names, ", "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range vals {
		if set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("mode %s: -%s=%s: %w", mode, name, v, err)
		}
	}
	return nil
}

// ModeHelp describes the values each mode gives, for -h.
func ModeHelp(modes map[string]map[string]string, order ...string) string {
	var b strings.Builder
	for _, m := range order {
		fmt.Fprintf(&b, "  -mode %s sets (unless given):", m)
		keys := sortedKeys(modes[m])
		for _, k := range keys {
			fmt.Fprintf(&b, " -%s=%s", k, modes[m][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// Main is an experiment program's main: it parses the command line with
// parse, runs run, and on error prints it after the program's name and
// exits with status 2 (bad command line) or 1 (failed run).
func Main[C any](name string, parse func(*flag.FlagSet, []string) (C, error), run func(C) error) {
	c, err := parse(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Usage sets fs's -h message: the command line of name, about, the flags,
// what the quick and full modes set, and then what extra writes (a list of
// methods, say), when it is not nil.
func Usage(fs *flag.FlagSet, name, about string, modes map[string]map[string]string, extra func(w io.Writer)) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags:\n", name, about)
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nModes:\n%s", ModeHelp(modes, "quick", "full"))
		if extra != nil {
			extra(w)
		}
	}
}

// ParseMode parses args into fs, then applies the mode *mode names (the
// value of the -mode flag, set by the parse): see ApplyMode.
func ParseMode(fs *flag.FlagSet, args []string, mode *string, modes map[string]map[string]string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return ApplyMode(fs, *mode, modes)
}
