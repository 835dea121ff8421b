package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
)

// randImages returns n random side×side images with pixels in [0, 1) and
// labels cycling through classes.
func randImages(rng *rand.Rand, n, side, classes int) Data {
	x := make([]float64, n*side*side)
	for i := range x {
		x[i] = rng.Float64()
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % classes
	}
	return Data{X: x, N: n, D: side * side, Labels: labels}
}

// cnnPoint returns a random outer point near the initial one (γ around 1,
// β around 0, filters perturbed) and a random head.
func cnnPoint(rng *rand.Rand, p *graph.Problem) (x, y []float64) {
	x = p.X0(nil)
	for i := range x {
		x[i] += 0.2 * rng.NormFloat64()
	}
	return x, randVec(rng, p.DimY(), 0.5)
}

var cnnCases = []struct {
	name              string
	s                 CNNSettings
	support, query    int
	ways              int
	supportSide, side int
}{
	{"28x28, 4 blocks, 3 filters", CNNSettings{Filters: 3, Seed: 1}, 2, 2, 2, 28, 28},
	{"8x8, 2 blocks, 4 filters, no bias", CNNSettings{Side: 8, Blocks: 2, Filters: 4, NoBias: true, Lambda: 0.1, Seed: 2}, 3, 4, 3, 8, 8},
	{"7x7, 2 blocks (odd sides), λ = 0", CNNSettings{Side: 7, Blocks: 2, Filters: 2, Lambda: -1, Seed: 3}, 4, 2, 2, 7, 7},
}

// TestCNNCheck compares every oracle of the CNN problem, the mixed product
// ∇φ∇y g·v through the whole backbone included, with finite differences.
func TestCNNCheck(t *testing.T) {
	for _, c := range cnnCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(c.support)))
			m, err := CNN(randImages(rng, c.support, c.side, c.ways), randImages(rng, c.query, c.side, c.ways), c.ways, c.s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.Compile()
			if err != nil {
				t.Fatal(err)
			}
			p32 := compile32(t, m.Objective)
			for k := 0; k < 2; k++ {
				x, y := cnnPoint(rng, p)
				checkBoth(t, fmt.Sprintf("point %d", k), p, p32, x, y, &graph.CheckSettings{Seed: uint64(k + 1)})
			}
		})
	}
}

// refFeatures is a direct implementation of the backbone: 3×3
// convolutions with padding 1, batch normalization over the batch and
// spatial axes, ReLU and 2×2 max pooling (floor), on x laid out as CNN's.
func refFeatures(x []float64, images Data, s CNNSettings) [][]float64 {
	s, _ = s.withDefaults()
	n, side, ch := images.N, s.Side, 1
	a := append([]float64{}, images.X...) // n × ch × side × side
	off := 0
	for k := 0; k < s.Blocks; k++ {
		f := s.Filters
		w := x[off : off+f*ch*9]
		gamma := x[off+f*ch*9 : off+f*ch*9+f]
		beta := x[off+f*ch*9+f : off+f*ch*9+2*f]
		off += f*ch*9 + 2*f
		conv := make([]float64, n*f*side*side)
		at := func(b, c, r, q int) float64 {
			if r < 0 || r >= side || q < 0 || q >= side {
				return 0
			}
			return a[((b*ch+c)*side+r)*side+q]
		}
		for b := 0; b < n; b++ {
			for o := 0; o < f; o++ {
				for r := 0; r < side; r++ {
					for q := 0; q < side; q++ {
						var sum float64
						for c := 0; c < ch; c++ {
							for i := 0; i < 3; i++ {
								for j := 0; j < 3; j++ {
									sum += w[((o*ch+c)*3+i)*3+j] * at(b, c, r+i-1, q+j-1)
								}
							}
						}
						conv[((b*f+o)*side+r)*side+q] = sum
					}
				}
			}
		}
		for o := 0; o < f; o++ {
			var mean, sq float64
			cnt := float64(n * side * side)
			for b := 0; b < n; b++ {
				for i := 0; i < side*side; i++ {
					mean += conv[(b*f+o)*side*side+i]
				}
			}
			mean /= cnt
			for b := 0; b < n; b++ {
				for i := 0; i < side*side; i++ {
					d := conv[(b*f+o)*side*side+i] - mean
					sq += d * d
				}
			}
			std := math.Sqrt(sq/cnt + s.Eps)
			for b := 0; b < n; b++ {
				for i := 0; i < side*side; i++ {
					v := &conv[(b*f+o)*side*side+i]
					*v = math.Max(0, gamma[o]*(*v-mean)/std+beta[o])
				}
			}
		}
		half := side / 2
		pooled := make([]float64, n*f*half*half)
		for b := 0; b < n; b++ {
			for o := 0; o < f; o++ {
				for r := 0; r < half; r++ {
					for q := 0; q < half; q++ {
						best := math.Inf(-1)
						for i := 0; i < 2; i++ {
							for j := 0; j < 2; j++ {
								best = math.Max(best, conv[((b*f+o)*side+2*r+i)*side+2*q+j])
							}
						}
						pooled[((b*f+o)*half+r)*half+q] = best
					}
				}
			}
		}
		a, side, ch = pooled, half, f
	}
	out := make([][]float64, n)
	d := ch * side * side
	for b := range out {
		out[b] = a[b*d : (b+1)*d]
	}
	return out
}

