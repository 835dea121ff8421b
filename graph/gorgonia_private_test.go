package graph

import (
	"reflect"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// privateProbes builds, for every type privateFields lists, a value of it
// with gorgonia's exported constructors, and says what each field must
// read back as.
func privateProbes(t *testing.T) map[string]struct {
	v    any
	want map[string]any
} {
	t.Helper()
	g := G.NewGraph()
	m := G.NewMatrix(g, G.Float64, G.WithShape(2, 3), G.WithName("m"), G.WithInit(G.Zeroes()))
	sq := G.NewMatrix(g, G.Float64, G.WithShape(3, 3), G.WithName("sq"), G.WithInit(G.Zeroes()))
	img := G.NewTensor(g, G.Float64, 4, G.WithShape(1, 2, 5, 5), G.WithName("img"), G.WithInit(G.Zeroes()))
	op := func(n *G.Node, err error) G.Op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n.Op()
	}
	sub := G.Must(G.Sub(m, m))
	type probe = struct {
		v    any
		want map[string]any
	}
	broadcast := G.Must(G.BroadcastAdd(m, G.Must(G.Sum(m, 0)), nil, []byte{0}))
	var repeat G.Op
	for _, c := range nodeArgs(broadcast) {
		if typeName(c.Op()) == "repeatOp" {
			repeat = c.Op()
		}
	}
	if repeat == nil {
		t.Fatal("BroadcastAdd built no repeatOp")
	}
	return map[string]probe{
		"Node":        {sub, map[string]any{"children": G.Nodes{m, m}}},
		"linAlgBinOp": {op(G.Mul(sq, sq)), map[string]any{"āBinaryOperator": "matmul", "transA": false, "transB": false}},
		"sumOp":       {op(G.Sum(m, 1)), map[string]any{"along": []int{1}}},
		"maxOp":       {op(G.Max(m, 0)), map[string]any{"along": []int{0}}},
		"transposeOp": {op(G.Transpose(m)), map[string]any{"pattern": []int{1, 0}}},
		"sizeOp":      {op(G.SizeOf(1, m)), map[string]any{"axis": 1}},
		"repeatOp":    {repeat, map[string]any{"along": 0}},
		"concatOp":    {op(G.Concat(1, m, m)), map[string]any{"axis": 1}},
		"sliceOp":     {op(G.Slice(m, nil, G.S(1, 3))), map[string]any{"along": 1}},
		"softmaxOp":   {op(G.LogSoftMax(m, 0)), map[string]any{"axis": 0, "isLog": true}},
		"im2colOp": {op(G.Im2Col(img, tensor.Shape{3, 2}, tensor.Shape{1, 0}, tensor.Shape{2, 1}, tensor.Shape{1, 2})),
			map[string]any{"h": 3, "w": 2, "padH": 1, "padW": 0, "strideH": 2, "strideW": 1, "dilationH": 1, "dilationW": 2}},
		"maxPoolOp": {op(G.MaxPool2D(img, tensor.Shape{2, 3}, []int{0, 1, 2, 3}, []int{2, 1})),
			map[string]any{"h": 2, "w": 3, "padNorth": 0, "padSouth": 1, "padWest": 2, "padEast": 3,
				"explicitPadding": true, "strideH": 2, "strideW": 1}},
	}
}

// TestGorgoniaPrivate reads every private field graph/ reads from a value
// gorgonia's constructors built, and checks what it reads: it fails,
// naming the field, as soon as a gorgonia version differs from v0.9.18 in
// any of them.
func TestGorgoniaPrivate(t *testing.T) {
	probes := privateProbes(t)
	for kind, fields := range privateFields {
		p, ok := probes[kind]
		if !ok {
			t.Errorf("no probe builds gorgonia's %s", kind)
			continue
		}
		if got := typeName(p.v); got != kind {
			t.Errorf("the probe for %s builds a %s", kind, got)
			continue
		}
		for name := range fields {
			want, ok := p.want[name]
			if !ok {
				t.Errorf("%s: the probe does not say what field %s holds", kind, name)
				continue
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s.%s: %v", kind, name, r)
					}
				}()
				var got any
				switch want.(type) {
				case int:
					got = privateInt(p.v, name)
				case bool:
					got = privateBool(p.v, name)
				case []int:
					got = privateInts(p.v, name)
				case string: // an operator, read as the product it names
					got = linAlgKind(p.v.(G.Op))
				case G.Nodes:
					got = G.Nodes(nodeArgs(p.v.(*G.Node)))
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s.%s reads %v, want %v", kind, name, got, want)
				}
			}()
		}
	}
	kinds, err := linAlgKinds()
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 5 {
		t.Errorf("gorgonia's products map to %d operators, want 5: %v", len(kinds), kinds)
	}
	if s := sliceOf(probes["sliceOp"].v.(G.Op)); s == nil || s.Start() != 1 || s.End() != 3 {
		t.Errorf("sliceOp's slice reads %v, want [1:3]", s)
	}
}

// TestPrivateUnlisted checks that reading a field privateFields does not
// list is refused, so that every read is in the table the test above
// walks.
func TestPrivateUnlisted(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("an unlisted private field was read")
		}
	}()
	g := G.NewGraph()
	m := G.NewMatrix(g, G.Float64, G.WithShape(2, 3), G.WithName("m"), G.WithInit(G.Zeroes()))
	privateInt(G.Must(G.Sum(m, 1)).Op(), "d")
}
