package unroll

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gobilevel/bilevel/oracle"
)

// Unroller runs T steps of an inner optimizer on g(x, ·) from y_0, stores
// the iterates, and differentiates f(x, y_T(x)) with respect to x by a
// reverse sweep over them. Configure the exported fields, then call
// Hypergradient, or Forward and Backward. The zero value is not usable:
// Alpha must be positive.
//
// An Unroller keeps the iterates of its last Forward and reuses its storage
// across calls, so it must not be used by several goroutines at once.
type Unroller struct {
	// Steps is T ≥ 0, the number of inner steps.
	Steps int
	// Alpha is the inner step size α > 0.
	Alpha float64
	// Momentum is the heavy-ball coefficient β ∈ [0, 1); zero means plain
	// gradient descent.
	Momentum float64
	// Truncate is K, the number of final steps the reverse sweep
	// differentiates through (truncated back-propagation): y_{T−K} and the
	// iterates before it are treated as independent of x. Zero, or K ≥ T,
	// means all T steps. Only the last K+1 iterates are stored.
	Truncate int
	// Batch, when non-nil, returns the lower-level samples for step t
	// (t = 0, …, T−1), called once per step by Forward. The reverse sweep
	// reuses the returned slices, so their contents must not change until
	// the last Backward of this forward pass. Nil means the full data set.
	Batch func(t int) []int

	// State of the last Forward.
	x       []float64 // copy of x
	ring    []float64 // (K'+1)·d_y floats: iterate t lives in slot t mod (K'+1)
	batches [][]int   // batch of step t at index t mod K'
	// fixed holds the oracles at x and the batch of step t at index
	// t mod K', nil where the problem does not declare FixX or the batch
	// is not the one of a neighbouring step (see Forward).
	fixed   []oracle.FixedLower
	slots   int     // K'+1
	alpha   float64 // α and β of the forward pass
	beta    float64
	n, done int          // d_y; steps run by the last Forward (T), −1 after a failed one
	adj     [3][]float64 // adjoints a_t, a_{t+1}, a_{t+2}
	hv, mx  []float64    // HVP (d_y) and mixed-product (d_x) scratch
}

// Result reports an unrolled hypergradient.
type Result struct {
	// Steps is the number of inner steps T, and Backprop the number of them
	// the reverse sweep differentiated through.
	Steps, Backprop int
	// Calls counts the oracle calls: Steps GradG in the forward pass, then
	// in the reverse sweep one GradF, Backprop−1 HVPs (Backprop when the
	// sweep returns the first adjoint) and Backprop mixed products.
	Calls oracle.Calls
	// StorageBytes is the memory held for iterates: (Backprop+1)·d_y·8.
	StorageBytes int
}

// NonFiniteError reports a NaN or infinity in the forward iterates or in the
// result of the reverse sweep, typically because α is too large for the
// curvature of g.
type NonFiniteError struct {
	Phase string // "forward" or "reverse"
	Step  int    // forward: the iterate index t; reverse: the first differentiated step T−K'
}

func (e *NonFiniteError) Error() string {
	if e.Phase == "forward" {
		return fmt.Sprintf("unroll: inner iterate y_%d is not finite: the step size α is too large for g (need α·λmax(∇yy g) < 2(1+β)) or g is not bounded below", e.Step)
	}
	return fmt.Sprintf("unroll: the reverse sweep down to step %d produced a non-finite derivative", e.Step)
}

// ErrNoForward is returned by Backward before any successful Forward.
var ErrNoForward = errors.New("unroll: Backward called without a successful Forward")

func (u *Unroller) validate() error {
	switch {
	case u.Steps < 0:
		return fmt.Errorf("unroll: Steps = %d < 0", u.Steps)
	case !(u.Alpha > 0) || math.IsInf(u.Alpha, 0):
		return fmt.Errorf("unroll: step size Alpha = %v must be positive and finite", u.Alpha)
	case !(u.Momentum >= 0 && u.Momentum < 1):
		return fmt.Errorf("unroll: Momentum = %v must lie in [0, 1)", u.Momentum)
	case u.Truncate < 0:
		return fmt.Errorf("unroll: Truncate = %d < 0", u.Truncate)
	}
	return nil
}

// backprop returns K', the number of steps the reverse sweep covers.
func (u *Unroller) backprop() int {
	if u.Truncate == 0 || u.Truncate > u.Steps {
		return u.Steps
	}
	return u.Truncate
}

// slot returns the stored iterate y_t; valid for the last K'+1 indices.
func (u *Unroller) slot(t int) []float64 {
	i := t % u.slots
	return u.ring[i*u.n : (i+1)*u.n]
}

func resize(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float64, n)
}

