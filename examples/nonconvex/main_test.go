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

// TestQuick runs the quick mode and checks, with margins, what
// docs/experiments.md reports of paper 001's claims:
//
//   - PL game: MGBiO drives ‖∇Φ‖ below 1e-5 (from about 10) in 1000
//     iterations; VR-MSGBiO ends at least 10 times below MSGBiO;
//   - matrix sensing (d = 30): MGBiO brings the relative error from about
//     1.7 below 0.2; AID-BiO, whose CG assumes a positive definite lower
//     Hessian, stops on negative curvature.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-methods", "mgbio,msgbio,vrmsgbio,aid", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pl, sens, errs := map[string]float64{}, map[string]float64{}, map[string]string{}
	for _, r := range o.Runs {
		if r.Problem == "pl" {
			pl[r.Method] = r.GradNorm
			if r.Error != "" {
				t.Errorf("pl %s stopped: %s", r.Method, r.Error)
			}
		} else {
			sens[r.Method] = r.RelErr
			errs[r.Method] = r.Error
		}
	}
	if !(pl["mgbio"] < 1e-5) {
		t.Errorf("PL game: MGBiO ends at ‖∇Φ‖ = %.3g; want < 1e-5", pl["mgbio"])
	}
	if !(pl["vrmsgbio"] <= pl["msgbio"]/10) {
		t.Errorf("PL game: VR-MSGBiO ‖∇Φ‖ %.3g is not 10 times below MSGBiO's %.3g", pl["vrmsgbio"], pl["msgbio"])
	}
	if !(sens["mgbio"] < 0.2) {
		t.Errorf("sensing: MGBiO's relative error %.3g; want < 0.2", sens["mgbio"])
	}
	if !strings.Contains(errs["aid"], "not positive definite") {
		t.Errorf("sensing: AID-BiO did not stop on negative curvature (error %q)", errs["aid"])
	}
	for _, f := range []string{"traces.csv", "runs.csv", "summary.json", "pl_d50_grad_norm_vs_iters.png", "sensing_d30_rel_err_vs_time.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}
}

// TestFlags: bad values are errors naming the flag, before any work;
// among them the reproductions of issue 17 (-mu NaN, -cap -1s).
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-methods", "mgbio", "-mu", "NaN"}, Want: "-mu NaN"},
		{Args: []string{"-cap", "-1s"}, Want: "-cap -1s"},
		{Args: []string{"-methods", ""}, Want: "-methods"},
		{Args: []string{"-problem", "pl,pl"}, Want: "-problem"},
		{Args: []string{"-pl-l", "60"}, Want: "-pl-l 60"},
		{Args: []string{"-pl-mu", "2", "-pl-L", "1"}, Want: "-pl-L 1"},
		{Args: []string{"-pl-lr", "Inf"}, Want: "-pl-lr"},
		{Args: []string{"-dims", "1000"}, Want: "-dims"},
		{Args: []string{"-rank", "40", "-dims", "30"}, Want: "-rank"},
		{Args: []string{"-batch", "0"}, Want: "-batch 0"},
		{Args: []string{"-pl-iters", "-1"}, Want: "-pl-iters -1"},
	})
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}
