package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/implicit"
)

// Problem is a compiled bilevel problem: the upper objective f(x, y) over an
// upper-level data set and the lower objective g(x, y) over a lower-level data
// set, with the derivative oracles the solvers need. x has DimX entries and y
// has DimY entries.
//
// A batch is a list of sample indices: into the lower-level data set
// (0 ≤ i < NumLower) for G, GradG, HVP, MixedXY and MixedYX, and into the
// upper-level data set (0 ≤ i < NumUpper) for F and GradF. A nil batch means
// the whole data set. An index may repeat (sampling with replacement).
//
// Destinations come first and must have the length of the space they live
// in. Oracles must not modify x, y, v, u or batch, must not retain them after
// returning, and must be deterministic: the same inputs give the same bits.
// Solvers rely on that for reproducible runs.
type Problem interface {
	// DimX returns the dimension of the upper variable x.
	DimX() int
	// DimY returns the dimension of the lower variable y.
	DimY() int
	// NumLower returns the number of samples of the lower-level data set.
	NumLower() int
	// NumUpper returns the number of samples of the upper-level data set.
	NumUpper() int

	// F returns f(x, y) on the upper-level batch.
	F(x, y []float64, batch []int) float64
	// G returns g(x, y) on the lower-level batch.
	G(x, y []float64, batch []int) float64
	// GradF stores ∇x f in dx and ∇y f in dy; a nil dx or dy is skipped.
	GradF(dx, dy, x, y []float64, batch []int)
	// GradG stores ∇x g in dx and ∇y g in dy; a nil dx or dy is skipped.
	GradG(dx, dy, x, y []float64, batch []int)
	// HVP stores ∇yy g(x, y) v in dst (y-space).
	HVP(dst, x, y, v []float64, batch []int)
	// MixedXY stores ∇xy g(x, y) v in dst (x-space): the x-gradient of
	// ⟨∇y g(x, y), v⟩.
	MixedXY(dst, x, y, v []float64, batch []int)
	// MixedYX stores ∇yx g(x, y) u in dst (y-space): the y-gradient of
	// ⟨∇x g(x, y), u⟩.
	MixedYX(dst, x, y, u []float64, batch []int)
}

// Calls counts oracle calls by kind. Solve keeps a cumulative count in
// State.Calls; the difference of two Records gives one iteration's cost.
type Calls struct {
	F, G         int64 // objective values
	GradF, GradG int64 // gradient calls (one call may fill both dx and dy)
	HVP          int64 // ∇yy g · v
	MixedXY      int64 // ∇xy g · v
	MixedYX      int64 // ∇yx g · u
	Dense        int64 // dense matrices formed by a method (counted by the method itself)
}

// Sub returns c − o, field by field.
func (c Calls) Sub(o Calls) Calls {
	return Calls{
		F: c.F - o.F, G: c.G - o.G,
		GradF: c.GradF - o.GradF, GradG: c.GradG - o.GradG,
		HVP: c.HVP - o.HVP, MixedXY: c.MixedXY - o.MixedXY, MixedYX: c.MixedYX - o.MixedYX,
		Dense: c.Dense - o.Dense,
	}
}

// counter wraps a Problem for Solve: it counts calls into calls, checks the
// sizes of destinations, and remembers the first oracle whose output was not
// finite since the last reset.
type counter struct {
	p     Problem
	calls *Calls
	dx    int
	dy    int
	iter  int
	bad   *NonFiniteError
}

var _ Problem = (*counter)(nil)

func newCounter(p Problem, calls *Calls) *counter {
	return &counter{p: p, calls: calls, dx: p.DimX(), dy: p.DimY(), iter: -1}
}

// reset starts iteration k: the first non-finite oracle output is forgotten.
func (c *counter) reset(k int) { c.iter, c.bad = k, nil }

func (c *counter) DimX() int     { return c.dx }
func (c *counter) DimY() int     { return c.dy }
func (c *counter) NumLower() int { return c.p.NumLower() }
func (c *counter) NumUpper() int { return c.p.NumUpper() }

func (c *counter) F(x, y []float64, batch []int) float64 {
	c.calls.F++
	c.args("F", x, y)
	v := c.p.F(x, y, batch)
	c.scalar("F", c.calls.F, v)
	return v
}

func (c *counter) G(x, y []float64, batch []int) float64 {
	c.calls.G++
	c.args("G", x, y)
	v := c.p.G(x, y, batch)
	c.scalar("G", c.calls.G, v)
	return v
}

func (c *counter) GradF(dx, dy, x, y []float64, batch []int) {
	c.calls.GradF++
	c.args("GradF", x, y)
	c.size("GradF", "dx", dx, c.dx, true)
	c.size("GradF", "dy", dy, c.dy, true)
	c.p.GradF(dx, dy, x, y, batch)
	c.vector("GradF", c.calls.GradF, dx)
	c.vector("GradF", c.calls.GradF, dy)
}

func (c *counter) GradG(dx, dy, x, y []float64, batch []int) {
	c.calls.GradG++
	c.args("GradG", x, y)
	c.size("GradG", "dx", dx, c.dx, true)
	c.size("GradG", "dy", dy, c.dy, true)
	c.p.GradG(dx, dy, x, y, batch)
	c.vector("GradG", c.calls.GradG, dx)
	c.vector("GradG", c.calls.GradG, dy)
}

