package graph

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file is the only place where graph/ reads gorgonia's private state:
// a node's argument list and the parameters of the operations it imports,
// which gorgonia v0.9.18 keeps in unexported fields with no accessor.
// Every field read is listed in privateFields; TestGorgoniaPrivate builds
// each operation with gorgonia's own constructor and fails, naming the
// field, if one is missing or has changed kind. A read that fails at run
// time (gorgonia changed under a build that skipped the tests) panics with
// an importError, which the importer turns into an error naming the user's
// node: it is never a wrong number.

// privateFields lists, for each gorgonia type graph/ reads, the private
// fields it reads and their kinds.
var privateFields = map[string]map[string]reflect.Kind{
	"Node":        {"children": reflect.Slice},
	"linAlgBinOp": {"āBinaryOperator": reflect.Uint8, "transA": reflect.Bool, "transB": reflect.Bool},
	"sumOp":       {"along": reflect.Slice},
	"maxOp":       {"along": reflect.Slice},
	"transposeOp": {"pattern": reflect.Slice},
	"sizeOp":      {"axis": reflect.Int},
	"repeatOp":    {"along": reflect.Int},
	"concatOp":    {"axis": reflect.Int},
	"sliceOp":     {"along": reflect.Int},
	"softmaxOp":   {"axis": reflect.Int, "isLog": reflect.Bool},
	"im2colOp": {"h": reflect.Int, "w": reflect.Int, "padH": reflect.Int, "padW": reflect.Int,
		"strideH": reflect.Int, "strideW": reflect.Int, "dilationH": reflect.Int, "dilationW": reflect.Int},
	"atOp":        {"coordinates": reflect.Slice},
	"tensordotOp": {"aAxes": reflect.Slice, "bAxes": reflect.Slice},
	"BatchNormOp": {"epsilon": reflect.Float64, "momentum": reflect.Float64},
	"dropoutOp":   {"probability": reflect.Float64},
	"randomOp":    {"which": reflect.Uint8, "a": reflect.Float64, "b": reflect.Float64},
	"upsampleOp":  {"stride": reflect.Int},
	"maxPoolOp":   poolFields,
	"avgPoolOp":   poolFields,
}

// poolFields are the fields of gorgonia's maxPoolOp and avgPoolOp.
var poolFields = map[string]reflect.Kind{"h": reflect.Int, "w": reflect.Int, "padNorth": reflect.Int, "padSouth": reflect.Int,
	"padWest": reflect.Int, "padEast": reflect.Int, "explicitPadding": reflect.Bool, "strideH": reflect.Int, "strideW": reflect.Int}

// importError is raised (as a panic) when the importer meets something it
// does not expect in a gorgonia graph; the importer recovers it into an
// error naming the user's node.
type importError struct{ msg string }

func (e importError) Error() string { return e.msg }

func importPanic(format string, args ...any) {
	panic(importError{fmt.Sprintf(format, args...)})
}

// typeName is the name of the Go type of v, through pointers.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "nil"
	}
	return t.Name()
}

