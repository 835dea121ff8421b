package unroll_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/unroll"
	_ "go4.org/unsafe/assume-no-moving-gc"
	G "gorgonia.org/gorgonia"
)

// logistic builds multinomial logistic regression with per-feature weights:
// g(λ, W) = CE(X W) + Σ_jk exp(λ_j) W_jk², f(λ, W) = CE(Xv W).
func logistic(t *testing.T, n, d, k int) *graph.Problem {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	g := G.NewGraph()
	X, Y := constant(g, rng, "X", n, d, 1, false), constant(g, rng, "Y", n, k, 0, true)
	Xv, Yv := constant(g, rng, "Xv", n, d, 1, false), constant(g, rng, "Yv", n, k, 0, true)
	W := constant(g, rng, "W", d, k, 0.1, false)
	lam := constant(g, rng, "lambda", d, 1, 0.3, false)
	ce := G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Mul(X, W)), Y))
	reg := G.Must(G.Sum(G.Must(G.BroadcastHadamardProd(G.Must(G.Exp(lam)), G.Must(G.Square(W)), []byte{1}, nil))))
	lower := G.Must(G.Add(ce, reg))
	upper := G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Mul(Xv, W)), Yv))
	p, err := graph.Compile(graph.Objective{Upper: upper, Lower: lower, Outer: []*G.Node{lam}, Inner: []*G.Node{W},
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSweepEqualsInGraphUnroll checks that the reverse sweep over stored
// iterates reproduces, to rounding, the derivative of the unrolled
// iteration written out in one graph and differentiated symbolically.
func TestSweepEqualsInGraphUnroll(t *testing.T) {
	p := logistic(t, 30, 6, 3)
	x, y0 := p.X0(nil), p.Y0(nil)
	for _, c := range []struct {
		T           int
		alpha, beta float64
	}{{1, 0.5, 0}, {5, 0.5, 0}, {20, 0.3, 0}, {12, 0.2, 0.6}} {
		u := &unroll.Unroller{Steps: c.T, Alpha: c.alpha, Momentum: c.beta}
		got := make([]float64, p.DimX())
		if _, err := u.Hypergradient(got, p, x, y0, nil); err != nil {
			t.Fatal(err)
		}
		ref, err := p.Unrolled(c.T, c.alpha, c.beta)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, p.DimX())
		F := ref.Hypergradient(want, x, y0)
		var num, den float64
		for i := range got {
			num += (got[i] - want[i]) * (got[i] - want[i])
			den += want[i] * want[i]
		}
		if e := math.Sqrt(num / den); e > 1e-10 {
			t.Errorf("T = %d, β = %v: sweep differs from the in-graph unroll by %.2e (relative)", c.T, c.beta, e)
		}
		if f := p.F(x, u.Final(), nil); math.Abs(f-F) > 1e-12*math.Abs(F) {
			t.Errorf("T = %d: f(x, y_T) = %v after the forward pass, %v from the graph", c.T, f, F)
		}
	}
}