// refHead returns the mean cross-entropy of the logits F·W + b against
// labels, W (d × ways) and b laid out as y.
func refHead(feats [][]float64, labels []int, y []float64, ways int, bias bool) float64 {
	d := len(feats[0])
	var ce float64
	for i, f := range feats {
		z := make([]float64, ways)
		for j := range z {
			for k := 0; k < d; k++ {
				z[j] += f[k] * y[k*ways+j]
			}
			if bias {
				z[j] += y[d*ways+j]
			}
		}
		m := math.Inf(-1)
		for _, v := range z {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range z {
			s += math.Exp(v - m)
		}
		ce += m + math.Log(s) - z[labels[i]]
	}
	return ce / float64(len(feats))
}

// TestCNNForward checks the backbone and both objectives against a
// direct implementation and against gorgonia's own forward pass.
func TestCNNForward(t *testing.T) {
	for _, c := range cnnCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(8, uint64(c.support)))
			sup, qry := randImages(rng, c.support, c.side, c.ways), randImages(rng, c.query, c.side, c.ways)
			m, err := CNN(sup, qry, c.ways, c.s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.Compile()
			if err != nil {
				t.Fatal(err)
			}
			x0, y0 := p.X0(nil), p.Y0(nil)
			vm := G.NewTapeMachine(m.Graph)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatalf("gorgonia forward pass: %v", err)
			}
			for _, l := range []struct {
				name      string
				got, want float64
			}{
				{"g", p.G(x0, y0, nil), m.Objective.Lower.Value().Data().(float64)},
				{"f", p.F(x0, y0, nil), m.Objective.Upper.Value().Data().(float64)},
			} {
				if math.Abs(l.got-l.want) > 1e-12*math.Max(1, math.Abs(l.want)) {
					t.Errorf("%s = %.15g; gorgonia's forward pass gives %.15g", l.name, l.got, l.want)
				}
			}

			x, y := cnnPoint(rng, p)
			lam := m.Settings.Lambda
			var norm float64
			for _, v := range y {
				norm += v * v
			}
			bias := !c.s.NoBias
			wantG := refHead(refFeatures(x, sup, c.s), sup.Labels, y, c.ways, bias) + lam/2*norm
			wantF := refHead(refFeatures(x, qry, c.s), qry.Labels, y, c.ways, bias)
			if got := p.G(x, y, nil); math.Abs(got-wantG) > 1e-11*math.Max(1, math.Abs(wantG)) {
				t.Errorf("g = %.15g; the direct implementation gives %.15g", got, wantG)
			}
			if got := p.F(x, y, nil); math.Abs(got-wantF) > 1e-11*math.Max(1, math.Abs(wantF)) {
				t.Errorf("f = %.15g; the direct implementation gives %.15g", got, wantF)
			}

			// The embedding probe returns the features themselves.
			e, err := CNNEmbedding(qry, c.s)
			if err != nil {
				t.Fatal(err)
			}
			pe, err := e.Compile()
			if err != nil {
				t.Fatal(err)
			}
			if pe.DimX() != p.DimX() {
				t.Fatalf("probe has d_x = %d, CNN %d", pe.DimX(), p.DimX())
			}
			feats := make([]float64, pe.DimY())
			pe.GradF(nil, feats, x, pe.Y0(nil), nil)
			want := refFeatures(x, qry, c.s)
			var flat []float64
			for _, r := range want {
				flat = append(flat, r...)
			}
			near(t, "probe features", feats, flat, 1e-12)
		})
	}
}

