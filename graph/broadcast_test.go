package graph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRepeatedOperands checks that rows and columns broadcast into an
// elementwise operation are used without a broadcast node, and that the
// operation's value equals the plain loop with the operand repeated, for
// every arithmetic operation and comparison, either operand repeated, at a
// size that splits the work across cores.
func TestRepeatedOperands(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const r, c = 300, 257 // 77 100 elements: above parallelElems
	if r*c < parallelElems {
		t.Fatalf("%d elements do not split", r*c)
	}
	vals := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	full := vals(r * c)
	for _, small := range []struct {
		name  string
		shape []int
		at    func(i, j int) int // index into the small operand of element (i, j)
	}{
		{"row", []int{1, c}, func(i, j int) int { return j }},
		{"column", []int{r, 1}, func(i, j int) int { return i }},
	} {
		sv := vals(sizeOf(small.shape))
		for _, op := range []opKind{opAdd, opSub, opMul, opDiv, opCmp} {
			for _, smallFirst := range []bool{false, true} {
				b := newBuilder()
				x := b.leaf("x", []int{r, c})
				s := b.broadcast(b.leaf("s", small.shape), []int{r, c})
				var n *node
				switch {
				case op == opCmp && smallFirst:
					n = b.cmp(cmpGT, s, x)
				case op == opCmp:
					n = b.cmp(cmpGT, x, s)
				case smallFirst:
					n = b.binary(op, s, x)
				default:
					n = b.binary(op, x, s)
				}
				for _, a := range n.args {
					if a.op == opBroadcast {
						t.Fatalf("%s %v: the broadcast operand was materialized", small.name, op)
					}
				}
				in := [][]float64{full, sv}
				if smallFirst {
					in = [][]float64{sv, full}
				}
				out := make([]float64, r*c)
				eval(n, out, in)
				for i := 0; i < r; i++ {
					for j := 0; j < c; j++ {
						u, v := full[i*c+j], sv[small.at(i, j)]
						if smallFirst {
							u, v = v, u
						}
						want := binOp(n, u, v)
						if got := out[i*c+j]; got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
							t.Fatalf("%s %v (small first %v): out[%d,%d] = %v, want %v", small.name, op, smallFirst, i, j, got, want)
						}
					}
				}
			}
		}
	}
}
