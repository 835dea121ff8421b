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
