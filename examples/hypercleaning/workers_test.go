package main

import (
	"flag"
	"math"
	"os"
	"testing"

	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/optim"
)

// TestMain serves as a worker when a test starts this binary as one.
func TestMain(m *testing.M) {
	dist.ServeIfWorker()
	os.Exit(m.Run())
}

// TestWorkers: with -workers 2 the problem is split between two worker
// processes, and it is the problem in this process: its oracles agree to
// 1e-12 relative, and 5 iterations of AID-BiO (full batches, CG) end at
// the same λ and W to 1e-9.
func TestWorkers(t *testing.T) {
	args := []string{"-train", "300", "-val", "100", "-test", "100", "-p", "0.5", "-out", t.TempDir()}
	local, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), args)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), append(args, "-workers", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if procs.cluster, err = startCluster(procs); err != nil {
		t.Fatal(err)
	}
	defer procs.cluster.Close()
	images, err := experiment.LoadImages(local.Datasets[0])
	if err != nil {
		t.Fatal(err)
	}
	images.Name = experiment.FileNames(local.Datasets)[0]
	a, err := newSetup(local, images, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSetup(procs, images, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if _, ok := b.problem.(*dist.Problem); !ok {
		t.Fatalf("-workers 2 made a %T", b.problem)
	}
	x, y := append([]float64(nil), a.x0...), append([]float64(nil), a.y0...)
	for i := range x {
		x[i] = math.Sin(float64(i))
	}
	for i := range y {
		y[i] = 0.01 * math.Cos(float64(i))
	}
	rel := func(u, v []float64) float64 {
		var d, n float64
		for i := range u {
			d, n = max(d, math.Abs(u[i]-v[i])), max(n, math.Abs(v[i]))
		}
		return d / n
	}
	ga, gb := make([]float64, len(x)), make([]float64, len(x))
	ha, hb := make([]float64, len(y)), make([]float64, len(y))
	a.problem.GradG(ga, ha, x, y, nil)
	b.problem.GradG(gb, hb, x, y, nil)
	if e := max(rel(gb, ga), rel(hb, ha)); e > 1e-12 {
		t.Errorf("GradG on the workers differs by %.3g relative", e)
	}
	if fa, fb := a.problem.F(x, y, nil), b.problem.F(x, y, nil); math.Abs(fa-fb) > 1e-12*math.Abs(fa) {
		t.Errorf("F: %v in process, %v on the workers", fa, fb)
	}
	m := optim.AIDBiO{Alpha: 1, D: 5, N: 5, Outer: optim.Adam{LR: 1}}
	s := &optim.Settings{MaxIter: 5, EvalEvery: -1}
	ra, err := optim.Solve(a.problem, a.x0, a.y0, s, m)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := optim.Solve(b.problem, b.x0, b.y0, s, m)
	if err != nil {
		t.Fatal(err)
	}
	if e := max(rel(rb.X, ra.X), rel(rb.Y, ra.Y)); e > 1e-9 {
		t.Errorf("after 5 iterations of AID-BiO the workers' λ and W differ by %.3g relative", e)
	} else {
		t.Logf("oracles and 5 AID-BiO iterations on 2 workers agree with the process to %.2g", e)
	}
}
