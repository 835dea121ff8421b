package clitest

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// Parse is a program's flag parsing and checking: it registers the flags
// on fs, parses args and checks every value, without doing any work.
type Parse func(fs *flag.FlagSet, args []string) error

// badValues are the seeds every flag is tried with: out of every domain
// the programs have, and a few inside.
var badValues = []string{"", "0", "-1", "-3", "1", "2", "0.5", "NaN", "Inf", "-Inf", "1e308", "100000",
	"-1s", "0s", "a,a", ",", "x", "1,1", "embedded", "true"}

// Flags returns the names of the flags parse registers, sorted.
func Flags(parse Parse) []string {
	fs := flag.NewFlagSet("help", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	parse(fs, []string{"-h"})
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// FuzzFlags fuzzes a program's flag parsing: two of its flags (picked by
// the fuzzed bytes) set to fuzzed values. Parsing must never panic, and a
// refusal other than the flag package's own must name a flag (a "-name"
// of the program) or the argument it could not read. The seeds are every
// flag with each of badValues, which `go test` runs in well under a
// second.
func FuzzFlags(f *testing.F, parse Parse) {
	names := Flags(parse)
	if len(names) == 0 {
		f.Fatal("the program registers no flags")
	}
	for i := range names {
		for _, v := range badValues {
			f.Add(uint8(i), v, uint8(i), v)
		}
	}
	f.Fuzz(func(t *testing.T, i uint8, v string, j uint8, w string) {
		args := []string{"-" + names[int(i)%len(names)] + "=" + v, "-" + names[int(j)%len(names)] + "=" + w}
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		err := parse(fs, args)
		if err == nil || errors.Is(err, flag.ErrHelp) || strings.HasPrefix(err.Error(), "invalid value ") {
			return // accepted, or refused by the flag package itself
		}
		msg := err.Error()
		for _, n := range names {
			if strings.Contains(msg, "-"+n) {
				return
			}
		}
		if !strings.Contains(msg, "unexpected argument") {
			t.Fatalf("%q: error %q names no flag", args, msg)
		}
	})
}

// Parser adapts a program's parseFlags, which returns its configuration,
// to Parse.
func Parser[C any](parse func(*flag.FlagSet, []string) (C, error)) Parse {
	return func(fs *flag.FlagSet, args []string) error {
		_, err := parse(fs, args)
		return err
	}
}

// Refused is a command line a program must refuse before any work, and
// a part of the message it must give (the flag it names).
type Refused struct {
	Args []string
	Want string
}

// CheckRefused runs parse on each command line, on a fresh flag set, and
// fails t unless it is refused with a message that contains Want.
func CheckRefused(t *testing.T, parse Parse, cases []Refused) {
	t.Helper()
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := parse(fs, c.Args); err == nil || !strings.Contains(err.Error(), c.Want) {
			t.Errorf("%q: error %v; want one naming %s", c.Args, err, c.Want)
		}
	}
}
