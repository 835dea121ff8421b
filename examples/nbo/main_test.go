package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/examples/clitest"
)

// TestQuick runs the quick mode (4000/1000 samples, r' = 1, 400
// deterministic iterations) and checks paper 002's claims on its synthetic
// problem as docs/experiments.md reports them, with margins:
//
//   - per iteration, NBO-GD with T = 1 is within 30% of AmIGO-GD with
//     Q = 10 in relative suboptimality, with about a quarter of its oracle
//     calls;
//   - AmIGO-GD with Q = 1 is worse than NBO-GD with T = 1 by at least 5%.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-methods", "nbo1,amigo10,amigo1", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rel, calls := map[string]float64{}, map[string]int64{}
	for _, r := range o.Runs {
		if r.Error != "" {
			t.Errorf("%s stopped: %s", r.Method, r.Error)
		}
		rel[r.Method], calls[r.Method] = r.RelSubopt, r.Oracles
	}
	if !(rel["nbo1"] <= 1.3*rel["amigo10"]) {
		t.Errorf("NBO-GD (T=1) relative suboptimality %.3g is not within 30%% of AmIGO (Q=10)'s %.3g", rel["nbo1"], rel["amigo10"])
	}
	if 3*calls["nbo1"] > calls["amigo10"] {
		t.Errorf("NBO-GD (T=1) made %d oracle calls, AmIGO (Q=10) %d; want fewer than a third", calls["nbo1"], calls["amigo10"])
	}
	if !(rel["amigo1"] >= 1.05*rel["nbo1"]) {
		t.Errorf("AmIGO (Q=1) relative suboptimality %.3g is not 5%% above NBO-GD (T=1)'s %.3g", rel["amigo1"], rel["nbo1"])
	}
	for _, f := range []string{"traces.csv", "runs.csv", "summary.json", "r1_subopt_vs_iters.png", "r1_subopt_vs_time.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestFlags: bad values are errors naming the flag, before any work;
// among them the reproductions of issue 17 (-p 100000, -r 0).
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "100000"}, "-p 100000"},
		{[]string{"-p", "0"}, "-p 0"},
		{[]string{"-r", "0"}, "-r"},
		{[]string{"-r", "NaN"}, "-r"},
		{[]string{"-r", ""}, "-r"},
		{[]string{"-iters", "0"}, "-iters 0"},
		{[]string{"-train", "-3"}, "-train -3"},
		{[]string{"-methods", "nbo1,nbo1"}, "-methods"},
		{[]string{"-set", "soba.outer=0"}, "-set soba.outer=0"},
		{[]string{"-set", "soba.inner=NaN"}, "-set"},
		{[]string{"-seeds", "x"}, "-seeds"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := parseFlags(fs, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v; want one naming %s", c.args, err, c.want)
		}
	}
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, func(fs *flag.FlagSet, args []string) error {
		_, err := parseFlags(fs, args)
		return err
	})
}
