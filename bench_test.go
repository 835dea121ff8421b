package bilevel_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
)

// BenchmarkSolveLower times the inner solve to ‖∇y g‖ ≤ 1e-8 by Newton-CG
// and by L-BFGS on an ill-conditioned quadratic (d_y = 200, κ = 10⁴) and
// on per-pixel logistic regression over 1000 embedded Fashion-MNIST
// images (d_y = 7840), the measurements behind Settings.Inner's default
// (docs/design.md): go test -run '^$' -bench SolveLower .
func BenchmarkSolveLower(b *testing.B) {
	_, quad := quadratic(b, models.QuadraticSettings{DimX: 20, DimY: 200, Cond: 1e4, Seed: 1})
	train, _, err := data.EmbeddedFashionMNIST()
	if err != nil {
		b.Fatal(err)
	}
	sets, err := data.RandomSplit(train, 1, 1000, 500)
	if err != nil {
		b.Fatal(err)
	}
	md := func(ds *data.Dataset) models.Data { return models.Data{X: ds.X, N: ds.N, D: ds.D, Labels: ds.Labels} }
	lm, err := models.LogisticRegression(md(sets[0]), md(sets[1]), train.Classes, models.LogisticSettings{})
	if err != nil {
		b.Fatal(err)
	}
	logistic, err := lm.Compile()
	if err != nil {
		b.Fatal(err)
	}
	// Penalty weights e^λ_j/(c·d) around 1e-3·(1 ± 50%), as compare's.
	lambda := logistic.X0(nil)
	rng := rand.New(rand.NewPCG(1, 12))
	for i := range lambda {
		lambda[i] = math.Log(1e-3*float64(train.Classes*train.D)) + 0.5*rng.NormFloat64()
	}
	for _, c := range []struct {
		name string
		p    *graph.Problem
		x    []float64
	}{{"quadratic", quad, quad.X0(nil)}, {"logistic", logistic, lambda}} {
		for _, in := range []bilevel.Inner{bilevel.NewtonCG, bilevel.LBFGS} {
			b.Run(c.name+"/"+in.String(), func(b *testing.B) {
				b.ReportAllocs()
				var r *bilevel.Result
				for b.Loop() {
					if r, err = bilevel.SolveLower(c.p, c.x, &bilevel.Settings{Inner: in}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(r.InnerIterations), "iterations")
				b.ReportMetric(float64(r.Calls.GradG), "gradients")
				b.ReportMetric(float64(r.Calls.HVP), "HVPs")
			})
		}
	}
}