func (c *counter) HVP(dst, x, y, v []float64, batch []int) {
	c.calls.HVP++
	c.args("HVP", x, y)
	c.size("HVP", "dst", dst, c.dy, false)
	c.size("HVP", "v", v, c.dy, false)
	c.p.HVP(dst, x, y, v, batch)
	c.vector("HVP", c.calls.HVP, dst)
}

// BatchChecker is implemented by problems whose oracles cannot take every
// batch size (graph.Problem, when an objective fixes a sample count):
// CheckBatch reports whether batches of size samples of the upper (or
// lower) level can be evaluated. The methods' Init calls it for each batch
// size they are configured with, so a size the problem cannot take is an
// error before the first iteration, not a panic in an oracle.
type BatchChecker interface {
	CheckBatch(upper bool, size int) error
}

// CheckBatch forwards to the problem's CheckBatch, if it has one.
func (c *counter) CheckBatch(upper bool, size int) error {
	if b, ok := c.p.(BatchChecker); ok {
		return b.CheckBatch(upper, size)
	}
	return nil
}

// HVPAt is the problem's Hessian operator at (x, y) on batch — its
// linearized one when it has one (implicit.Linearizer) — with each product
// counted and checked as HVP does.
func (c *counter) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	c.args("HVP", x, y)
	op := implicit.HVPOperator(c.p, x, y, batch)
	return func(dst, v []float64) {
		c.calls.HVP++
		c.size("HVP", "dst", dst, c.dy, false)
		c.size("HVP", "v", v, c.dy, false)
		op(dst, v)
		c.vector("HVP", c.calls.HVP, dst)
	}
}

func (c *counter) MixedXY(dst, x, y, v []float64, batch []int) {
	c.calls.MixedXY++
	c.args("MixedXY", x, y)
	c.size("MixedXY", "dst", dst, c.dx, false)
	c.size("MixedXY", "v", v, c.dy, false)
	c.p.MixedXY(dst, x, y, v, batch)
	c.vector("MixedXY", c.calls.MixedXY, dst)
}

func (c *counter) MixedYX(dst, x, y, u []float64, batch []int) {
	c.calls.MixedYX++
	c.args("MixedYX", x, y)
	c.size("MixedYX", "dst", dst, c.dy, false)
	c.size("MixedYX", "u", u, c.dx, false)
	c.p.MixedYX(dst, x, y, u, batch)
	c.vector("MixedYX", c.calls.MixedYX, dst)
}

func (c *counter) args(oracle string, x, y []float64) {
	c.size(oracle, "x", x, c.dx, false)
	c.size(oracle, "y", y, c.dy, false)
}

// size panics on a wrongly sized argument: that is a bug in the method.
func (c *counter) size(oracle, arg string, s []float64, n int, nilOK bool) {
	if s == nil && nilOK {
		return
	}
	if len(s) != n {
		panic(fmt.Sprintf("optim: %s called with len(%s) = %d, want %d", oracle, arg, len(s), n))
	}
}

func (c *counter) scalar(oracle string, call int64, v float64) {
	if c.bad == nil && !isFinite(v) {
		c.bad = &NonFiniteError{Iter: c.iter, Oracle: oracle, Call: call, Index: -1, Value: v}
	}
}

func (c *counter) vector(oracle string, call int64, s []float64) {
	if c.bad != nil {
		return
	}
	if i := firstNonFinite(s); i >= 0 {
		c.bad = &NonFiniteError{Iter: c.iter, Oracle: oracle, Call: call, Index: i, Value: s[i]}
	}
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// firstNonFinite returns the index of the first NaN or ±Inf in s, or −1.
func firstNonFinite(s []float64) int {
	for i, v := range s {
		if !isFinite(v) {
			return i
		}
	}
	return -1
}

// NonFiniteError reports that a run produced NaN or ±Inf. Solve returns it
// together with a Result whose State is the last finite state (the state
// before the failing iteration).
type NonFiniteError struct {
	// Iter is the outer iteration k (from 0, as in the paper's
	// x_k → x_{k+1}) during which it happened; −1 means Method.Init.
	Iter int
	// Oracle names the first oracle whose output was not finite during the
	// iteration, "" if every oracle output was finite; Call is that oracle's
	// cumulative call number (from 1).
	Oracle string
	Call   int64
	// Var names the first state variable that is not finite after the
	// iteration ("x", "y", "v" or `Vecs["name"]`), "" if the state is finite.
	Var string
	// Index and Value locate the first bad entry: in the oracle output if
	// Oracle is set (Index −1 for F and G), else in Var.
	Index int
	Value float64
}

func (e *NonFiniteError) Error() string {
	where := fmt.Sprintf("iteration %d", e.Iter)
	if e.Iter < 0 {
		where = "Init"
	}
	msg := "optim: " + where + ":"
	if e.Oracle != "" {
		msg += fmt.Sprintf(" oracle %s (call %d) returned %v", e.Oracle, e.Call, e.Value)
		if e.Index >= 0 {
			msg += fmt.Sprintf(" at index %d", e.Index)
		}
		if e.Var != "" {
			msg += ";"
		}
	}
	if e.Var != "" {
		msg += fmt.Sprintf(" %s is not finite", e.Var)
		if e.Oracle == "" {
			msg += fmt.Sprintf(" (%s[%d] = %v); no oracle output was non-finite, so the update itself overflowed: reduce the step sizes", e.Var, e.Index, e.Value)
		}
	}
	return msg + "; Result.State holds the last finite state"
}
