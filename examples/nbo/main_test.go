package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
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
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-p", "100000"}, Want: "-p 100000"},
		{Args: []string{"-p", "0"}, Want: "-p 0"},
		{Args: []string{"-r", "0"}, Want: "-r"},
		{Args: []string{"-r", "NaN"}, Want: "-r"},
		{Args: []string{"-r", ""}, Want: "-r"},
		{Args: []string{"-iters", "0"}, Want: "-iters 0"},
		{Args: []string{"-train", "-3"}, Want: "-train -3"},
		{Args: []string{"-methods", "nbo1,nbo1"}, Want: "-methods"},
		{Args: []string{"-set", "soba.outer=0"}, Want: "-set soba.outer=0"},
		{Args: []string{"-set", "soba.inner=NaN"}, Want: "-set"},
		{Args: []string{"-seeds", "x"}, Want: "-seeds"},
	})
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}
