package meta

import (
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/oracle"
)

// fixedOracles adapts one task's oracles at a fixed outer point, a
// *graph.FixedX, to the oracle interfaces of unroll and implicit, whose
// methods also take x and a batch: it ignores both, so the outer point and
// the batches are those the oracles were fixed at (graph.Problem.FixX).
// Pass FixedX.X() as x.
type fixedOracles struct{ *graph.FixedX }

var (
	_ oracle.Unrolled = fixedOracles{}
	_ oracle.Implicit = fixedOracles{}
)

func (f fixedOracles) GradF(dx, dy, _, y []float64, _ []int) { f.FixedX.GradF(dx, dy, y) }
func (f fixedOracles) GradG(dx, dy, _, y []float64, _ []int) { f.FixedX.GradG(dx, dy, y) }
func (f fixedOracles) HVP(dst, _, y, v []float64, _ []int)   { f.FixedX.HVP(dst, y, v) }
func (f fixedOracles) MixedXY(dst, _, y, v []float64, _ []int) {
	f.FixedX.MixedXY(dst, y, v)
}

// Capabilities declares no optional oracle: the FixedX's programs already
// share the work that depends on x only, and its HVP is the one every
// product uses.
func (fixedOracles) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// initOracles adapts one MAML task's oracles on models.CNNInit at
// x = θ_0 to unroll's sweep with the outer point hidden: X() is empty, so
// the sweep computes no mixed products — here ∇xy g = ∇yy g, so they would
// repeat its HVPs — and MAML's meta-gradient is the sweep's first adjoint
// a_0 = d f/dδ_0 = d f/dθ_0 (unroll.Unroller.Backward's dy0).
type initOracles struct{ *graph.FixedX }

var _ oracle.Unrolled = initOracles{}

// X returns the empty outer point the sweep sees.
func (initOracles) X() []float64 { return nil }

func (f initOracles) GradF(_, dy, _, y []float64, _ []int) { f.FixedX.GradF(nil, dy, y) }
func (f initOracles) GradG(_, dy, _, y []float64, _ []int) { f.FixedX.GradG(nil, dy, y) }
func (f initOracles) HVP(dst, _, y, v []float64, _ []int)  { f.FixedX.HVP(dst, y, v) }

// MixedXY writes nothing: the hidden outer point has no entries.
func (initOracles) MixedXY(_, _, _, _ []float64, _ []int) {}

// Capabilities declares no optional oracle.
func (initOracles) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }
