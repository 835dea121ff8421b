package graph

import (
	"math"
	"testing"
)

// TestMixedXYSum checks FixedX's sums of mixed products on ridge
// regression against the closed form Σ_i ∇λw g(y_i)·v_i = Σ_i e^λ⊙y_i⊙v_i
// and against the sum of MixedXY products, with two FixedX values (one
// on a batch) used in turn, an empty sum (zero), a sum restarted by
// MixedXYSum, and one count per product added.
func TestMixedXYSum(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	x1, x2 := []float64{0.1, -0.2, 0.3}, []float64{1, 0, -1}
	ys := [][]float64{{0.5, 1, -2}, {1, 0.25, 3}, {-1, 2, 0.5}}
	vs := [][]float64{{1, -1, 0.5}, {0.3, 2, -1}, {2, 0.5, 1}}
	fs := []*FixedX{p.FixX(x1, []int{3, 1}, nil), p.FixX(x2, nil, nil)}
	xs, batches := [][]float64{x1, x2}, [][]int{{3, 1}, nil}
	got, want, mixed := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	for _, f := range fs {
		got[0] = math.NaN()
		f.MixedXYSum(got)
		for i, g := range got {
			if g != 0 {
				t.Errorf("empty sum[%d] = %v, want 0", i, g)
			}
		}
	}
	before := p.Stats().MixedXYProducts
	for round := range 2 {
		for k := range round + 2 { // two products, then three
			for _, f := range fs {
				f.AddMixedXY(ys[k], vs[k])
			}
		}
		for i, f := range fs {
			f.MixedXYSum(got)
			clear(want)
			var direct []float64
			for k := range round + 2 {
				p.MixedXY(mixed, xs[i], ys[k], vs[k], batches[i])
				direct = append(direct, mixed...)
				for j := range want {
					want[j] += math.Exp(xs[i][j]) * ys[k][j] * vs[k][j]
				}
			}
			for j := range got {
				var sum float64
				for k := 0; k < len(direct); k += 3 {
					sum += direct[k+j]
				}
				if math.Abs(got[j]-want[j]) > 1e-14*(1+math.Abs(want[j])) || math.Abs(got[j]-sum) > 1e-14*(1+math.Abs(sum)) {
					t.Errorf("round %d, FixedX %d: sum[%d] = %v, closed form %v, sum of MixedXY %v", round, i, j, got[j], want[j], sum)
				}
			}
		}
	}
	// 2·(2 + 3) products added, as many MixedXY calls to check them.
	if n := p.Stats().MixedXYProducts - before; n != 20 {
		t.Errorf("%d mixed products counted, want 20", n)
	}
}

// TestSweepProgram checks that FixedX's ∇y g and HVP, which run the
// dynamic steps they need of the shared sweep program, equal the direct
// oracles bit for bit, before and after sums of mixed products on the same
// program, for two FixedX values used in turn.
func TestSweepProgram(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	xs, batches := [][]float64{{0.1, -0.2, 0.3}, {1, 0, -1}}, [][]int{{3, 1}, nil}
	fs := []*FixedX{p.FixX(xs[0], batches[0], nil), p.FixX(xs[1], batches[1], nil)}
	y, v := []float64{0.5, 1, -2}, []float64{1, -1, 0.5}
	a, b, sum := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	for round := range 2 {
		for i, f := range fs {
			f.GradG(nil, a, y)
			p.GradG(nil, b, xs[i], y, batches[i])
			for j := range a {
				if a[j] != b[j] {
					t.Errorf("round %d, FixedX %d: ∇y g[%d] = %v, directly %v", round, i, j, a[j], b[j])
				}
			}
			f.AddMixedXY(y, v)
			f.HVP(a, y, v)
			p.HVP(b, xs[i], y, v, batches[i])
			for j := range a {
				if a[j] != b[j] {
					t.Errorf("round %d, FixedX %d: HVP[%d] = %v, directly %v", round, i, j, a[j], b[j])
				}
			}
			f.MixedXYSum(sum)
		}
	}
}
