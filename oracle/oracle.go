// Package oracle is the vocabulary of bilevel problems: the oracles a
// problem offers, as small interfaces that the hypergradient core
// (implicit, unroll) and the solvers (optim, meta) consume, the optional
// oracles a problem declares in a Capabilities value, and the counter of
// oracle calls.
//
// A bilevel problem is
//
//	min_x Φ(x) = f(x, y*(x)),   y*(x) = argmin_y g(x, y),
//
// with two levels, each an objective over its own data set: the upper level
// f and the lower level g. Its two variables are the outer variable x
// (DimX entries) and the inner variable y (DimY entries). The names follow
// that split everywhere: Upper and Lower qualify an objective, its data set
// and a batch drawn from it (UpperBatch, NumLower); Outer and Inner
// qualify a variable and the loop or optimizer that moves it (an inner
// step, an outer optimizer).
//
// Oracles write to their first arguments and take a batch: sample indices
// into the level's data set (the upper one for F and GradF, the lower one
// for the others), nil meaning the whole data set. They must not modify
// x, y, v, u or batch, must not retain them, and must be deterministic:
// the same inputs give the same bits, which solvers rely on for
// reproducible runs.
//
// Optional oracles are declared, not discovered: a problem's Capabilities
// method returns a Capabilities value whose non-nil fields are the
// optional oracles it has, as gonum/optimize's Problem declares its
// gradient and Hessian by setting them. A wrapper (a counting one, say)
// wraps exactly those, so nothing is found by looking through it.
package oracle

import "gonum.org/v1/gonum/mat"

// Dims gives the dimensions of the outer variable x and the inner
// variable y.
type Dims interface {
	DimX() int
	DimY() int
}

// Samples gives the sizes of the two levels' data sets.
type Samples interface {
	NumLower() int
	NumUpper() int
}

// UpperValue is the upper objective f(x, y) on an upper-level batch.
type UpperValue interface {
	F(x, y []float64, batch []int) float64
}

// LowerValue is the lower objective g(x, y) on a lower-level batch.
type LowerValue interface {
	G(x, y []float64, batch []int) float64
}

// UpperGradient stores ∇x f in dx and ∇y f in dy on an upper-level batch;
// a nil dx or dy is skipped.
type UpperGradient interface {
	GradF(dx, dy, x, y []float64, batch []int)
}

// LowerGradient stores ∇x g in dx and ∇y g in dy on a lower-level batch;
// a nil dx or dy is skipped.
type LowerGradient interface {
	GradG(dx, dy, x, y []float64, batch []int)
}

// Hessian stores the Hessian-vector product ∇yy g(x, y)·v (length DimY)
// in dst, on a lower-level batch.
type Hessian interface {
	HVP(dst, x, y, v []float64, batch []int)
}

// Mixed stores the mixed product ∇xy g(x, y)·v = ∇x⟨∇y g(x, y), v⟩
// (length DimX) in dst, on a lower-level batch.
type Mixed interface {
	MixedXY(dst, x, y, v []float64, batch []int)
}

// MixedTranspose stores ∇yx g(x, y)·u = ∇y⟨∇x g(x, y), u⟩ (length DimY)
// in dst, on a lower-level batch.
type MixedTranspose interface {
	MixedYX(dst, x, y, u []float64, batch []int)
}

// Declarer declares a problem's optional oracles.
type Declarer interface {
	Capabilities() Capabilities
}

