package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
)

// rows returns the samples of d at the indices.
func rows(d Data, idx []int) Data {
	r := Data{N: len(idx), D: d.D}
	for _, i := range idx {
		r.X = append(r.X, d.X[i*d.D:(i+1)*d.D]...)
		r.Labels = append(r.Labels, d.Labels[i])
	}
	return r
}

// TestCleaningBatch checks that the oracles of the hyper-cleaning model on a
// batch equal those of the model built on just the batch's rows, with the
// batch's λ_i: the batch reads the right weights and its λ-gradients land
// on the right samples (summed over repeated indices).
func TestCleaningBatch(t *testing.T) {
	const tol = 1e-12
	rng := rand.New(rand.NewPCG(9, 10))
	n, d, c := 30, 5, 3
	train, val := randData(rng, n, d, c), randData(rng, 12, d, c)
	for _, bias := range []bool{false, true} {
		s := CleaningSettings{Bias: bias, Cr: 0.01}
		full, err := HyperCleaning(train, val, c, s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := full.Compile()
		if err != nil {
			t.Fatal(err)
		}
		lambda, y := randVec(rng, n, 1), randVec(rng, p.DimY(), 0.5)
		v, u := randVec(rng, p.DimY(), 1), randVec(rng, n, 1)
		for _, batch := range [][]int{{3, 17, 0, 29, 8}, {4}, {6, 2, 6, 11}} {
			sub, err := HyperCleaning(rows(train, batch), val, c, s)
			if err != nil {
				t.Fatal(err)
			}
			q, err := sub.Compile()
			if err != nil {
				t.Fatal(err)
			}
			ls, us := make([]float64, len(batch)), make([]float64, len(batch))
			for k, i := range batch {
				ls[k], us[k] = lambda[i], u[i]
			}
			// scatter adds the sub-problem's λ-space vector onto the full one.
			scatter := func(sv []float64) []float64 {
				r := make([]float64, n)
				for k, i := range batch {
					r[i] += sv[k]
				}
				return r
			}
			near(t, "g", []float64{p.G(lambda, y, batch)}, []float64{q.G(ls, y, nil)}, tol)

			dx, dy := make([]float64, n), make([]float64, p.DimY())
			sx, sy := make([]float64, len(batch)), make([]float64, p.DimY())
			p.GradG(dx, dy, lambda, y, batch)
			q.GradG(sx, sy, ls, y, nil)
			near(t, "∇λ g", dx, scatter(sx), tol)
			near(t, "∇W g", dy, sy, tol)

			p.HVP(dy, lambda, y, v, batch)
			q.HVP(sy, ls, y, v, nil)
			near(t, "∇yy g·v", dy, sy, tol)
			p.Linearize(lambda, y, batch).HVP(dy, v)
			near(t, "linearized ∇yy g·v", dy, sy, tol)

			p.MixedXY(dx, lambda, y, v, batch)
			q.MixedXY(sx, ls, y, v, nil)
			near(t, "∇xy g·v", dx, scatter(sx), tol)

			p.MixedYX(dy, lambda, y, u, batch)
			q.MixedYX(sy, ls, y, us, nil)
			near(t, "∇yx g·u", dy, sy, tol)
		}
	}
}

// TestCleaningValue compares g with its formula
// mean_i σ(λ_i) CE_i + C_r‖W‖².
func TestCleaningValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	n, d, c := 20, 4, 3
	train, val := randData(rng, n, d, c), randData(rng, 10, d, c)
	m, err := HyperCleaning(train, val, c, CleaningSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Cr != 0.001 {
		t.Errorf("default C_r = %v; want 0.001", m.Cr)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	lambda, w := randVec(rng, n, 1), randVec(rng, d*c, 1)
	want := 0.001 * floats.Dot(w, w)
	for i := 0; i < n; i++ {
		z := make([]float64, c)
		for k := 0; k < c; k++ {
			for j := 0; j < d; j++ {
				z[k] += train.X[i*d+j] * w[j*c+k]
			}
		}
		lse := floats.LogSumExp(z)
		want += (lse - z[train.Labels[i]]) / (1 + math.Exp(-lambda[i])) / float64(n)
	}
	near(t, "g", []float64{p.G(lambda, w, nil)}, []float64{want}, 1e-12)
}

// TestCleaningShard: the model of rows [10, 22) of 30 training samples with
// Offset 10 and Samples 30 (a dist worker's shard) has the full model's λ
// and, on a batch of its local indices, the full model's oracles on the
// same samples' global indices: the weights are read, and their gradients
// land, at the global index. Offsets that do not fit are errors.
func TestCleaningShard(t *testing.T) {
	const tol = 1e-12
	rng := rand.New(rand.NewPCG(13, 14))
	n, d, c := 30, 4, 3
	train, val := randData(rng, n, d, c), randData(rng, 8, d, c)
	full, err := HyperCleaning(train, val, c, CleaningSettings{})
	if err != nil {
		t.Fatal(err)
	}
	local := []int{0, 11, 4, 4}
	global := []int{10, 21, 14, 14}
	shard, err := HyperCleaning(rows(train, seq(10, 22)), val, c, CleaningSettings{Offset: 10, Samples: n})
	if err != nil {
		t.Fatal(err)
	}
	p, err := full.Compile()
	if err != nil {
		t.Fatal(err)
	}
	q, err := shard.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if q.DimX() != n || q.NumLower() != 12 {
		t.Fatalf("shard: DimX %d, NumLower %d; want %d and 12", q.DimX(), q.NumLower(), n)
	}
	lambda, y, v := randVec(rng, n, 1), randVec(rng, p.DimY(), 0.5), randVec(rng, p.DimY(), 1)
	near(t, "g", []float64{q.G(lambda, y, local)}, []float64{p.G(lambda, y, global)}, tol)
	dx, dy, sx, sy := make([]float64, n), make([]float64, p.DimY()), make([]float64, n), make([]float64, p.DimY())
	p.GradG(dx, dy, lambda, y, global)
	q.GradG(sx, sy, lambda, y, local)
	near(t, "∇λ g", sx, dx, tol)
	near(t, "∇W g", sy, dy, tol)
	p.MixedXY(dx, lambda, y, v, global)
	q.MixedXY(sx, lambda, y, v, local)
	near(t, "∇xy g·v", sx, dx, tol)
	for _, s := range []CleaningSettings{{Offset: 19, Samples: n}, {Offset: -1, Samples: n}, {Samples: 5}} {
		if _, err := HyperCleaning(rows(train, seq(10, 22)), val, c, s); err == nil {
			t.Errorf("Offset %d, Samples %d for 12 samples: no error", s.Offset, s.Samples)
		}
	}
}

func seq(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}