// private returns the private field name of v (a struct or a pointer to
// one), readable, after checking that privateFields lists it.
func private(v any, name string) reflect.Value {
	kind := typeName(v)
	want, listed := privateFields[kind][name]
	if !listed {
		panic("graph: reading the unlisted private field " + name + " of gorgonia's " + kind)
	}
	r := reflect.ValueOf(v)
	for r.Kind() == reflect.Pointer || r.Kind() == reflect.Interface {
		if r.IsNil() {
			importPanic("gorgonia's %s is nil", kind)
		}
		r = r.Elem()
	}
	if !r.CanAddr() {
		c := reflect.New(r.Type()).Elem()
		c.Set(r)
		r = c
	}
	f := r.FieldByName(name)
	if !f.IsValid() || f.Kind() != want {
		importPanic("gorgonia's %s has no field %s of kind %v (graph/ reads gorgonia v0.9.18's private fields; this gorgonia differs)", kind, name, want)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

func privateInt(v any, name string) int {
	f := private(v, name)
	switch f.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(f.Uint())
	}
	return int(f.Int())
}

func privateInts(v any, name string) []int {
	f := private(v, name)
	r := make([]int, f.Len())
	for i := range r {
		r[i] = int(f.Index(i).Int())
	}
	return r
}

func privateBool(v any, name string) bool { return private(v, name).Bool() }

func privateFloat(v any, name string) float64 { return private(v, name).Float() }

// nodeArgs returns n's arguments in order, read from the node's own list.
// gorgonia's ExprGraph.From(id) is not used: after ExprGraph.RemoveNode
// (gorgonia's log(1±a) stabilization calls it) its id→index cache is stale
// and it returns the arguments of another node.
func nodeArgs(n *G.Node) []*G.Node {
	return append([]*G.Node{}, private(n, "children").Interface().(G.Nodes)...)
}

// linAlgKind names the product a gorgonia linAlgBinOp computes:
// "matmul", "matvec", "vecdot", "outer" or "batched". Its operator is
// compared with those of products built by gorgonia's constructors, so no
// operator number is written here.
func linAlgKind(op G.Op) string {
	kinds, err := linAlgKinds()
	if err != nil {
		importPanic("%v", err)
	}
	k, ok := kinds[privateInt(op, "āBinaryOperator")]
	if !ok {
		importPanic("gorgonia product %v is none that graph/ knows", op)
	}
	return k
}

var linAlgKinds = sync.OnceValues(func() (map[int]string, error) {
	g := G.NewGraph()
	mat := G.NewMatrix(g, G.Float64, G.WithShape(2, 2), G.WithName("m"))
	vec := G.NewVector(g, G.Float64, G.WithShape(2), G.WithName("v"))
	cube := G.NewTensor(g, G.Float64, 3, G.WithShape(2, 2, 2), G.WithName("c"))
	kinds := map[int]string{}
	for _, c := range []struct {
		name string
		make func() (*G.Node, error)
	}{
		{"matmul", func() (*G.Node, error) { return G.Mul(mat, mat) }},
		{"matvec", func() (*G.Node, error) { return G.Mul(mat, vec) }},
		{"vecdot", func() (*G.Node, error) { return G.Mul(vec, vec) }},
		{"outer", func() (*G.Node, error) { return G.OuterProd(vec, vec) }},
		{"batched", func() (*G.Node, error) { return G.BatchedMatMul(cube, cube) }},
	} {
		n, err := c.make()
		if err != nil {
			return nil, fmt.Errorf("graph: building gorgonia's %s to recognize its products: %v", c.name, err)
		}
		k := privateInt(n.Op(), "āBinaryOperator")
		if _, dup := kinds[k]; dup {
			return nil, fmt.Errorf("graph: gorgonia's %s has the operator of %s", c.name, kinds[k])
		}
		kinds[k] = c.name
	}
	return kinds, nil
})

// The parameters of gorgonia's operations, by kind.

// reducedAxes returns the axes a sumOp or maxOp reduces (none: all).
func reducedAxes(op G.Op) []int { return privateInts(op, "along") }

// transposePattern returns the permutation of a transposeOp.
func transposePattern(op G.Op) []int { return privateInts(op, "pattern") }

// opAxis returns the axis of a sizeOp or concatOp.
func opAxis(op G.Op) int { return privateInt(op, "axis") }

// repeatAxis returns the axis a repeatOp repeats along.
func repeatAxis(op G.Op) int { return privateInt(op, "along") }

// sliceParams returns the axis of a sliceOp and the slice it takes (nil:
// all of the axis).
func sliceParams(op G.Op) (int, tensor.Slice) {
	s, ok := op.(interface{ IsSlice() tensor.Slice })
	if !ok {
		importPanic("gorgonia's %s has no IsSlice method", typeName(op))
	}
	return privateInt(op, "along"), s.IsSlice()
}

// softmaxParams returns the axis of a softmaxOp and whether it is the
// log-softmax.
func softmaxParams(op G.Op) (axis int, isLog bool) {
	return privateInt(op, "axis"), privateBool(op, "isLog")
}

// im2colParams returns the kernel, padding, strides and dilations of an
// im2colOp.
func im2colParams(op G.Op) convParams {
	f := func(name string) int { return privateInt(op, name) }
	return convParams{f("h"), f("w"), f("padH"), f("padW"), f("strideH"), f("strideW"), f("dilationH"), f("dilationW")}
}

// poolingParams returns the window, the padding (north, south, west,
// east) and strides of a maxPoolOp or avgPoolOp as its fields hold them,
// and whether four paddings were given.
func poolingParams(op G.Op) (poolParams, bool) {
	f := func(name string) int { return privateInt(op, name) }
	return poolParams{kh: f("h"), kw: f("w"), padN: f("padNorth"), padS: f("padSouth"),
		padW: f("padWest"), padE: f("padEast"), sH: f("strideH"), sW: f("strideW")}, privateBool(op, "explicitPadding")
}

// atCoordinates returns the coordinates of an atOp.
func atCoordinates(op G.Op) []int { return privateInts(op, "coordinates") }

// upsampleFactor returns the factor an upsampleOp repeats rows and columns
// by.
func upsampleFactor(op G.Op) int { return privateInt(op, "stride") + 1 }

// tensordotAxes returns the contracted axes of a tensordotOp's operands.
func tensordotAxes(op G.Op) (a, b []int) { return privateInts(op, "aAxes"), privateInts(op, "bAxes") }

// productParams returns the product a linAlgBinOp computes ("matmul",
// "matvec", "vecdot", "outer" or "batched") and its transposes.
func productParams(op G.Op) (kind string, transA, transB bool) {
	return linAlgKind(op), privateBool(op, "transA"), privateBool(op, "transB")
}

// batchNormParams returns ε and the momentum of a BatchNormOp. (Its mode
// is the machine's: gorgonia's machines set it when they are made.)
func batchNormParams(op G.Op) (eps, momentum float64) {
	return privateFloat(op, "epsilon"), privateFloat(op, "momentum")
}

// dropoutProbability returns the probability of a dropoutOp. (Its mode is
// the machine's, as BatchNorm's.)
func dropoutProbability(op G.Op) float64 { return privateFloat(op, "probability") }

// randomParams returns the distribution of a randomOp (randUniform,
// randGaussian or randBinomial) and its two parameters. The distribution is
// recognized by comparing it with the nodes gorgonia's constructors make.
func randomParams(op G.Op) (kind int, a, b float64) {
	kinds, err := randomKinds()
	if err != nil {
		importPanic("%v", err)
	}
	k, ok := kinds[privateInt(op, "which")]
	if !ok {
		importPanic("gorgonia random node %v of a distribution graph/ does not know", op)
	}
	return k, privateFloat(op, "a"), privateFloat(op, "b")
}

var randomKinds = sync.OnceValues(func() (map[int]int, error) {
	kinds := map[int]int{}
	// Each in a graph of its own: gorgonia's graph takes random nodes of
	// equal shape and parameters for one node.
	for kind, n := range []*G.Node{
		randUniform:  G.UniformRandomNode(G.NewGraph(), G.Float64, 0, 1, 2),
		randGaussian: G.GaussianRandomNode(G.NewGraph(), G.Float64, 0, 1, 2),
		randBinomial: G.BinomialRandomNode(G.NewGraph(), G.Float64, 1, 0.5, 2),
	} {
		w := privateInt(n.Op(), "which")
		if _, dup := kinds[w]; dup {
			return nil, fmt.Errorf("graph: gorgonia's random nodes share their distribution field")
		}
		kinds[w] = kind
	}
	return kinds, nil
})