// Forward runs the inner optimizer for Steps steps from y0,
//
//	y_{t+1} = y_t − α·∇y g(x, y_t; B_t) + β·(y_t − y_{t−1}),   y_{−1} = y_0,
//
// and stores the last K'+1 iterates (K' = Truncate, or Steps when zero).
// Storage is reused across calls with the same sizes. It returns a
// *NonFiniteError naming the first non-finite iterate.
//
// When p declares oracles at a fixed outer point (an oracle.Declarer whose
// Capabilities have FixX), the steps of a run of equal batches (every
// step, when Batch is nil) use them: the part of g that depends on x and
// the data alone is evaluated once for the run, and the reverse sweep
// sums the run's mixed products where that part's output meets the rest
// and goes back through it once (oracle.FixedLower).
func (u *Unroller) Forward(p oracle.LowerGradient, x, y0 []float64) error {
	if err := u.validate(); err != nil {
		return err
	}
	u.done = -1
	n, k := len(y0), u.backprop()
	u.n, u.slots = n, k+1
	u.ring = resize(u.ring, u.slots*n)
	u.hv = resize(u.hv, n) // the forward pass keeps ∇y g here
	u.x = append(u.x[:0], x...)
	if cap(u.batches) >= k {
		u.batches, u.fixed = u.batches[:k], u.fixed[:k]
	} else {
		u.batches, u.fixed = make([][]int, k), make([]oracle.FixedLower, k)
	}
	clear(u.fixed)
	u.alpha, u.beta = u.Alpha, u.Momentum
	copy(u.slot(0), y0)
	fixX := fixer(p)
	var fx oracle.FixedLower // the oracles of this run of equal batches
	var grad oracle.LowerGradient = p
	var last []int
	for t := 0; t < u.Steps; t++ {
		var batch []int
		if u.Batch != nil {
			batch = u.Batch(t)
		}
		switch same := u.Batch == nil || t > 0 && slices.Equal(batch, last); {
		case !same:
			fx, grad = nil, p
		case fixX != nil && fx == nil:
			fx = fixX(u.x, batch)
			grad = fixedGrad{fx}
			if t > 0 && k > 0 {
				u.fixed[(t-1)%k] = fx // the run began at step t−1
			}
		}
		last = batch
		if k > 0 {
			u.batches[t%k], u.fixed[t%k] = batch, fx
		}
		prev := u.slot(t) // y_{−1} = y_0
		if t > 0 {
			prev = u.slot(t - 1)
		}
		// next may share memory with prev when only two slots are kept;
		// step reads each element of prev before it writes that of next.
		if err := step(grad, u.x, u.slot(t), prev, u.slot(t+1), u.hv, u.alpha, u.beta, batch, t); err != nil {
			return err
		}
	}
	u.done = u.Steps
	return nil
}

// fixer returns the oracles at a fixed outer point that p declares, or nil.
func fixer(p oracle.LowerGradient) func(x []float64, batch []int) oracle.FixedLower {
	if d, ok := p.(oracle.Declarer); ok {
		return d.Capabilities().FixX
	}
	return nil
}

// fixedGrad is the gradient of oracles fixed at x and a batch, which it
// ignores.
type fixedGrad struct{ fx oracle.FixedLower }

func (f fixedGrad) GradG(dx, dy, _, y []float64, _ []int) { f.fx.GradG(dx, dy, y) }

// step writes y_{t+1} = y_t − α·∇y g(x, y_t; batch) + β·(y_t − y_{t−1}) to
// next (which may be yt or prev), with g scratch for ∇y g, and checks that
// it is finite. With β = 0 it computes y_t − α·∇y g exactly, with no
// momentum term.
func step(p oracle.LowerGradient, x, yt, prev, next, g []float64, alpha, beta float64, batch []int, t int) error {
	p.GradG(nil, g, x, yt, batch)
	var sum float64
	if beta == 0 {
		for i, yi := range yt {
			next[i] = yi - alpha*g[i]
			sum += next[i]
		}
	} else {
		for i, yi := range yt {
			next[i] = yi - alpha*g[i] + beta*(yi-prev[i])
			sum += next[i]
		}
	}
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return &NonFiniteError{Phase: "forward", Step: t + 1}
	}
	return nil
}

// Descend runs steps steps of gradient descent on g(x, ·) in place,
//
//	y ← y − α·∇y g(x, y; batch(t)),   t = 0, …, steps−1,
//
// without storing the iterates: the inner loop of the AID methods and of a
// head fit at evaluation, the forward pass of Forward without momentum.
// batch may be nil (the full data set at every step); g is scratch of
// length d_y (nil: allocated). It returns a *NonFiniteError naming the
// first non-finite iterate, with y left at it.
func Descend(p oracle.LowerGradient, x, y []float64, steps int, alpha float64, batch func(t int) []int, g []float64) error {
	if g == nil {
		g = make([]float64, len(y))
	}
	for t := range steps {
		var b []int
		if batch != nil {
			b = batch(t)
		}
		if err := step(p, x, y, y, y, g, alpha, 0, b, t); err != nil {
			return err
		}
	}
	return nil
}

// Final returns y_T of the last Forward, for example to warm-start the next
// inner loop. The slice aliases internal storage: copy it before the next
// Forward.
func (u *Unroller) Final() []float64 {
	if u.done < 0 || u.ring == nil {
		return nil
	}
	return u.slot(u.done)
}

