package optim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
)

// lostCall is a failure a problem reports through Capabilities.Err.
type lostCall struct{ oracle string }

func (e *lostCall) Error() string { return "worker lost during " + e.oracle }

// failing is the test quadratic whose oracle named oracle fails from its
// call at on, as a distributed problem's do when a worker is lost: NaN
// outputs (or, with finite, unchanged ones) and the cause in Err.
type failing struct {
	*quadratic
	oracle string
	at, n  int
	finite bool
	err    error
}

func (p *failing) hit(name string) bool {
	if name != p.oracle {
		return p.err != nil
	}
	p.n++
	if p.n >= p.at && p.err == nil {
		p.err = &lostCall{oracle: name}
	}
	return p.err != nil
}

func (p *failing) spoil(v []float64) {
	if p.finite {
		return
	}
	for i := range v {
		v[i] = math.NaN()
	}
}

func (p *failing) GradG(dx, dy, x, y []float64, batch []int) {
	p.quadratic.GradG(dx, dy, x, y, batch)
	if p.hit("GradG") {
		p.spoil(dx)
		p.spoil(dy)
	}
}

func (p *failing) HVP(dst, x, y, v []float64, batch []int) {
	p.quadratic.HVP(dst, x, y, v, batch)
	if p.hit("HVP") {
		p.spoil(dst)
	}
}

func (p *failing) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{Err: func() error { return p.err }}
}

// TestFailedOracleCause: a problem whose calls fail (NaN outputs and a cause
// in Capabilities.Err) stops Solve with a *NonFiniteError naming the
// iteration and the oracle whose Cause is the problem's error, found by
// errors.As; a failure reported with finite outputs stops the run too,
// wrapped with the method and the iteration.
func TestFailedOracleCause(t *testing.T) {
	x0 := []float64{0.4, -0.3, 0.2}
	for _, c := range []struct {
		oracle string
		finite bool
		m      Method
	}{
		{"HVP", false, AIDBiO{Alpha: 0.5, D: 3, N: 3, Outer: SGD{LR: 0.2}}},
		{"GradG", false, StocBiO{Alpha: 0.5, Eta: 0.5, D: 3, Q: 3, Outer: SGD{LR: 0.2}}},
		{"GradG", true, ITDBiO{Alpha: 0.5, D: 3, Outer: SGD{LR: 0.2}}},
	} {
		p := &failing{quadratic: testProblem(t), oracle: c.oracle, at: 10, finite: c.finite}
		res, err := Solve(p, x0, make([]float64, p.DimY()), &Settings{MaxIter: 20}, c.m)
		var lost *lostCall
		if !errors.As(err, &lost) || lost.oracle != c.oracle {
			t.Fatalf("%T, %s fails: Solve returned %v; want an error wrapping the problem's cause", c.m, c.oracle, err)
		}
		if res == nil || res.Status != Failure || res.Iter < 1 {
			t.Fatalf("%T: result %+v; want a failure after at least one iteration", c.m, res)
		}
		var nf *NonFiniteError
		switch {
		case c.finite && errors.As(err, &nf):
			t.Errorf("%T: finite outputs gave a NonFiniteError: %v", c.m, err)
		case c.finite && !strings.Contains(err.Error(), "iteration"):
			t.Errorf("%T: %v does not name the iteration", c.m, err)
		case !c.finite && (!errors.As(err, &nf) || nf.Oracle != c.oracle || nf.Iter != res.Iter || nf.Cause != p.err):
			t.Errorf("%T: %v; want a NonFiniteError in iteration %d naming %s with the cause", c.m, err, res.Iter, c.oracle)
		}
		t.Logf("%T: %v", c.m, err)
	}
}
