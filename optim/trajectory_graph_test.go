package optim

import (
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/internal/trajectory"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
)

// trajGraphCases are recorded runs on compiled graph problems, whose
// linearized HVP (graph.Problem.HVPAt) and dense matrices (HessYY, HessXY)
// the methods use where they can: models.Quadratic deterministic and with
// samples, and a small logistic regression (whose HVP depends on y).
func trajGraphCases(t *testing.T) []trajCase {
	compile := func(s models.QuadraticSettings) oracle.Problem {
		q, err := models.Quadratic(s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := q.Compile()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	gq := compile(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 10, Rho: 0.1, Seed: 1})
	gs := compile(models.QuadraticSettings{DimX: 2, DimY: 3, Cond: 5, Rho: 0.1, Seed: 2, LowerSamples: 40, UpperSamples: 30})
	rnd := rand.New(rand.NewPCG(5, 5))
	lm, err := models.LogisticRegression(normalClasses(rnd, 60, 4, 3), normalClasses(rnd, 40, 4, 3), 3, models.LogisticSettings{})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := lm.Compile()
	if err != nil {
		t.Fatal(err)
	}
	sgd, adam := SGD{LR: 0.1}, Adam{LR: 0.05}
	const k = 8
	return []trajCase{
		{"graph quadratic AIDBiO", gq, nil, nil, Settings{}, AIDBiO{D: 3, N: 3, Outer: sgd}, k},
		{"graph quadratic ITDBiO", gq, nil, nil, Settings{}, ITDBiO{D: 4, Outer: sgd}, k},
		{"graph quadratic STABLE", gq, nil, nil, Settings{}, STABLE{Alpha: 0.1}, k},
		{"graph quadratic STABLEMatrixFree", gq, nil, nil, Settings{}, STABLEMatrixFree{Alpha: 0.1, N: 3}, k},
		{"graph quadratic MGBiO", gq, nil, nil, Settings{}, MGBiO{Gamma: 0.1}, k},
		{"graph quadratic NBOGD", gq, nil, nil, Settings{}, NBOGD{Outer: sgd}, k},
		{"graph samples AIDBiO", gs, nil, nil, Settings{Seed: 1}, AIDBiO{D: 3, N: 3, InnerBatch: 10, HessianBatch: 10, UpperBatch: 10, Outer: sgd}, k},
		{"graph samples StocBiO", gs, nil, nil, Settings{Seed: 2}, StocBiO{D: 3, Q: 4, InnerBatch: 10, HessianBatch: 10, MixedBatch: 10, UpperBatch: 10, Outer: sgd}, k},
		{"graph samples VRMSGBiO", gs, nil, nil, Settings{Seed: 3}, VRMSGBiO{Gamma: 0.05, LowerBatch: 10, UpperBatch: 10}, k},
		{"graph samples STABLEMatrixFree", gs, nil, nil, Settings{Seed: 4}, STABLEMatrixFree{Alpha: 0.05, N: 3, LowerBatch: 10, UpperBatch: 10}, k},
		{"logistic AIDBiO", gl, nil, nil, Settings{Seed: 5}, AIDBiO{Alpha: 0.5, D: 3, N: 4, InnerBatch: 20, HessianBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic ITDBiO", gl, nil, nil, Settings{Seed: 6}, ITDBiO{Alpha: 0.5, D: 4, InnerBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic StocBiO", gl, nil, nil, Settings{Seed: 7}, StocBiO{Alpha: 0.5, Eta: 0.5, D: 3, Q: 4, InnerBatch: 20, HessianBatch: 20, MixedBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic AmIGO", gl, nil, nil, Settings{Seed: 8}, AmIGO{Alpha: 0.5, Eta: 0.5, D: 2, Q: 3, InnerBatch: 20, HessianBatch: 20, MixedBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic SOBA", gl, nil, nil, Settings{Seed: 9}, SOBA{Rho: 0.5, InnerBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic NSBOSGD", gl, nil, nil, Settings{Seed: 10}, NSBOSGD{Gamma: 0.5, HessianBatch: 20, ResidualBatch: 20, GradBatch: 20, MixedBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic STABLEMatrixFree", gl, nil, nil, Settings{Seed: 11}, STABLEMatrixFree{Alpha: 0.05, Beta: 0.5, N: 3, LowerBatch: 20, UpperBatch: 20}, k},
		{"logistic BSA", gl, nil, nil, Settings{Seed: 12}, BSA{Alpha: 0.5, Eta: 0.5, D: 2, N: 4, InnerBatch: 20, HessianBatch: 20, MixedBatch: 20, UpperBatch: 20, Outer: adam}, k},
		{"logistic AiPOD", gl, nil, nil, Settings{Seed: 13}, AiPOD{Alpha: 0.1, Beta: 0.5, Eta: 0.5, S: 2, N: 4, InnerBatch: 20, HessianBatch: 20, UpperBatch: 20}, k},
	}
}

// TestGraphTrajectories is TestTrajectories on compiled graph problems
// (testdata/trajectories_graph.json).
func TestGraphTrajectories(t *testing.T) {
	got := map[string]*trajectory.Run{}
	for _, c := range trajGraphCases(t) {
		got[c.name] = trajRun(t, c)
	}
	// Under other kernels (purego build) the worst run differs by 1.2e-15.
	trajectory.Check(t, "testdata/trajectories_graph.json", got, *updateTrajectories, trajectory.ForKernels(trajTolerances, got, 1e-10))
}
