package optim

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// faulty wraps the quadratic test problem and corrupts one oracle's output
// from its call number from on (counted from 1), with value bad.
type faulty struct {
	*quadratic
	oracle string
	from   int
	bad    float64
	calls  map[string]int
}

func (p *faulty) hit(oracle string) bool {
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[oracle]++
	return oracle == p.oracle && p.calls[oracle] >= p.from
}

func (p *faulty) F(x, y []float64, batch []int) float64 {
	v := p.quadratic.F(x, y, batch)
	if p.hit("F") {
		return p.bad
	}
	return v
}

func (p *faulty) HVP(dst, x, y, v []float64, batch []int) {
	p.quadratic.HVP(dst, x, y, v, batch)
	if p.hit("HVP") {
		dst[len(dst)-1] = p.bad
	}
}

// TestGuards: every way a run can meet a non-finite number or a numerical
// breakdown stops it with an error that names the iteration (or Init), the
// oracle and what to change, returns the last finite state, and saves that
// state to the checkpoint path.
func TestGuards(t *testing.T) {
	aid := AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.1}}
	for _, c := range []struct {
		name     string
		p        *faulty
		m        Method
		iter     int // iteration of the failure; −1: Init
		want     []string
		nonFin   bool // a *NonFiniteError
		asTarget any  // errors.As target, if any
	}{
		{"NaN HVP in Init's curvature estimate", &faulty{oracle: "HVP", from: 1, bad: math.NaN()},
			AIDBiO{D: 3, N: 3, Outer: SGD{LR: 0.1}}, -1, []string{"optim: Init: oracle HVP", "NaN"}, true, nil},
		{"Inf HVP inside CG", &faulty{oracle: "HVP", from: 10, bad: math.Inf(1)},
			aid, 2, []string{"iteration 2", "oracle HVP (call 10)", "+Inf", "optim.AIDBiO.Iterate reported", "cg breakdown"}, true, new(*implicit.BreakdownError)},
		{"Inf in the monitored f", &faulty{oracle: "F", from: 4, bad: math.Inf(1)},
			aid, 3, []string{"iteration 3", "oracle F", "+Inf", "monitoring evaluation of f"}, true, nil},
		{"Neumann step too large", &faulty{oracle: "none"},
			StocBiO{Alpha: 0.5, Eta: 1.9, D: 3, Q: 30, Outer: SGD{LR: 0.1}}, 0, []string{"iteration 0", "neumann diverged", "step η = 1.9 is too large"}, false, new(*implicit.DivergenceError)},
	} {
		c.p.quadratic = testProblem(t)
		path := filepath.Join(t.TempDir(), "run.ckpt")
		res, err := Solve(c.p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 10, Checkpoint: CheckpointSettings{Path: path}}, c.m)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
		var nf *NonFiniteError
		if errors.As(err, &nf) != c.nonFin || (c.nonFin && nf.Iter != c.iter) {
			t.Errorf("%s: *NonFiniteError %v (Iter %v), want %t at iteration %d", c.name, errors.As(err, &nf), nf, c.nonFin, c.iter)
		}
		if c.asTarget != nil && !errors.As(err, c.asTarget) {
			t.Errorf("%s: errors.As(%T) fails", c.name, c.asTarget)
		}
		start := max(c.iter, 0)
		if res == nil || res.Status != Failure || res.State.Iter != start {
			t.Fatalf("%s: result %+v, want Failure with the state after %d iterations", c.name, res, start)
		}
		if name, _, _ := res.State.nonFinite(); name != "" {
			t.Errorf("%s: Result.State has a non-finite %s", c.name, name)
		}
		st, err := LoadCheckpoint(path)
		if err != nil || st.Iter != start || !sameBits(st.X, res.State.X) {
			t.Errorf("%s: the checkpoint holds %v (err %v), want the last finite state", c.name, st, err)
		}
	}
}

// linFaulty is faulty with a linearized HVP operator (declared in its
// Capabilities) that counts the operators made.
type linFaulty struct {
	*faulty
	made int
}

func (p *linFaulty) Capabilities() oracle.Capabilities { return oracle.Capabilities{HVPAt: p.HVPAt} }

func (p *linFaulty) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	p.made++
	return func(dst, v []float64) { p.HVP(dst, x, y, v, batch) }
}

// TestGuardsLinearized: AID-BiO takes its CG products from the problem's
// linearized operator, one per iteration, counted and checked like HVP calls:
// an Inf in the tenth product stops the run naming the oracle and the call.
func TestGuardsLinearized(t *testing.T) {
	p := &linFaulty{faulty: &faulty{oracle: "HVP", from: 10, bad: math.Inf(1), quadratic: testProblem(t)}}
	res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 10}, AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.1}})
	if err == nil || !strings.Contains(err.Error(), "oracle HVP (call 10)") || !strings.Contains(err.Error(), "iteration 2") {
		t.Fatalf("error %v, want the Inf of HVP call 10 at iteration 2", err)
	}
	if p.made != 3 {
		t.Errorf("%d linearized operators made in iterations 0–2, want 3", p.made)
	}
	if res.State.Iter != 2 {
		t.Errorf("the last finite state is after %d iterations, want 2", res.State.Iter)
	}
}