// TestCNNHeadChainRule checks that CNN's oracles in φ are the head
// model's oracles in the features followed by the probe's
// vector-Jacobian product through the backbone.
func TestCNNHeadChainRule(t *testing.T) {
	c := cnnCases[1]
	rng := rand.New(rand.NewPCG(9, 1))
	sup, qry := randImages(rng, c.support, c.side, c.ways), randImages(rng, c.query, c.side, c.ways)
	cm, err := CNN(sup, qry, c.ways, c.s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cm.Compile()
	if err != nil {
		t.Fatal(err)
	}
	probe := func(d Data) *graph.Problem {
		e, err := CNNEmbedding(d, c.s)
		if err != nil {
			t.Fatal(err)
		}
		pe, err := e.Compile()
		if err != nil {
			t.Fatal(err)
		}
		return pe
	}
	ps, pq := probe(sup), probe(qry)
	hm, err := CNNHead(sup.Labels, qry.Labels, c.ways, cm.Features, c.s)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := hm.Compile()
	if err != nil {
		t.Fatal(err)
	}
	x, y := cnnPoint(rng, p)
	v := randVec(rng, p.DimY(), 1)
	ns := sup.N * cm.Features
	feats := make([]float64, ph.DimX())
	ps.GradF(nil, feats[:ns], x, ps.Y0(nil), nil)
	pq.GradF(nil, feats[ns:], x, pq.Y0(nil), nil)
	// back maps an adjoint of the features to φ.
	back := func(adj []float64) []float64 {
		dx, tmp := make([]float64, p.DimX()), make([]float64, p.DimX())
		ps.GradF(dx, nil, x, adj[:ns], nil)
		pq.GradF(tmp, nil, x, adj[ns:], nil)
		for i := range dx {
			dx[i] += tmp[i]
		}
		return dx
	}
	hx := make([]float64, ph.DimX())
	want, got := make([]float64, p.DimX()), make([]float64, p.DimY())
	wantY := make([]float64, p.DimY())

	p.MixedXY(want, x, y, v, nil)
	ph.MixedXY(hx, feats, y, v, nil)
	near(t, "∇φ∇y g·v", back(hx), want, 1e-10)

	p.GradF(want, wantY, x, y, nil)
	ph.GradF(hx, got, feats, y, nil)
	near(t, "∇φ f", back(hx), want, 1e-10)
	near(t, "∇y f", got, wantY, 1e-10)

	p.HVP(wantY, x, y, v, nil)
	ph.HVP(got, feats, y, v, nil)
	near(t, "∇yy g·v", got, wantY, 1e-10)
	if a, b := p.G(x, y, nil), ph.G(feats, y, nil); math.Abs(a-b) > 1e-12 {
		t.Errorf("g = %v through the CNN, %v through the head", a, b)
	}
}

func TestCNNErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	img := randImages(rng, 2, 28, 2)
	small := randImages(rng, 2, 8, 2)
	for _, c := range []struct {
		name  string
		build func() error
		want  string
	}{
		{"too many blocks", func() error { _, err := CNN(small, small, 2, CNNSettings{Side: 8, Blocks: 4}); return err }, "reduce 8×8 images to nothing"},
		{"wrong side", func() error { _, err := CNN(small, small, 2, CNNSettings{}); return err }, "want 28×28 images"},
		{"one class", func() error { _, err := CNN(img, img, 1, CNNSettings{}); return err }, "want at least 2"},
		{"label out of range", func() error { _, err := CNN(img, randImages(rng, 3, 28, 3), 2, CNNSettings{}); return err }, "outside [0, 2)"},
		{"negative filters", func() error { _, err := CNN(img, img, 2, CNNSettings{Filters: -1}); return err }, "Filters = -1"},
		{"NaN lambda", func() error { _, err := CNN(img, img, 2, CNNSettings{Lambda: math.NaN()}); return err }, "Lambda = NaN"},
		{"probe side", func() error { _, err := CNNEmbedding(small, CNNSettings{}); return err }, "want 28×28 images"},
		{"head label", func() error { _, err := CNNHead([]int{0, 2}, []int{0}, 2, 4, CNNSettings{}); return err }, "label 2 of support sample 1"},
		{"head features", func() error { _, err := CNNHead([]int{0}, []int{0}, 2, 0, CNNSettings{}); return err }, "0 features"},
	} {
		err := c.build()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one containing %q", c.name, err, c.want)
		}
	}
	if n, err := CNNFeatures(CNNSettings{}); err != nil || n != 32 {
		t.Errorf("CNNFeatures of the defaults = %d, %v; want 32", n, err)
	}
}

// BenchmarkCNNTask measures the per-task oracle work of meta-training on a
// 5-way 1-shot task with 15 queries per class and the default backbone:
// the support-set oracles at a fixed φ and the query-set gradient.
func BenchmarkCNNTask(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := CNN(randImages(rng, 5, 28, 5), randImages(rng, 75, 28, 5), 5, CNNSettings{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		b.Fatal(err)
	}
	x, y := p.X0(nil), randVec(rng, p.DimY(), 0.1)
	dx, dy := make([]float64, p.DimX()), make([]float64, p.DimY())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fx := p.FixX(x, nil, nil)
		fx.GradG(nil, dy, y)
		fx.HVP(dy, y, y)
		fx.MixedXY(dx, y, y)
		fx.GradF(dx, dy, y)
	}
}
