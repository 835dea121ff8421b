package optim_test

import (
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// *graph.Problem is an oracle.Problem that declares dense matrices for the
// explicit-matrix methods.
var _ oracle.Problem = (*graph.Problem)(nil)

// TestDenseMethodsOnGraph runs STABLE and MGBiO on a compiled graph problem
// (models.Quadratic, DimX = 2, DimY = 3, condition number 10), which they
// use through HessYY and HessXY (dense matrices, no HVP or mixed product in an
// iteration), to ‖x − x*‖ ≤ 1e-6 within 700 iterations with the upper step
// 1/L_Φ and the default lower steps β = 1/L and λ = 1/(2L), L = 10
// (measured: STABLE 157, MGBiO 513, whose y-step carries no correction for
// the move of y*(x)).
func TestDenseMethodsOnGraph(t *testing.T) {
	q, err := models.Quadratic(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 10, Rho: 0.1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Compile()
	if err != nil {
		t.Fatal(err)
	}
	xs := q.XStar(nil)
	// Φ is quadratic: its Hessian has columns ∇Φ(e_i) − ∇Φ(0).
	g0 := q.HyperGrad(nil, []float64{0, 0})
	h := mat.NewSymDense(2, nil)
	for i := range 2 {
		e := []float64{0, 0}
		e[i] = 1
		gi := q.HyperGrad(nil, e)
		for j := i; j < 2; j++ {
			h.SetSym(i, j, gi[j]-g0[j])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(h, false) {
		t.Fatal("eigendecomposition failed")
	}
	step := 1 / es.Values(nil)[1] // 1/L_Φ
	for _, m := range []optim.Method{
		optim.STABLE{Alpha: step},
		optim.MGBiO{Gamma: step},
	} {
		rec := &optim.MemoryRecorder{}
		dist := func(x, _ []float64) map[string]float64 { return map[string]float64{"err": floats.Distance(x, xs, 2)} }
		_, err := optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: 700, Metrics: dist, Recorder: rec}, m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if c := rec.Records[1].Calls.Sub(rec.Records[0].Calls); c.HVP != 0 || c.MixedXY != 0 || c.MixedYX != 0 || c.Dense == 0 {
			t.Errorf("%T: iteration 1 calls %+v, want dense matrices and no products", m, c)
		}
		first := -1
		for _, r := range rec.Records {
			if r.Metrics["err"] <= 1e-6 {
				first = r.Iter
				break
			}
		}
		if first < 0 {
			t.Errorf("%T: ‖x − x*‖ = %.3g after 700 iterations, want ≤ 1e-6", m, rec.Records[len(rec.Records)-1].Metrics["err"])
			continue
		}
		t.Logf("%T: ‖x − x*‖ ≤ 1e-6 at iteration %d", m, first)
	}
}