// Backward writes to dst (length d_x) the derivative d f(x, y_T(x))/dx of
// the map unrolled by the last Forward, truncated to its last K' steps, on
// the upper-level samples upperBatch; when dy0 is not nil it also writes
// to it the first adjoint of the sweep, a_{T−K'} = d f(x, y_T)/d y_{T−K'}
// (with K' = T the gradient with respect to y_0, ANIL's gradient for the
// head initialization, where a_0 = (I − α∇yy g)·a_1 − β·a_2 because
// y_{−1} = y_0), at the cost of one more HVP. p must be the problem
// of the Forward call. Backward allocates nothing once its scratch has
// grown, and may be called again (for another batch) without a new
// Forward.
//
// The sweep follows the adjoint recursion documented in the package comment:
// a_T = ∇y f, a_{T+1} = 0,
//
//	dst = ∇x f − α·Σ_{t=T−K'}^{T−1} ∇x∇y g(x, y_t)·a_{t+1}
//	a_t = (1+β)·a_{t+1} − α·∇yy g(x, y_t)·a_{t+1} − β·a_{t+2}.
func (u *Unroller) Backward(dst, dy0 []float64, p oracle.Unrolled, upperBatch []int) (Result, error) {
	if u.done < 0 || u.ring == nil {
		return Result{}, ErrNoForward
	}
	if len(dst) != len(u.x) {
		panic(fmt.Sprintf("unroll: Backward: len(dst) = %d, len(x) = %d", len(dst), len(u.x)))
	}
	if dy0 != nil && len(dy0) != u.n {
		panic(fmt.Sprintf("unroll: Backward: len(dy0) = %d, len(y) = %d", len(dy0), u.n))
	}
	n, T, k := u.n, u.done, u.slots-1
	alpha, beta := u.alpha, u.beta
	for i := range u.adj {
		u.adj[i] = resize(u.adj[i], n)
	}
	u.hv = resize(u.hv, n)
	u.mx = resize(u.mx, len(u.x))
	res := Result{Steps: T, Backprop: k, Calls: oracle.Calls{GradG: int64(T), GradF: 1}, StorageBytes: u.slots * n * 8}

	// cur = a_{t+1}, next = a_{t+2}, out receives a_t.
	cur, next, out := u.adj[0], u.adj[1], u.adj[2]
	p.GradF(dst, cur, u.x, u.slot(T), upperBatch)
	clear(next)
	// sum holds the mixed products of the steps since the last flush, all
	// at its oracles: those of a run of equal batches are summed and then
	// subtracted at once.
	var sum oracle.FixedLower
	flush := func() {
		if sum != nil {
			sum.MixedXYSum(u.mx)
			u.subMixed(dst, alpha)
			sum = nil
		}
	}
	for t := T - 1; t >= T-k; t-- {
		yt, batch, fx := u.slot(t), u.batches[t%k], u.fixed[t%k]
		if fx != sum {
			flush()
		}
		if fx != nil {
			fx.AddMixedXY(yt, cur)
			sum = fx
		} else {
			p.MixedXY(u.mx, u.x, yt, cur, batch)
			u.subMixed(dst, alpha)
		}
		res.Calls.MixedXY++
		if t == T-k && dy0 == nil {
			break // a_t is not needed: earlier steps are not differentiated
		}
		if fx != nil {
			fx.HVP(u.hv, yt, cur)
		} else {
			p.HVP(u.hv, u.x, yt, cur, batch)
		}
		res.Calls.HVP++
		if beta == 0 {
			for i := range out {
				out[i] = cur[i] - alpha*u.hv[i]
			}
		} else {
			c := 1 + beta
			if t == 0 {
				c = 1 // y_{−1} = y_0: the momentum of step 0 does not depend on y_0
			}
			for i := range out {
				out[i] = c*cur[i] - alpha*u.hv[i] - beta*next[i]
			}
		}
		cur, next, out = out, cur, next
	}
	flush()
	if dy0 != nil {
		copy(dy0, cur)
	}
	if !finite(dst) || (dy0 != nil && !finite(dy0)) {
		return res, &NonFiniteError{Phase: "reverse", Step: T - k}
	}
	return res, nil
}

// subMixed subtracts α times the mixed product in u.mx from dst.
func (u *Unroller) subMixed(dst []float64, alpha float64) {
	for i := range dst {
		dst[i] -= alpha * u.mx[i]
	}
}

// finite reports whether every entry of v is finite.
func finite(v []float64) bool {
	for _, d := range v {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return false
		}
	}
	return true
}

// Hypergradient runs Forward from y0 and then Backward on the upper-level
// samples upperBatch: dst receives d f(x, y_T(x))/dx, the ITD estimate of
// ∇Φ(x), and the Result holds the oracle counts. Final then returns y_T.
func (u *Unroller) Hypergradient(dst []float64, p oracle.Unrolled, x, y0 []float64, upperBatch []int) (Result, error) {
	if len(dst) != len(x) {
		panic(fmt.Sprintf("unroll: Hypergradient: len(dst) = %d, len(x) = %d", len(dst), len(x)))
	}
	if err := u.Forward(p, x, y0); err != nil {
		return Result{Steps: u.Steps}, err
	}
	return u.Backward(dst, nil, p, upperBatch)
}
