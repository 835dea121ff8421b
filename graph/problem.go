package graph

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Objective declares a bilevel problem written as gorgonia expressions:
// min over x of f(x, y*(x)) with y*(x) = argmin over y of g(x, y).
//
// Every node listed here must be an input node (made by gorgonia.NewTensor,
// NewMatrix, NewVector or NewScalar) holding finite float64 values, at
// least one.
type Objective struct {
	// Upper and Lower are the scalar objectives f(x, y) and g(x, y).
	Upper, Lower *G.Node
	// Outer and Inner are the variables x and y; their values are the
	// starting point returned by X0 and Y0. A variable may be a tensor of
	// any shape; the oracles see the concatenation of all outer (inner)
	// variables, each flattened in row-major order, as one vector.
	Outer, Inner []*G.Node
	// UpperData and LowerData are the per-sample data of f and g: axis 0
	// of each node indexes samples, and all nodes of one level have the
	// same number of samples. An oracle evaluated on a batch sees only the
	// batch's rows, so objectives must average with gorgonia.Mean (or
	// divide by gorgonia.SizeOf), never by a constant sample count. An
	// objective may read the other level's data; it then sees all of them.
	UpperData, LowerData []*G.Node
	// Constants lists the input nodes (made with gorgonia.NewTensor and
	// friends, holding a value) that the objectives read and whose values
	// stay as they are at Compile: a fixed mask or a given matrix, say.
	// Every input node an objective reads must be declared in exactly one
	// of Outer, Inner, UpperData, LowerData and Constants, so that a
	// variable or a data input left out by mistake is an error rather than
	// a silent constant; nodes made by gorgonia.NewConstant need no
	// declaration.
	Constants []*G.Node
	// RandomSeed seeds the masks of gorgonia's Dropout and the numbers of
	// its random nodes (UniformRandomNode and friends), which graph/ draws
	// as a deterministic function of the seed, the node and the batch's
	// samples, so that all oracles of one batch see the same ones (see
	// Problem.SetTraining for evaluation without them).
	RandomSeed uint64
	// Float32Data holds the data of both levels in float32: half the
	// memory, and half the memory traffic of the products that read them,
	// which is what bounds the oracles of models with large data. The
	// values are rounded to float32 once, by Compile and SetData;
	// variables, intermediate values and derivatives stay float64, so the
	// oracles compute exactly the problem whose data are the rounded
	// values. Index vectors read by Gather (SampleIndex) stay float64, so
	// that every index is exact.
	Float32Data bool
	// Float32 computes in float32: values, adjoints, Hessian-vector and
	// mixed products are computed by float32 kernels on float32 buffers,
	// with the data held in float32 as with Float32Data (half the memory
	// traffic of every operation, and the float32 rate of the products).
	// Sums over many terms — reductions, softmax denominators, batch
	// statistics, the narrow products — accumulate in float64 and are
	// rounded; the wide products accumulate in float32, as a float32 BLAS
	// does. The Problem's API stays float64: x, y, v and u are rounded to
	// float32 when an oracle reads them and results are widened into the
	// caller's float64 destinations, so solvers keep their vectors in
	// float64. The oracles are then those of the float32-rounded problem
	// up to float32 rounding, about 1e-6 relative to the magnitudes
	// involved and more through ill-conditioned operations; Check compares
	// each one with the same objective computed in float64 (see Check for
	// the tolerances). Compile also checks every node's float32 value
	// against gorgonia's forward pass. Index values (Gather's, sample
	// indices) must be exact in float32: below 2^24.
	Float32 bool
}

// Var describes one variable in the flat vector of its level.
type Var struct {
	Name   string
	Shape  []int
	Offset int // index of its first element in the flat vector
	Size   int
}

// Stats counts oracle calls, in the manner of gonum/optimize's Stats.
type Stats struct {
	UpperEvaluations int // f
	LowerEvaluations int // g
	UpperGradients   int // ∇f (∇x f, ∇y f or both)
	LowerGradients   int // ∇g (∇x g, ∇y g or both)
	HessVecProducts  int // ∇yy g · v
	MixedXYProducts  int // ∇xy g · v
	MixedYXProducts  int // ∇yx g · u
}

// Problem is a compiled bilevel problem: the oracles of f and g derived by
// graph/'s own differentiation and compiled once per batch size. Vectors
// are flat (see Objective); a batch lists sample indices of the level's
// data (lower for oracles of g, upper for oracles of f), and a nil batch
// means all samples. Oracles panic, as gonum does, when a slice has the
// wrong length or a batch index is out of range: those are programmer
// errors. A Problem is not safe for concurrent use.
type Problem struct {
	outer, inner           []Var
	outerNodes, innerNodes []*G.Node
	dimX, dimY             int
	x0, y0                 []float64
	levels                 [2]level // lowerLevel, upperLevel
	src                    *source
	seed                   uint64 // Objective.RandomSeed
	random                 bool   // the objectives hold random nodes or Dropout
	training               bool   // see SetTraining
	f32                    bool   // Objective.Float32: programs compute in float32
	fixed                  map[*G.Node][]float64
	worlds                 map[worldKey]*world
	stats                  Stats
}

