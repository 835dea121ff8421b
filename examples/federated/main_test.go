package main

import (
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/examples/clitest"
	"github.com/gobilevel/bilevel/graph"
)

// TestSyntheticGraph checks the objective of Sec. 6.1 with graph.Check, and
// its closed forms: y*(x) = Jx is feasible and minimizes ½‖x − y‖² on Y(x),
// and ∇F matches a finite difference of F(x) = f(x, y*(x)) (the noise
// samples average to zero).
func TestSyntheticGraph(t *testing.T) {
	s := newSynthetic(20, 50, 0.1, 3)
	obj, err := s.objective()
	if err != nil {
		t.Fatal(err)
	}
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, s.n)
	for i := range x {
		x[i] = math.Sin(float64(i))
	}
	ys := s.yStar(x)
	if r := graph.Check(p, x, ys, nil); r.Max() > 1e-6 {
		t.Errorf("graph.Check: %v", r)
	}
	// Feasibility: A y* + H x = 0.
	var viol float64
	for i := range s.a.RawMatrix().Rows {
		var v float64
		for j := range s.n {
			v += s.a.At(i, j)*ys[j] + s.h.At(i, j)*x[j]
		}
		viol = math.Max(viol, math.Abs(v))
	}
	if viol > 1e-10 {
		t.Errorf("A y*(x) + H x = %g, want 0", viol)
	}
	phi := func(x []float64) float64 { return p.F(x, s.yStar(x), nil) }
	g := s.gradF(x)
	for i := range x {
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += 1e-6
		xm[i] -= 1e-6
		if fd := (phi(xp) - phi(xm)) / 2e-6; math.Abs(fd-g[i]) > 1e-6 {
			t.Errorf("∇F[%d] = %g, finite difference %g", i, g[i], fd)
		}
	}
}

// TestMain serves as a client process when the quick run starts this
// test binary as a worker.
func TestMain(m *testing.M) {
	dist.ServeIfWorker()
	os.Exit(m.Run())
}

// TestQuick runs the quick mode, with its clients as processes (10
// clients on 10 workers), for fewer p, and checks paper 004's claims as
// docs/experiments.md reports them, with margins:
//
//   - synthetic: after the same K iterations, E-AiPOD with p = 0.3 has a
//     running-average error within 10% of E-AiPOD with p = 1 while making
//     at most 40% of its lower-level projections, with eq. 9b's estimator
//     and with the exact inverse; and the exact inverse ends at least 20%
//     below eq. 9b at p = 0.3;
//   - fedhr (p = 0.1) and imbalanced (p = 0.3): E-AiPOD ends within one
//     accuracy point of FedNest (or above it) and reaches the target
//     accuracy in at most 70% of FedNest's communication rounds;
//   - the rounds are messages: each run's messages are twice its rounds
//     times the 10 clients (every round of E-AiPOD and of FedNest, whose
//     Fraction is 1, asks every client and gets its reply).
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment")
	}
	out := t.TempDir()
	c, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-p", "1,0.3", "-fed-ps", "0.1", "-iters", "30", "-quiet", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run(c, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]runRow{}
	for _, r := range o.Runs {
		if r.Error != "" {
			t.Errorf("%s %s stopped: %s", r.Part, r.Method, r.Error)
		}
		rows[r.Part+"|"+r.Method] = r
		if r.Part != "synthetic" && r.Messages != 2*10*(r.Lower+r.Upper+r.Implicit) {
			t.Errorf("%s %s: %d messages for %d rounds of 10 clients", r.Part, r.Method, r.Messages, r.Lower+r.Upper+r.Implicit)
		}
	}
	for _, est := range []string{"", " exact"} {
		p1, p3 := rows["synthetic|E-AiPOD p=1"+est], rows["synthetic|E-AiPOD p=0.3"+est]
		if !(p3.AvgErrorAtK0 <= 1.1*p1.AvgErrorAtK0) {
			t.Errorf("synthetic%s: E-AiPOD p=0.3 error %.4g is not within 10%% of p=1's %.4g", est, p3.AvgErrorAtK0, p1.AvgErrorAtK0)
		}
		if float64(p3.LowerAtK0) > 0.4*float64(p1.LowerAtK0) {
			t.Errorf("synthetic%s: E-AiPOD p=0.3 made %d lower projections, p=1 %d; want at most 40%%", est, p3.LowerAtK0, p1.LowerAtK0)
		}
	}
	// The exact inverse (the companion code's) lowers the error of eq. 9b's
	// degenerate estimator at the longest horizon (quick: 0.38 against 0.63
	// for p = 0.3 after 667 iterations).
	if ex, nb := rows["synthetic|E-AiPOD p=0.3 exact"].AvgError, rows["synthetic|E-AiPOD p=0.3"].AvgError; !(ex < 0.8*nb) {
		t.Errorf("synthetic: with the exact inverse E-AiPOD p=0.3 ends at %.4g, with eq. 9b at %.4g; want at least 20%% lower", ex, nb)
	}
	for _, cmp := range [][2]string{{"fedhr", "E-AiPOD p=0.1"}, {"imbalanced", "E-AiPOD p=0.3"}} {
		e, f := rows[cmp[0]+"|"+cmp[1]], rows[cmp[0]+"|FedNest"]
		if e.TestAcc < f.TestAcc-0.01 {
			t.Errorf("%s: %s test accuracy %.4f is more than a point below FedNest's %.4f", cmp[0], cmp[1], e.TestAcc, f.TestAcc)
		}
		if e.RoundsToTarget < 0 || f.RoundsToTarget >= 0 && float64(e.RoundsToTarget) > 0.7*float64(f.RoundsToTarget) {
			t.Errorf("%s: %s reached %.2f after %d rounds, FedNest after %d; want at most 70%%", cmp[0], cmp[1], c.Target, e.RoundsToTarget, f.RoundsToTarget)
		}
	}
	for _, name := range []string{"traces.csv", "runs.csv", "summary.json", "synthetic_avg_error_vs_iters.png", "synthetic_exact_avg_error_vs_iters.png", "fedhr_test_acc_vs_rounds.png",
		"fedhr_p_test_acc_vs_rounds.png", "imbalanced_balanced_acc_vs_rounds.png"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s missing or empty", name)
		}
	}
}

// TestFlags: bad values are errors naming the flag, before any work.
func TestFlags(t *testing.T) {
	clitest.CheckRefused(t, clitest.Parser(parseFlags), []clitest.Refused{
		{Args: []string{"-p", "0"}, Want: "-p"},
		{Args: []string{"-p", "1,1"}, Want: "-p"},
		{Args: []string{"-p", "NaN"}, Want: "-p"},
		{Args: []string{"-part", "other"}, Want: "-part"},
		{Args: []string{"-clients", "0"}, Want: "-clients 0"},
		{Args: []string{"-per-client", "5"}, Want: "-per-client 5"},
		{Args: []string{"-pool", "5"}, Want: "-pool"},
		{Args: []string{"-fed-ps", "2"}, Want: "-fed-ps"},
		{Args: []string{"-fed-ps", "0"}, Want: "-fed-ps"},
		{Args: []string{"-target", "1"}, Want: "-target"},
		{Args: []string{"-k0", "-1"}, Want: "-k0 -1"},
		{Args: []string{"-workers", "-2"}, Want: "-workers"},
		{Args: []string{"-workers", "11"}, Want: "-workers"},
		{Args: []string{"-nats", "http://example.org:4222"}, Want: "-nats"},
		{Args: []string{"-nats", "nats://user:secret@example.org:4222"}, Want: "-nats"},
		{Args: []string{"-nats", "nats://example.org:4222", "-workers", "0"}, Want: "-nats"},
		{Args: []string{"-imb-ratio", "0.5"}, Want: "-imb-ratio"},
		{Args: []string{"-imb-size", "50"}, Want: "-imb-size"},
		{Args: []string{"-batch", "0"}, Want: "-batch"},
		{Args: []string{"-estimator", "neumann"}, Want: "-estimator"},
		{Args: []string{"-estimator", ""}, Want: "-estimator"},
		{Args: []string{"-estimator", "exact,exact"}, Want: "-estimator"},
	})
}

func FuzzFlags(f *testing.F) {
	clitest.FuzzFlags(f, clitest.Parser(parseFlags))
}
