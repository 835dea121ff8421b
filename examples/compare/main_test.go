package main

import (
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobilevel/bilevel/examples/clitest"
)

// TestRun runs a small comparison on the embedded data and checks its
// claims: CG converges to the exact hypergradient, truncated ITD does not
// beat full ITD, ITD keeps |y|·8 bytes per inner step and AID-CG keeps
// nothing that grows with N.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small comparison")
	}
	out := t.TempDir()
	c := config{models: []string{"cleaning"}, dataDir: "embedded", train: 300, val: 200, corrupt: 0.5, reg: 0.01,
		center: true, ns: []int{2, 80}, ts: []int{10, 40}, memTs: []int{20, 200}, trunc: 5, seed: 1, out: out, quiet: true}
	res, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if e := res["cleaning_aid_cg_err"].(float64); e > 1e-6 {
		t.Errorf("AID-CG's best relative error is %.2e; want ≤ 1e-6 with 80 CG steps", e)
	}
	if full, trunc := res["cleaning_itd_err"].(float64), res["cleaning_itd_trunck5_err"].(float64); trunc < full {
		t.Errorf("truncated ITD (%.3e) beats full ITD (%.3e)", trunc, full)
	}
	slope, want := res["itd_bytes_per_step"].(float64), float64(res["y_bytes"].(int))
	if math.Abs(slope-want) > 0.02*want {
		t.Errorf("ITD keeps %.0f bytes per inner step; want |y|·8 = %.0f within 2%%", slope, want)
	}
	if g := res["aid_bytes_growth"].(float64); math.Abs(g) > 16 {
		t.Errorf("AID-CG's memory grows by %.1f bytes per step; want flat", g)
	}
	for _, f := range []string{"results.csv", "memory.csv", "summary.json", "cleaning_aid_error_vs_N.png", "cleaning_itd_error_vs_T.png",
		"cleaning_error_vs_time.png", "memory.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", f)
		}
	}

	// One -memT gives no growth per step: the keys are left out, never NaN.
	c.memTs, c.ns, c.ts = []int{10}, []int{2}, []int{10}
	res, err = run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res["aid_bytes_growth"]; ok {
		t.Errorf("aid_bytes_growth = %v from one -memT", res["aid_bytes_growth"])
	}
}

// TestFlags: the reproductions of issue 17 and other values outside their
// domains are refused before any work, naming the flag.
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-corrupt", "2"}, Want: "-corrupt 2"},
		{Args: []string{"-corrupt", "NaN"}, Want: "-corrupt NaN"},
		{Args: []string{"-train", "-5"}, Want: "-train -5"},
		{Args: []string{"-val", "0"}, Want: "-val 0"},
		{Args: []string{"-reg", "-1"}, Want: "-reg -1"},
		{Args: []string{"-N", "0,1"}, Want: "-N"},
		{Args: []string{"-T", ""}, Want: "-T"},
		{Args: []string{"-memT", "100000"}, Want: "-memT"},
		{Args: []string{"-K", "0"}, Want: "-K 0"},
		{Args: []string{"-model", "cleaning,cleaning"}, Want: "-model"},
		{Args: []string{"-model", "ridge"}, Want: "-model"},
		{Args: []string{"-data", "/nonexistent"}, Want: "-data"},
		{Args: []string{"-out", ""}, Want: "-out"},
		{Args: []string{"-quiet", "x"}, Want: "unexpected argument"},
	})
	if _, err := parseFlags(flag.NewFlagSet("compare", flag.ContinueOnError), nil); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}