const (
	lowerLevel = 0
	upperLevel = 1
)

var levelNames = [2]string{"lower objective g", "upper objective f"}

type level struct {
	root *G.Node
	data []*G.Node
	// full and rowLen hold the data's values and elements per sample, then,
	// when the problem is random, the samples' indices 0, 1, ..., n−1.
	full   []array
	rowLen []int
	n      int
}

type worldKey struct {
	level int
	batch int // −1 for the full data
}

// DimX returns the length of the outer vector x.
func (p *Problem) DimX() int { return p.dimX }

// DimY returns the length of the inner vector y.
func (p *Problem) DimY() int { return p.dimY }

// NumLower returns the number of samples of the lower-level data (1 when g
// has no data).
func (p *Problem) NumLower() int { return p.levels[lowerLevel].n }

// NumUpper returns the number of samples of the upper-level data (1 when f
// has no data).
func (p *Problem) NumUpper() int { return p.levels[upperLevel].n }

// OuterVars and InnerVars describe the layout of x and y.
func (p *Problem) OuterVars() []Var { return p.outer }

// InnerVars describes the layout of y.
func (p *Problem) InnerVars() []Var { return p.inner }

// X0 copies the starting outer vector (the outer variables' values at
// Compile) into dst, allocating it when nil, and returns it.
func (p *Problem) X0(dst []float64) []float64 { return copyInto(dst, p.x0) }

// Y0 copies the starting inner vector into dst, allocating it when nil, and
// returns it.
func (p *Problem) Y0(dst []float64) []float64 { return copyInto(dst, p.y0) }

func copyInto(dst, src []float64) []float64 {
	if dst == nil {
		dst = make([]float64, len(src))
	}
	if len(dst) != len(src) {
		panic("graph: destination length mismatch")
	}
	copy(dst, src)
	return dst
}

// ElementName names element i of x (outer) or y (inner), as
// "name[i0,i1,...]", for error messages.
func (p *Problem) ElementName(outer bool, i int) string {
	vs := p.inner
	if outer {
		vs = p.outer
	}
	for _, v := range vs {
		if i >= v.Offset && i < v.Offset+v.Size {
			return elementName(v.Name, v.Shape, i-v.Offset)
		}
	}
	return fmt.Sprintf("element %d", i)
}

// CheckBatch reports whether the oracles of the upper (or lower) level can
// be evaluated on batches of size samples, compiling that batch size if
// needed. A graph that fixes a sample count (a constant with one row per
// sample, say) fails here with an error naming the node and the shapes;
// solvers call it once for each batch size before their first iteration.
func (p *Problem) CheckBatch(upper bool, size int) error {
	lv := lowerLevel
	if upper {
		lv = upperLevel
	}
	if size < 1 || size > p.levels[lv].n {
		return fmt.Errorf("graph: batch of %d samples for the %s, which has %d samples", size, levelNames[lv], p.levels[lv].n)
	}
	_, err := p.world(lv, size)
	return err
}

// SetData replaces the values of the declared data node n (with the same
// shape) for every later oracle call: the next task of a meta-learning
// run, say. Linearizations made before keep the data they were made with.
// The Problem keeps values, or with Objective.Float32Data a float32 copy.
func (p *Problem) SetData(n *G.Node, values []float64) error {
	for lv := range p.levels {
		l := &p.levels[lv]
		for i, d := range l.data {
			if d != n {
				continue
			}
			if size := len(l.full[i].f64) + len(l.full[i].f32); len(values) != size {
				return fmt.Errorf("graph: SetData of %s with %d values; its shape %v holds %d", nodeName(n), len(values), n.Shape(), size)
			}
			if err := checkFinite(n, "data", values); err != nil {
				return fmt.Errorf("%w (in SetData)", err)
			}
			if l.full[i].f32 != nil {
				l.full[i] = array{f32: narrowed(values)}
				return nil
			}
			if p.f32 {
				if err := checkExact32(n, values); err != nil {
					return fmt.Errorf("%w (in SetData)", err)
				}
			}
			l.full[i] = array{f64: values}
			return nil
		}
	}
	return fmt.Errorf("graph: SetData of %s, which is not declared as data of either objective", nodeName(n))
}

// Stats returns the oracle calls made so far.
func (p *Problem) Stats() Stats { return p.stats }
