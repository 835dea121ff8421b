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
	"maxPoolOp": {"h": reflect.Int, "w": reflect.Int, "padNorth": reflect.Int, "padSouth": reflect.Int,
		"padWest": reflect.Int, "padEast": reflect.Int, "explicitPadding": reflect.Bool,
		"strideH": reflect.Int, "strideW": reflect.Int},
}

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

// sliceOf returns the slice a gorgonia sliceOp takes (nil: all of the axis).
func sliceOf(op G.Op) tensor.Slice {
	s, ok := op.(interface{ IsSlice() tensor.Slice })
	if !ok {
		importPanic("gorgonia's %s has no IsSlice method", typeName(op))
	}
	return s.IsSlice()
}
