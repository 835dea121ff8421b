package optim

import (
	"fmt"
	"math"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/mat"
)

// counter wraps an oracle.Problem for Solve: it counts calls into calls,
// checks the sizes of destinations, and remembers the first oracle whose
// output was not finite since the last reset. Its Capabilities wrap the
// problem's declared optional oracles the same way.
type counter struct {
	p     oracle.Problem
	calls *oracle.Calls
	dx    int
	dy    int
	iter  int
	bad   *NonFiniteError
}

var _ oracle.Problem = (*counter)(nil)

func newCounter(p oracle.Problem, calls *oracle.Calls) *counter {
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
	c.args("HVP", x, y)
	c.hvp(func(dst, v []float64) { c.p.HVP(dst, x, y, v, batch) }, dst, v)
}

// hvp applies one Hessian-vector product by op, counted and checked.
func (c *counter) hvp(op func(dst, v []float64), dst, v []float64) {
	c.calls.HVP++
	c.size("HVP", "dst", dst, c.dy, false)
	c.size("HVP", "v", v, c.dy, false)
	op(dst, v)
	c.vector("HVP", c.calls.HVP, dst)
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

// Capabilities wraps the problem's declared optional oracles: each product
// of the linearized HVP operator is counted and checked as HVP is, the
// dense matrices are checked (the methods count them in Calls.Dense), and
// the oracles at a fixed outer point are counted and checked as the
// oracles they stand for (fixedCounter).
func (c *counter) Capabilities() oracle.Capabilities {
	in := c.p.Capabilities()
	out := oracle.Capabilities{CheckBatch: in.CheckBatch, Err: in.Err}
	if in.FixX != nil {
		out.FixX = func(x []float64, batch []int) oracle.FixedLower {
			c.size("FixX", "x", x, c.dx, false)
			return &fixedCounter{c: c, f: in.FixX(x, batch)}
		}
	}
	if in.HVPAt != nil {
		out.HVPAt = func(x, y []float64, batch []int) func(dst, v []float64) {
			c.args("HVP", x, y)
			op := in.HVPAt(x, y, batch)
			return func(dst, v []float64) { c.hvp(op, dst, v) }
		}
	}
	if in.HessYY != nil {
		out.HessYY = func(dst *mat.SymDense, x, y []float64, batch []int) {
			c.args("HessYY", x, y)
			in.HessYY(dst, x, y, batch)
			c.vector("HessYY", c.calls.Dense, dst.RawSymmetric().Data)
		}
	}
	if in.HessXY != nil {
		out.HessXY = func(dst *mat.Dense, x, y []float64, batch []int) {
			c.args("HessXY", x, y)
			in.HessXY(dst, x, y, batch)
			c.vector("HessXY", c.calls.Dense, dst.RawMatrix().Data)
		}
	}
	return out
}

// fixedCounter counts and checks the oracles at a fixed outer point
// (oracle.FixedLower) as the oracles they stand for: GradG as a GradG, HVP
// as an HVP, and each AddMixedXY as one MixedXY, so that a run counts the
// same calls whether its problem declares FixX or not. MixedXYSum only
// completes the products added before it and counts nothing; its output is
// checked as that of the last MixedXY.
type fixedCounter struct {
	c *counter
	f oracle.FixedLower
}

func (f *fixedCounter) GradG(dx, dy, y []float64) {
	c := f.c
	c.calls.GradG++
	c.size("GradG", "y", y, c.dy, false)
	c.size("GradG", "dx", dx, c.dx, true)
	c.size("GradG", "dy", dy, c.dy, true)
	f.f.GradG(dx, dy, y)
	c.vector("GradG", c.calls.GradG, dx)
	c.vector("GradG", c.calls.GradG, dy)
}

func (f *fixedCounter) HVP(dst, y, v []float64) {
	f.c.size("HVP", "y", y, f.c.dy, false)
	f.c.hvp(func(dst, v []float64) { f.f.HVP(dst, y, v) }, dst, v)
}

func (f *fixedCounter) AddMixedXY(y, v []float64) {
	c := f.c
	c.calls.MixedXY++
	c.size("MixedXY", "y", y, c.dy, false)
	c.size("MixedXY", "v", v, c.dy, false)
	f.f.AddMixedXY(y, v)
}

func (f *fixedCounter) MixedXYSum(dst []float64) {
	c := f.c
	c.size("MixedXY", "dst", dst, c.dx, false)
	f.f.MixedXYSum(dst)
	c.vector("MixedXY", c.calls.MixedXY, dst)
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

// cause returns what the problem reports as the reason its oracles
// failed (oracle.Capabilities.Err), or nil.
func (c *counter) cause() error {
	if err := c.p.Capabilities().Err; err != nil {
		return err()
	}
	return nil
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
// before the failing iteration). When the method reported an error of its
// own for the same iteration (a linear solver's breakdown, say), Solve
// returns an error that wraps both, so errors.As finds either.
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
	// Cause is what the problem reported as the reason its oracles could
	// not be evaluated (oracle.Capabilities.Err: a lost worker, say), or
	// nil; errors.As and errors.Is look through it.
	Cause error
}

// Unwrap returns Cause.
func (e *NonFiniteError) Unwrap() error { return e.Cause }

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
		if e.Oracle == "" && e.Cause == nil {
			msg += fmt.Sprintf(" (%s[%d] = %v); no oracle output was non-finite, so the update itself overflowed: reduce the step sizes", e.Var, e.Index, e.Value)
		}
	}
	if e.Cause != nil {
		msg += fmt.Sprintf(", because the problem's oracles failed: %v", e.Cause)
	}
	return msg + "; Result.State holds the last finite state"
}
