package graph

import (
	"fmt"
	"reflect"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGorgoniaPrivate builds every kind of gorgonia operation whose
// private fields graph/ reads with gorgonia's own constructors, reads its
// parameters through gorgonia_private.go and checks them against the
// values given to the constructor: it fails, naming the field, as soon as
// a gorgonia version differs from v0.9.18 in any of them. It also checks
// that every type privateFields lists is read here.
func TestGorgoniaPrivate(t *testing.T) {
	read := map[string]bool{}
	for _, c := range privateCases(t) {
		if got := typeName(c.op); got != c.kind {
			t.Errorf("the case for %s builds a %s", c.kind, got)
			continue
		}
		read[c.kind] = true
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v", c.kind, r)
				}
			}()
			if got, want := c.got(c.op), c.want(c.op); !reflect.DeepEqual(got, want) {
				t.Errorf("%s reads %v, want %v", c.kind, got, want)
			}
		}()
	}
	for kind := range privateFields {
		if !read[kind] {
			t.Errorf("no case reads gorgonia's %s", kind)
		}
	}
}

// privateCase is a gorgonia operation built by its constructor, what
// graph/ reads of it and what the constructor was given.
type privateCase struct {
	kind      string
	op        any
	got, want func(op any) any
}

func privateCases(t *testing.T) []privateCase {
	t.Helper()
	g := G.NewGraph()
	in := func(name string, shape ...int) *G.Node {
		return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithInit(G.Zeroes()))
	}
	m, sq, v, img, cube := in("m", 2, 3), in("sq", 3, 3), in("v", 3), in("img", 1, 2, 5, 5), in("cube", 2, 2, 2)
	must := func(n *G.Node, err error) G.Op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n.Op()
	}
	broadcast := G.Must(G.BroadcastAdd(m, G.Must(G.Sum(m, 0)), nil, []byte{0}))
	var repeat G.Op
	for _, c := range nodeArgs(broadcast) {
		if typeName(c.Op()) == "repeatOp" {
			repeat = c.Op()
		}
	}
	_, _, _, bn, err := G.BatchNorm(img, nil, nil, 0.7, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	sub := G.Must(G.Sub(sq, G.Must(G.Transpose(sq))))
	return []privateCase{
		{"Node", sub, func(op any) any { return G.Nodes(nodeArgs(op.(*G.Node)))[0] }, func(any) any { return sq }},
		{"linAlgBinOp", must(G.Mul(sq, sq)), func(op any) any { k, a, b := productParams(op.(G.Op)); return fmt.Sprintf("%v %v %v", k, a, b) }, func(any) any { return "matmul false false" }},
		{"linAlgBinOp", must(G.BatchedMatMul(cube, cube, true, false)), func(op any) any { k, a, b := productParams(op.(G.Op)); return fmt.Sprintf("%v %v %v", k, a, b) }, func(any) any { return "batched true false" }},
		{"linAlgBinOp", must(G.Mul(sq, v)), func(op any) any { k, _, _ := productParams(op.(G.Op)); return k }, func(any) any { return "matvec" }},
		{"linAlgBinOp", must(G.Mul(v, v)), func(op any) any { k, _, _ := productParams(op.(G.Op)); return k }, func(any) any { return "vecdot" }},
		{"linAlgBinOp", must(G.OuterProd(v, v)), func(op any) any { k, _, _ := productParams(op.(G.Op)); return k }, func(any) any { return "outer" }},
		{"sumOp", must(G.Sum(m, 1)), func(op any) any { return reducedAxes(op.(G.Op)) }, func(any) any { return []int{1} }},
		{"maxOp", must(G.Max(m, 0)), func(op any) any { return reducedAxes(op.(G.Op)) }, func(any) any { return []int{0} }},
		{"transposeOp", must(G.Transpose(m)), func(op any) any { return transposePattern(op.(G.Op)) }, func(any) any { return []int{1, 0} }},
		{"sizeOp", must(G.SizeOf(1, m)), func(op any) any { return opAxis(op.(G.Op)) }, func(any) any { return 1 }},
		{"concatOp", must(G.Concat(1, m, m)), func(op any) any { return opAxis(op.(G.Op)) }, func(any) any { return 1 }},
		{"repeatOp", repeat, func(op any) any { return repeatAxis(op.(G.Op)) }, func(any) any { return 0 }},
		{"sliceOp", must(G.Slice(m, nil, G.S(1, 3))), func(op any) any {
			ax, s := sliceParams(op.(G.Op))
			return fmt.Sprint(ax, s.Start(), s.End())
		}, func(any) any { return "1 1 3" }},
		{"softmaxOp", must(G.LogSoftMax(m, 0)), func(op any) any { a, l := softmaxParams(op.(G.Op)); return fmt.Sprint(a, l) }, func(any) any { return "0 true" }},
		{"im2colOp", must(G.Im2Col(img, tensor.Shape{3, 2}, tensor.Shape{1, 0}, tensor.Shape{2, 1}, tensor.Shape{1, 2})),
			func(op any) any { return im2colParams(op.(G.Op)) }, func(any) any { return convParams{3, 2, 1, 0, 2, 1, 1, 2} }},
		{"maxPoolOp", must(G.MaxPool2D(img, tensor.Shape{2, 3}, []int{0, 1, 2, 3}, []int{2, 1})),
			func(op any) any { p, e := poolingParams(op.(G.Op)); return fmt.Sprint(p, e) },
			func(any) any { return fmt.Sprint(poolParams{2, 3, 0, 1, 2, 3, 2, 1}, true) }},
		{"avgPoolOp", must(G.AveragePool2D(img, tensor.Shape{3, 2}, []int{1, 0}, []int{1, 2})),
			func(op any) any { p, e := poolingParams(op.(G.Op)); return fmt.Sprint(p, e) },
			func(any) any { return fmt.Sprint(poolParams{3, 2, 1, 1, 0, 0, 1, 2}, false) }},
		{"atOp", must(G.At(m, 1, 2)), func(op any) any { return atCoordinates(op.(G.Op)) }, func(any) any { return []int{1, 2} }},
		{"upsampleOp", must(G.Upsample2D(img, 3)), func(op any) any { return upsampleFactor(op.(G.Op)) }, func(any) any { return 3 }},
		{"tensordotOp", must(G.Tensordot([]int{1}, []int{0}, m, sq)), func(op any) any { a, b := tensordotAxes(op.(G.Op)); return fmt.Sprint(a, b) }, func(any) any { return "[1] [0]" }},
		{"BatchNormOp", bn, func(op any) any { e, mo := batchNormParams(op.(G.Op)); return fmt.Sprint(e, mo) }, func(any) any { return "0.01 0.7" }},
		{"dropoutOp", must(G.Dropout(m, 0.25)), func(op any) any { return dropoutProbability(op.(G.Op)) }, func(any) any { return 0.25 }},
		{"randomOp", G.GaussianRandomNode(g, G.Float64, 0.5, 2, 3).Op(), func(op any) any { k, a, b := randomParams(op.(G.Op)); return fmt.Sprint(k, a, b) }, func(any) any { return fmt.Sprint(randGaussian, 0.5, 2) }},
		{"randomOp", G.BinomialRandomNode(g, G.Float64, 3, 0.25, 4).Op(), func(op any) any { k, a, b := randomParams(op.(G.Op)); return fmt.Sprint(k, a, b) }, func(any) any { return fmt.Sprint(randBinomial, 3, 0.25) }},
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
