package graph

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
)

// softmaxObjective builds a classifier on n samples of d features with c
// classes that differentiates log-softmax along axis (1: over the classes
// of each sample, 0: over the samples of each class): g = −mean(Y ⊙
// LogSoftmax(X·W, axis)) + 0.01·Σ_j e^{λ_j}‖W_j‖², f = mean((SoftMax(X'·W)
// − Y')²), computed in float32 when f32 is set.
func softmaxObjective(t *testing.T, n, d, c, axis int, f32 bool) *Problem {
	t.Helper()
	rng := rand.New(rand.NewPCG(12, 13))
	g := G.NewGraph()
	X, Y := randomMatrix(g, rng, "X", n, d, 1, false), randomMatrix(g, rng, "Y", n, c, 0, true)
	Xv, Yv := randomMatrix(g, rng, "Xv", n/2, d, 1, false), randomMatrix(g, rng, "Yv", n/2, c, 0, true)
	W := randomMatrix(g, rng, "W", d, c, 0.3, false)
	lam := vecNode(g, "lambda", make([]float64, d))
	ce := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(Y, G.Must(LogSoftmax(G.Must(G.Mul(X, W)), axis))))))))
	pen := G.Must(G.Mul(G.NewConstant(0.01), G.Must(G.Sum(G.Must(G.Mul(G.Must(G.Exp(lam)), G.Must(G.Sum(G.Must(G.Square(W)), 1))))))))
	sm := G.Must(G.SoftMax(G.Must(G.Mul(Xv, W))))
	upper := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(sm, Yv))))))
	p, err := Compile(Objective{Upper: upper, Lower: G.Must(G.Add(ce, pen)), Outer: []*G.Node{lam}, Inner: []*G.Node{W},
		LowerData: []*G.Node{X, Y}, UpperData: []*G.Node{Xv, Yv}, Float32: f32})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fusedSteps counts the logsoftmax-adjoint steps of p's compiled
// programs.
func fusedSteps(p *Problem) int {
	k := 0
	for _, pr := range programs(p) {
		for _, st := range pr.steps {
			if st.n.op == opLogSoftmaxAdjoint {
				k++
			}
		}
	}
	return k
}

// TestLogSoftmaxAdjointFused checks that programs compute the
// log-softmax's adjoint as one logsoftmax-adjoint step, and that every
// oracle (those of oracleValues: values, gradients, HVPs, mixed products,
// linearized and at a fixed x, on all samples and a batch) has the same
// bits as the programs of the primitives, in float64 and in float32,
// along the classes (rows of 7 and of 600 classes: blocks of several rows
// and of one) and along the samples (axis 0), with and without row
// blocks.
func TestLogSoftmaxAdjointFused(t *testing.T) {
	defer func(b, m int) { blockBytes, blockMinBytes = b, m }(blockBytes, blockMinBytes)
	batch := rowBatch
	for _, c := range []struct {
		name          string
		n, d, k, axis int
		blocks        bool
	}{
		{"classes", 40, 6, 7, 1, false},
		{"600 classes", 40, 6, 600, 1, false},
		{"samples", 40, 6, 7, 0, false},
		{"classes, row blocks", 40, 6, 7, 1, true},
	} {
		for _, f32 := range []bool{false, true} {
			blockBytes, blockMinBytes = 16<<20, 16<<20
			if c.blocks {
				blockBytes, blockMinBytes = 8*c.d*8, 0
			}
			saved := fusions
			fusions = nil
			p := softmaxObjective(t, c.n, c.d, c.k, c.axis, f32)
			want := oracleValues(p, batch)
			fusions = saved
			if k := fusedSteps(p); k != 0 {
				t.Fatalf("%s: %d logsoftmax-adjoint steps without the fuse rule", c.name, k)
			}
			p = softmaxObjective(t, c.n, c.d, c.k, c.axis, f32)
			got := oracleValues(p, batch)
			if fusedSteps(p) == 0 {
				t.Errorf("%s (float32 %v): no program computes the log-softmax's adjoint in one step", c.name, f32)
			}
			if c.blocks && segments(p) == 0 {
				t.Errorf("%s (float32 %v): no program runs by blocks of rows", c.name, f32)
			}
			diff := 0
			for i := range want {
				for j := range want[i] {
					if math.Float64bits(got[i][j]) != math.Float64bits(want[i][j]) {
						diff++
					}
				}
			}
			if diff > 0 {
				t.Errorf("%s (float32 %v): %d oracle outputs differ from the primitives' programs", c.name, f32, diff)
				continue
			}
			t.Logf("%s (float32 %v): %d logsoftmax-adjoint steps, bits equal", c.name, f32, fusedSteps(p))
		}
	}
}
