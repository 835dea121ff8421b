package graph

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
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

// reachable returns the set of nodes root depends on, root included.
func (src *source) reachable(root *G.Node) map[*G.Node]bool {
	seen := map[*G.Node]bool{}
	var visit func(n *G.Node)
	visit = func(n *G.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, c := range src.args[n] {
			visit(c)
		}
	}
	visit(root)
	return seen
}

// random reports whether the objectives hold random nodes or Dropout.
func (src *source) random() bool {
	for _, n := range src.order {
		switch typeName(n.Op()) {
		case "randomOp", "dropoutOp":
			return true
		}
	}
	return false
}

// gatherIndices returns the nodes read as Gather indices.
func (src *source) gatherIndices() map[*G.Node]bool {
	idx := map[*G.Node]bool{}
	for _, n := range src.order {
		if _, ok := n.Op().(gatherOp); ok {
			idx[src.args[n][1]] = true
		}
	}
	return idx
}

// checkDependence rejects variables that cannot matter: an inner variable g
// does not read (its Hessian block would be zero), an outer variable
// neither objective reads.
func (p *Problem) checkDependence(obj Objective) error {
	inG, inF := p.src.reachable(obj.Lower), p.src.reachable(obj.Upper)
	for _, y := range obj.Inner {
		if !inG[y] {
			return fmt.Errorf("graph: the lower objective %s does not depend on inner variable %s; every inner variable must enter g", nodeName(obj.Lower), nodeName(y))
		}
	}
	for _, x := range obj.Outer {
		if !inG[x] && !inF[x] {
			return fmt.Errorf("graph: neither objective depends on outer variable %s", nodeName(x))
		}
	}
	return nil
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
			} else {
				l.full[i] = array{f64: values}
			}
			return nil
		}
	}
	return fmt.Errorf("graph: SetData of %s, which is not declared as data of either objective", nodeName(n))
}

// Stats returns the oracle calls made so far.
func (p *Problem) Stats() Stats { return p.stats }

// F returns f(x, y) on the upper-level batch.
func (p *Problem) F(x, y []float64, batch []int) float64 {
	p.stats.UpperEvaluations++
	pr := p.call(upperLevel, progValue, x, y, nil, batch)
	defer pr.release()
	return pr.out(0)[0]
}

// G returns g(x, y) on the lower-level batch.
func (p *Problem) G(x, y []float64, batch []int) float64 {
	p.stats.LowerEvaluations++
	pr := p.call(lowerLevel, progValue, x, y, nil, batch)
	defer pr.release()
	return pr.out(0)[0]
}

// GradF computes ∇x f into dx and ∇y f into dy on the upper-level batch;
// either may be nil to skip it.
func (p *Problem) GradF(dx, dy, x, y []float64, batch []int) {
	p.stats.UpperGradients++
	p.grad(upperLevel, dx, dy, x, y, batch)
}

// GradG computes ∇x g into dx and ∇y g into dy on the lower-level batch;
// either may be nil to skip it.
func (p *Problem) GradG(dx, dy, x, y []float64, batch []int) {
	p.stats.LowerGradients++
	p.grad(lowerLevel, dx, dy, x, y, batch)
}

func (p *Problem) grad(lv int, dx, dy, x, y []float64, batch []int) {
	kind := progGradXY
	switch {
	case dx == nil && dy == nil:
		return
	case dx == nil:
		kind = progGradY
	case dy == nil:
		kind = progGradX
	}
	pr := p.call(lv, kind, x, y, nil, batch)
	defer pr.release()
	k := 0
	if dx != nil {
		k = p.collect(dx, p.outer, pr, 0)
	}
	if dy != nil {
		p.collect(dy, p.inner, pr, k)
	}
}

// collect copies the outputs first, first+1, ... of pr, one per variable
// of vs, into dst and returns the next output index.
func (p *Problem) collect(dst []float64, vs []Var, pr *program, first int) int {
	if len(dst) != sumSizes(vs) {
		panic(fmt.Sprintf("graph: destination has length %d, want %d", len(dst), sumSizes(vs)))
	}
	for i, v := range vs {
		copy(dst[v.Offset:v.Offset+v.Size], pr.out(first+i))
	}
	return first + len(vs)
}

func sumSizes(vs []Var) int {
	n := 0
	for _, v := range vs {
		n += v.Size
	}
	return n
}

// HVP computes the Hessian-vector product ∇yy g(x, y) · v into dst on the
// lower-level batch.
func (p *Problem) HVP(dst, x, y, v []float64, batch []int) {
	p.stats.HessVecProducts++
	pr := p.call(lowerLevel, progHVP, x, y, v, batch)
	defer pr.release()
	p.collect(dst, p.inner, pr, 0)
}

// MixedXY computes the mixed product ∇xy g(x, y) · v = ∇x ⟨∇y g, v⟩, a
// vector in x-space, into dst on the lower-level batch.
func (p *Problem) MixedXY(dst, x, y, v []float64, batch []int) {
	p.stats.MixedXYProducts++
	pr := p.call(lowerLevel, progMixedXY, x, y, v, batch)
	defer pr.release()
	p.collect(dst, p.outer, pr, 0)
}

