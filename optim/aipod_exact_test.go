package optim

import (
	"testing"

	"gonum.org/v1/gonum/floats"
)

// TestAiPODExactInverse: with ExactInverse, AiPOD's estimate from
// y = y*(x) with full batches is the closed-form ∇Φ(x) to 1e-10 on the
// constrained quadratic, uncoupled and coupled, in at most 3 CG steps (the
// dimension of the null space of C) and as many implicit rounds. On a lower
// level with ∇yy g = I (paper 004's synthetic problem) one CG step gives
// the exact estimate, while eq. 9b with η = 1/L = 1 and N = 10 takes, to
// 1e-10, only two values over 200 seeds: the exact one with v scaled by N
// (N' = 0, about 1 in 10) and the one with the implicit term dropped (every
// factor P − ηPIP is 0).
func TestAiPODExactInverse(t *testing.T) {
	x := []float64{0.3, -1.2, 0.7}
	for _, coupled := range []bool{false, true} {
		p := newEqQuadratic(t, testProblem(t), coupled)
		y := p.yStar(x)
		m := AiPOD{Alpha: 1, Beta: 0.5, Eta: 1, S: 2, Series: ExactInverse, Lower: p.lower} // Eta set: no curvature estimate
		res, err := Solve(p, x, y, &Settings{MaxIter: 1, EvalEvery: -1}, m)
		if err != nil {
			t.Fatal(err)
		}
		got := append([]float64(nil), x...)
		floats.Sub(got, res.X)
		if d := floats.Distance(got, p.hypergrad(x), 2); d > 1e-10 {
			t.Errorf("coupled=%v: ‖h_f − ∇Φ‖ = %.3g", coupled, d)
		}
		extra := int64(0)
		if coupled {
			extra = 1 // the coupling term's HVP
		}
		if cg, r := res.Calls.HVP-extra, RoundsOf(res.State).Implicit; cg < 1 || cg > 3 || r != cg+1 {
			t.Errorf("coupled=%v: %d CG steps and %d implicit rounds, want 1..3 steps and one round more", coupled, cg, r)
		}
	}

	id := newEqQuadratic(t, newQuadratic(t, 3, 5, 1, 1, 0, 1, 1, 0.5, 1), false) // ∇yy g = I
	y := id.yStar(x)
	want := id.hypergrad(x)
	m := AiPOD{Beta: 0.5, S: 2, Series: ExactInverse, Lower: id.lower}
	if d := floats.Distance(aipodEstimate(t, id, m, x, y, 0), want, 2); d > 1e-12 {
		t.Errorf("∇yy g = I: exact-inverse estimate is %.3g from ∇Φ", d)
	}
	m.Series = NeumannRandomTerm // η = 1/L = 1 (the default), N = 10
	// ∇x f = μx here; the estimate with v scaled by N is μx + N(∇Φ − μx).
	drop := []float64{0.5 * x[0], 0.5 * x[1], 0.5 * x[2]}
	scaled := append([]float64(nil), want...)
	floats.Sub(scaled, drop)
	floats.Scale(10, scaled)
	floats.Add(scaled, drop)
	var nScaled int
	for seed := range uint64(200) {
		h := aipodEstimate(t, id, m, x, y, seed)
		switch {
		case floats.Distance(h, scaled, 2) < 1e-10:
			nScaled++
		case floats.Distance(h, drop, 2) > 1e-10:
			t.Fatalf("seed %d: eq. 9b with ∇yy g = I gave %v, neither N·(exact) %v nor the implicit term dropped %v", seed, h, scaled, drop)
		}
	}
	if nScaled < 5 || nScaled > 40 {
		t.Errorf("eq. 9b with ∇yy g = I: %d of 200 estimates were N·(exact), want about 20 (N' = 0 with probability 1/10)", nScaled)
	}
	t.Logf("eq. 9b: %d of 200 estimates N·(exact), the others with the implicit term dropped", nScaled)
}