// Capabilities are a problem's optional oracles: a nil field is an oracle
// the problem does not have, and its consumers then do without it.
type Capabilities struct {
	// HVPAt returns the operator v ↦ ∇yy g(x, y)·v at a fixed (x, y) and
	// lower-level batch, sharing across products the work that does not
	// depend on v (graph.Problem linearizes its program). It keeps x, y and
	// batch, which must not change while the operator is in use. It gives
	// the bits of HVP up to rounding, so solvers that use it where it
	// exists are reproducible only for one problem type.
	HVPAt func(x, y []float64, batch []int) func(dst, v []float64)
	// HessYY stores ∇yy g(x, y) (DimY × DimY) in dst; HessXY stores
	// ∇xy g(x, y) (DimX × DimY, column j the mixed product of e_j) in dst.
	// The methods that work with explicit matrices use them and assemble
	// the matrices from products without them.
	HessYY func(dst *mat.SymDense, x, y []float64, batch []int)
	HessXY func(dst *mat.Dense, x, y []float64, batch []int)
	// CheckBatch reports whether the upper (or lower) level's oracles can
	// take batches of size samples. Solvers call it for each batch size
	// they are configured with, so that a size the problem cannot take is
	// an error before the first iteration, not a panic in an oracle.
	CheckBatch func(upper bool, size int) error
	// FixX returns the lower level's oracles at a fixed outer point x and
	// lower-level batch, for many inner points: the work that depends on
	// x and the data alone (a representation layer) is done once, and
	// mixed products are summed where that part's output meets the rest,
	// so that a sum of T of them goes back through it once. It keeps
	// copies of x and batch. Its GradG and HVP equal GradG and HVP up to
	// rounding (graph.Problem: their bits, unless the data are large
	// enough for its programs to run by blocks of rows), and a sum of
	// mixed products equals the sum of MixedXY products up to rounding.
	// package unroll's sweep uses it.
	FixX func(x []float64, batch []int) FixedLower
	// Err reports why the problem's oracles could not be evaluated, or
	// nil. The oracles have no error return: a problem whose calls can
	// fail (one on other machines, whose worker is lost) makes the
	// outputs of a failed call NaN and keeps the cause for Err. A solver
	// that stops at a non-finite value consults it and returns the cause
	// wrapped in its own error (errors.As finds it), naming the iteration
	// and the oracle.
	Err func() error
}

// FixedLower is the lower level's oracles at the outer point and batch
// they were fixed at (Capabilities.FixX), for many inner points y.
// AddMixedXY adds ∇xy g(x, y)·v to a running sum of mixed products, and
// MixedXYSum writes that sum (length DimX) to dst and starts a new one. A
// wrapper that counts calls counts GradG, HVP and each AddMixedXY as one
// call of the oracle each stands for (Calls.GradG, HVP, MixedXY), and
// MixedXYSum, which completes the products already added, as none.
type FixedLower interface {
	GradG(dx, dy, y []float64)
	HVP(dst, y, v []float64)
	AddMixedXY(y, v []float64)
	MixedXYSum(dst []float64)
}

// Implicit is the oracle set of an implicit (AID) hypergradient:
// ∇x f − ∇xy g·v with ∇yy g·v = ∇y f.
type Implicit interface {
	UpperGradient
	Hessian
	Mixed
	Declarer
}

// Unrolled is the oracle set of an unrolled (ITD) hypergradient: the inner
// steps' ∇y g and the reverse sweep's ∇f, Hessian and mixed products.
type Unrolled interface {
	LowerGradient
	UpperGradient
	Hessian
	Mixed
}

// Problem is a compiled bilevel problem with every oracle the solvers of
// package optim use; *graph.Problem implements it.
type Problem interface {
	Dims
	Samples
	UpperValue
	LowerValue
	UpperGradient
	LowerGradient
	Hessian
	Mixed
	MixedTranspose
	Declarer
}

// Calls counts oracle calls by kind, one field per oracle, under the
// oracle's name. Dense counts the dense matrices a method forms, through
// HessYY and HessXY or from products.
type Calls struct {
	F, G         int64
	GradF, GradG int64
	HVP          int64
	MixedXY      int64
	MixedYX      int64
	Dense        int64
}

// Add returns c + o, field by field.
func (c Calls) Add(o Calls) Calls {
	return Calls{
		F: c.F + o.F, G: c.G + o.G,
		GradF: c.GradF + o.GradF, GradG: c.GradG + o.GradG,
		HVP: c.HVP + o.HVP, MixedXY: c.MixedXY + o.MixedXY, MixedYX: c.MixedYX + o.MixedYX,
		Dense: c.Dense + o.Dense,
	}
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

// Products returns the number of derivative oracle calls (gradients,
// Hessian-vector and mixed products; objective values and dense matrices
// excluded).
func (c Calls) Products() int64 { return c.GradF + c.GradG + c.HVP + c.MixedXY + c.MixedYX }
