package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

// The interfaces a Problem stands in for, checked at compile time.
var (
	_ oracle.Problem  = (*Problem)(nil)
	_ oracle.Implicit = (*Problem)(nil)
	_ oracle.Unrolled = (*Problem)(nil)
)

// reference compiles model on the whole data, in this process.
func reference(t *testing.T, model string, p testParams) *graph.Problem {
	t.Helper()
	build, err := lookup(model)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := build(p.bytes(), p.whole())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// relErr is ‖got − want‖∞ / ‖want‖∞.
func relErr(got, want []float64) float64 {
	var d, n float64
	for i := range want {
		d = math.Max(d, math.Abs(got[i]-want[i]))
		n = math.Max(n, math.Abs(want[i]))
	}
	if n == 0 {
		return d
	}
	return d / n
}

// TestAgreement compares every oracle of a Problem on worker processes with
// the single-process graph.Problem, on several batches, shard layouts and
// models: 1e-12 relative.
func TestAgreement(t *testing.T) {
	const tol = 1e-12
	c := newCluster(t, 3)
	tp := testParams{N: 121, NVal: 61, D: 5, C: 3, Seed: 7, Bias: true}
	for _, tc := range []struct {
		model            string
		shards, replicas int
	}{{"logistic", 3, 1}, {"logistic", 2, 1}, {"penalized", 3, 1}} {
		t.Run(fmt.Sprintf("%s/%dshards", tc.model, tc.shards), func(t *testing.T) {
			ref := reference(t, tc.model, tp)
			upper := tp.NVal
			if tc.model == "penalized" {
				upper = 0
			}
			p := c.problem(t, Settings{Model: tc.model, Params: tp.bytes(), NumLower: tp.N, NumUpper: upper,
				Shards: tc.shards, Replicas: tc.replicas})
			if p.DimX() != ref.DimX() || p.DimY() != ref.DimY() || p.NumLower() != ref.NumLower() || p.NumUpper() != ref.NumUpper() {
				t.Fatalf("dims %d %d %d %d, want %d %d %d %d", p.DimX(), p.DimY(), p.NumLower(), p.NumUpper(),
					ref.DimX(), ref.DimY(), ref.NumLower(), ref.NumUpper())
			}
			rng := rand.New(rand.NewPCG(3, 4))
			x, y := p.X0(nil), p.Y0(nil)
			for i := range x {
				x[i] = rng.Float64() - 0.5
			}
			for i := range y {
				y[i] = rng.Float64() - 0.5
			}
			v, u := make([]float64, len(y)), make([]float64, len(x))
			for i := range v {
				v[i] = rng.NormFloat64()
			}
			for i := range u {
				u[i] = rng.NormFloat64()
			}
			random := func(n, k int) []int {
				b := make([]int, k)
				for i := range b {
					b[i] = rng.IntN(n)
				}
				return b
			}
			lowerBatches := [][]int{nil, {3}, {120, 5, 100, 5, 47, 0}, random(tp.N, 40)}
			upperBatches := [][]int{nil, {60}, {2, 59, 2, 30}, random(tp.NVal, 25)}
			if upper == 0 {
				upperBatches = [][]int{nil, {0}}
			}
			worst := 0.0
			check := func(what string, got, want []float64) {
				t.Helper()
				e := relErr(got, want)
				worst = math.Max(worst, e)
				if !(e <= tol) {
					t.Errorf("%s: relative error %.3g > %g", what, e, tol)
				}
			}
			dx, dy := len(x), len(y)
			for _, lv := range []struct {
				name        string
				batches     [][]int
				value, refV func(x, y []float64, b []int) float64
				grad, refG  func(dx, dy, x, y []float64, b []int)
			}{{"upper", upperBatches, p.F, ref.F, p.GradF, ref.GradF}, {"lower", lowerBatches, p.G, ref.G, p.GradG, ref.GradG}} {
				for bi, b := range lv.batches {
					name := fmt.Sprintf("%s batch %d", lv.name, bi)
					check(name+": value", []float64{lv.value(x, y, b)}, []float64{lv.refV(x, y, b)})
					gx, gy, rx, ry := make([]float64, dx), make([]float64, dy), make([]float64, dx), make([]float64, dy)
					lv.grad(gx, gy, x, y, b)
					lv.refG(rx, ry, x, y, b)
					check(name+": gradient in x", gx, rx)
					check(name+": gradient in y", gy, ry)
					lv.grad(nil, gy, x, y, b)
					check(name+": gradient in y alone", gy, ry)
					lv.grad(gx, nil, x, y, b)
					check(name+": gradient in x alone", gx, rx)
				}
			}
			for bi, b := range lowerBatches {
				name := fmt.Sprintf("lower batch %d", bi)
				hv, rv := make([]float64, dy), make([]float64, dy)
				p.HVP(hv, x, y, v, b)
				ref.HVP(rv, x, y, v, b)
				check(name+": HVP", hv, rv)
				again := make([]float64, dy)
				p.HVP(again, x, y, v, b)
				for i := range again {
					if math.Float64bits(again[i]) != math.Float64bits(hv[i]) {
						t.Fatalf("%s: HVP twice gives different bits at %d: %v, %v", name, i, again[i], hv[i])
					}
				}
				mx, rmx := make([]float64, dx), make([]float64, dx)
				p.MixedXY(mx, x, y, v, b)
				ref.MixedXY(rmx, x, y, v, b)
				check(name+": MixedXY", mx, rmx)
				my, rmy := make([]float64, dy), make([]float64, dy)
				p.MixedYX(my, x, y, u, b)
				ref.MixedYX(rmy, x, y, u, b)
				check(name+": MixedYX", my, rmy)
				op, rop := p.HVPAt(x, y, b), ref.HVPAt(x, y, b)
				for k := range 3 { // first product sends the point, later ones only v
					op(hv, v)
					rop(rv, v)
					check(fmt.Sprintf("%s: HVPAt product %d", name, k), hv, rv)
				}
				lin, rlin := p.Linearize(x, y, b), ref.Linearize(x, y, b)
				lin.MixedXY(mx, v)
				rlin.MixedXY(rmx, v)
				check(name+": Linearization.MixedXY", mx, rmx)
				var h, rh mat.SymDense
				p.HessYY(&h, x, y, b)
				ref.HessYY(&rh, x, y, b)
				check(name+": HessYY", mat.DenseCopyOf(&h).RawMatrix().Data, mat.DenseCopyOf(&rh).RawMatrix().Data)
				var hxy, rhxy mat.Dense
				p.HessXY(&hxy, x, y, b)
				ref.HessXY(&rhxy, x, y, b)
				check(name+": HessXY", hxy.RawMatrix().Data, rhxy.RawMatrix().Data)
			}
			for _, size := range []int{1, 7, tp.N} {
				if err := p.CheckBatch(false, size); err != nil {
					t.Errorf("CheckBatch(lower, %d): %v", size, err)
				}
			}
			if err := p.CheckBatch(false, tp.N+1); err == nil {
				t.Errorf("CheckBatch(lower, %d) of %d samples: no error", tp.N+1, tp.N)
			}
			if p.Err() != nil {
				t.Fatal(p.Err())
			}
			t.Logf("worst relative error %.3g over every oracle; %d messages sent", worst, p.Stats().MessagesSent)
		})
	}
}
