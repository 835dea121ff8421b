package optim

import (
	"testing"

	"github.com/gobilevel/bilevel/internal/trajectory"
)

// TestFirstOrderTrajectories records F2SA's and BOME's runs, as
// TestTrajectories does for the other methods, in their own golden file
// (testdata/trajectories_firstorder.json, recorded when the methods were
// added): deterministic and stochastic, default and explicit steps,
// schedules, both φ of BOME, and the compiled graph problems of
// TestGraphTrajectories. Every run must repeat it bit for bit.
func TestFirstOrderTrajectories(t *testing.T) {
	det, sto := testProblem(t), stochasticProblem(t)
	graphs := map[string]trajCase{}
	for _, c := range trajGraphCases(t) {
		graphs[c.name] = c
	}
	gq, gs, gl := graphs["graph quadratic AIDBiO"].p, graphs["graph samples AIDBiO"].p, graphs["logistic AIDBiO"].p
	x0 := []float64{0.4, -0.3, 0.2}
	sgd, adam := SGD{LR: 0.2}, Adam{LR: 0.05}
	const k = 12
	cases := []trajCase{
		{"F2SA det", det, x0, nil, Settings{}, F2SA{Gamma: 0.5, Lambda: 10, T: 4, Outer: sgd}, k},
		{"F2SA det default steps growing λ", det, x0, nil, Settings{}, F2SA{T: 3, AlphaDecay: 0.5, LambdaGrowth: 0.5, Outer: sgd}, k},
		{"F2SA sto schedules shuffled", sto, x0, nil, Settings{Seed: 31, Sampling: Shuffled}, F2SA{T: 3, AlphaDecay: 5. / 7, GammaDecay: 4. / 7, LambdaGrowth: 1. / 7, LowerBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"BOME det", det, x0, nil, Settings{}, BOME{Alpha: 0.5, T: 4, Outer: sgd}, k},
		{"BOME det value φ default α", det, x0, nil, Settings{}, BOME{T: 3, Eta: 1, Phi: BOMEValue, Outer: sgd}, k},
		{"BOME sto Adam and SGD", sto, x0, nil, Settings{Seed: 32}, BOME{T: 3, LowerBatch: 20, UpperBatch: 20, Outer: adam, Inner: SGD{LR: 0.1, Momentum: 0.5}}, k},
		{"graph quadratic F2SA", gq, nil, nil, Settings{}, F2SA{T: 3, Outer: SGD{LR: 0.1}}, 8},
		{"graph quadratic BOME", gq, nil, nil, Settings{}, BOME{T: 3, Outer: SGD{LR: 0.1}}, 8},
		{"graph samples F2SA", gs, nil, nil, Settings{Seed: 33}, F2SA{T: 3, LowerBatch: 10, UpperBatch: 10, Outer: SGD{LR: 0.1}}, 8},
		{"logistic F2SA", gl, nil, nil, Settings{Seed: 34}, F2SA{T: 3, LowerBatch: 20, UpperBatch: 20, Outer: adam}, 8},
		{"logistic BOME", gl, nil, nil, Settings{Seed: 35}, BOME{T: 3, LowerBatch: 20, UpperBatch: 20, Outer: adam}, 8},
	}
	got := map[string]*trajectory.Run{}
	for _, c := range cases {
		got[c.name] = trajRun(t, c)
	}
	// Under other kernels (purego build) the worst run differs by 1.1e-13.
	trajectory.Check(t, "testdata/trajectories_firstorder.json", got, *updateTrajectories, trajectory.ForKernels(nil, got, 1e-10))
}