// MixedYX computes the mixed product ∇yx g(x, y) · u = ∇y ⟨∇x g, u⟩, a
// vector in y-space, into dst on the lower-level batch.
func (p *Problem) MixedYX(dst, x, y, u []float64, batch []int) {
	p.stats.MixedYXProducts++
	pr := p.call(lowerLevel, progMixedYX, x, y, u, batch)
	defer pr.release()
	p.collect(dst, p.inner, pr, 0)
}

// HessYY assembles the dense Hessian ∇yy g(x, y) (DimY × DimY) from DimY
// Hessian-vector products at one linearization, symmetrized, into dst,
// which is resized when empty. Meant for small DimY.
func (p *Problem) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	n := p.dimY
	if dst.IsEmpty() {
		dst.ReuseAsSym(n)
	}
	if dst.SymmetricDim() != n {
		panic("graph: HessYY destination has the wrong size")
	}
	l := p.Linearize(x, y, batch)
	e := make([]float64, n)
	cols := mat.NewDense(n, n, nil)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		e[j] = 1
		l.HVP(col, e)
		e[j] = 0
		cols.SetCol(j, col)
	}
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			dst.SetSym(i, j, (cols.At(i, j)+cols.At(j, i))/2)
		}
	}
}

// HessXY assembles the dense mixed second derivative ∇xy g(x, y), the
// DimX × DimY matrix whose column j is ∇xy g · e_j, into dst, which is
// resized when empty. Meant for small DimY.
func (p *Problem) HessXY(dst *mat.Dense, x, y []float64, batch []int) {
	if dst.IsEmpty() {
		dst.ReuseAs(p.dimX, p.dimY)
	}
	if r, c := dst.Dims(); r != p.dimX || c != p.dimY {
		panic("graph: HessXY destination has the wrong size")
	}
	l := p.Linearize(x, y, batch)
	e := make([]float64, p.dimY)
	col := make([]float64, p.dimX)
	for j := 0; j < p.dimY; j++ {
		e[j] = 1
		l.MixedXY(col, e)
		e[j] = 0
		dst.SetCol(j, col)
	}
}

// Linearization holds g's second-order information at a fixed point
// (x, y) and batch: everything the Hessian-vector and mixed products need
// that does not depend on the vector is computed once, by Linearize, and
// each product then runs only the part of the program that depends on v.
// Use it in CG, Neumann and unrolling loops that apply the Hessian many
// times at one point. It holds its own copies of x, y and the batch's rows,
// so several linearizations may be used in turn; switching between them
// recomputes the fixed part.
type Linearization struct {
	p                *Problem
	w                *world
	pr               *program
	needHVP, needMix []bool
	x, y             []float64
	data             []array
}

// Linearize returns the linearization of g at (x, y) on the lower-level
// batch.
func (p *Problem) Linearize(x, y []float64, batch []int) *Linearization {
	w := p.mustWorld(lowerLevel, batch)
	pr := w.program(p, progLinear)
	l := &Linearization{p: p, w: w, pr: pr,
		x: append([]float64{}, p.checkLen(x, p.dimX, "x")...),
		y: append([]float64{}, p.checkLen(y, p.dimY, "y")...)}
	l.needHVP = pr.need(seq(0, len(p.inner))...)
	l.needMix = pr.need(seq(len(p.inner), len(p.inner)+len(p.outer))...)
	l.data = append([]array{}, w.batchData(p, pr, batch, true)...)
	l.activate()
	return l
}

// HVPAt returns the operator v ↦ ∇yy g(x, y)·v on the lower-level batch,
// computed through a Linearization made at its first use: the first product
// costs about one HVP, each later one only the part that depends on v. It
// keeps x, y and batch; they must not change while it is in use. This is
// the operator implicit.HVPOperator uses for a Problem, and so AID's CG and
// Neumann loops.
func (p *Problem) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	var l *Linearization
	return func(dst, v []float64) {
		if l == nil {
			l = p.Linearize(x, y, batch)
		}
		l.HVP(dst, v)
	}
}

// activate makes l the linearization its program holds.
func (l *Linearization) activate() {
	l.w.bind(l.p, l.pr, l.x, l.y, l.data)
	l.pr.exec(nil, runStatic)
	l.pr.owner = l
}

func seq(a, b int) []int {
	r := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		r = append(r, i)
	}
	return r
}

func (l *Linearization) apply(v []float64, mask []bool) {
	if l.pr.owner != l {
		l.activate()
	}
	bindFlat(l.pr, l.w.v, l.p.inner, l.p.checkLen(v, l.p.dimY, "v"))
	l.pr.exec(mask, runDynamic)
}

// HVP computes ∇yy g · v at the linearization point into dst.
func (l *Linearization) HVP(dst, v []float64) {
	l.p.stats.HessVecProducts++
	l.apply(v, l.needHVP)
	l.p.collect(dst, l.p.inner, l.pr, 0)
}

// MixedXY computes ∇xy g · v at the linearization point into dst.
func (l *Linearization) MixedXY(dst, v []float64) {
	l.p.stats.MixedXYProducts++
	l.apply(v, l.needMix)
	l.p.collect(dst, l.p.outer, l.pr, len(l.p.inner))
}

func (p *Problem) checkLen(v []float64, n int, name string) []float64 {
	if len(v) != n {
		panic(fmt.Sprintf("graph: %s has length %d, want %d", name, len(v), n))
	}
	return v
}
