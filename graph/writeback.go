package graph

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// WriteBack sets the values of the user's variable nodes to x and y,
// flat vectors laid out as OuterVars and InnerVars describe (the layout
// of every oracle), so that the user can go on with gorgonia: a
// TapeMachine run of the objectives, or of any other expression on the
// variables, after WriteBack computes with x and y. Each node gets a new
// value of its shape by gorgonia.Let, gorgonia's way of feeding an input
// node; the tensors the nodes held before are left as they were. A nil x
// or y leaves that level's nodes alone.
//
// The Problem itself is unchanged: it compiled the objectives with the
// values the variables had at Compile, which X0 and Y0 still return.
// A vector of the wrong length or an element that is not finite is an
// error naming the element, returned before any node is changed.
func (p *Problem) WriteBack(x, y []float64) error {
	levels := []struct {
		outer      bool
		name, what string
		vals       []float64
		dim        int
		vars       []Var
		nodes      []*G.Node
	}{{true, "x", "outer", x, p.dimX, p.outer, p.outerNodes}, {false, "y", "inner", y, p.dimY, p.inner, p.innerNodes}}
	for _, l := range levels {
		if l.vals == nil {
			continue
		}
		if len(l.vals) != l.dim {
			return fmt.Errorf("graph: WriteBack: %s has length %d; the problem's %s variables hold %d values", l.name, len(l.vals), l.what, l.dim)
		}
		for i, v := range l.vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("graph: WriteBack: %s[%d] = %v is not finite; it would be written to %s", l.name, i, v, p.ElementName(l.outer, i))
			}
		}
	}
	for _, l := range levels {
		if l.vals == nil {
			continue
		}
		for i, n := range l.nodes {
			v := l.vars[i]
			vals := append([]float64{}, l.vals[v.Offset:v.Offset+v.Size]...)
			var value G.Value
			if n.Shape().IsScalar() {
				value = G.NewF64(vals[0])
			} else {
				value = tensor.New(tensor.WithShape(n.Shape().Clone()...), tensor.WithBacking(vals))
			}
			if err := G.Let(n, value); err != nil {
				return fmt.Errorf("graph: WriteBack to %s: %w", nodeName(n), err)
			}
		}
	}
	return nil
}
