package graph

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
)

// This file checks an Objective's declarations: every node in the role the
// user meant, with values an oracle can use. A mistake is an error naming
// the user's node (and element), reported by Compile before anything runs.

// Compile checks obj and derives and compiles its oracles on the full data.
// Every problem with the objective is reported as an error before anything
// runs: unsupported operations (named, with what to write instead), shape
// mismatches (naming the node and the shapes), input nodes read but not
// declared, variables the objectives do not depend on, data of unequal
// sample counts, empty or non-finite variables and data, missing values.
// It then evaluates both objectives with gorgonia's own forward pass, at
// the declared values on the first samples, and compares every node's
// value with the compiled program's: a difference beyond rounding is an
// error naming the node, its operation and both values.
func Compile(obj Objective) (*Problem, error) {
	if obj.Upper == nil || obj.Lower == nil {
		return nil, fmt.Errorf("graph: Objective needs both Upper and Lower")
	}
	if len(obj.Outer) == 0 || len(obj.Inner) == 0 {
		return nil, fmt.Errorf("graph: Objective needs at least one Outer and one Inner variable")
	}
	for _, r := range []*G.Node{obj.Upper, obj.Lower} {
		if r.Shape().TotalSize() != 1 {
			return nil, fmt.Errorf("graph: objective %s has shape %v; want a scalar", nodeName(r), r.Shape())
		}
	}
	src, err := scan(obj.Upper, obj.Lower)
	if err != nil {
		return nil, err
	}
	p := &Problem{src: src, fixed: map[*G.Node][]float64{}, worlds: map[worldKey]*world{},
		seed: obj.RandomSeed, random: src.random(), training: true, f32: obj.Float32}
	if err := p.declare(obj); err != nil {
		return nil, err
	}
	if err := p.checkDependence(obj); err != nil {
		return nil, err
	}
	for lv := range p.levels {
		if _, err := p.world(lv, -1); err != nil {
			return nil, err
		}
	}
	if _, err := p.verify(p.x0, p.y0, [2][]int{}); err != nil {
		return nil, err
	}
	return p, nil
}

// roles records the role each declared node was given.
type roles map[*G.Node]string

// claim gives n the role what, or says why it cannot have it.
func (r roles) claim(n *G.Node, what string) error {
	if n == nil {
		return fmt.Errorf("graph: a nil node among the %s", what)
	}
	if n.Op() != nil {
		return fmt.Errorf("graph: %s %s is computed; it must be an input node", what, nodeName(n))
	}
	if old, ok := r[n]; ok {
		return fmt.Errorf("graph: node %s is declared twice, as %s and as %s", nodeName(n), old, what)
	}
	r[n] = what
	return nil
}

// declare reads obj's variables, data and constants into p after checking
// every declaration.
func (p *Problem) declare(obj Objective) error {
	r := roles{}
	var err error
	if p.outer, p.x0, err = layout(obj.Outer, "outer variable", r); err != nil {
		return err
	}
	if p.inner, p.y0, err = layout(obj.Inner, "inner variable", r); err != nil {
		return err
	}
	p.dimX, p.dimY = len(p.x0), len(p.y0)
	p.outerNodes = append([]*G.Node{}, obj.Outer...)
	p.innerNodes = append([]*G.Node{}, obj.Inner...)
	f32 := obj.Float32Data || obj.Float32
	var indices map[*G.Node]bool // data kept in float64 under Float32Data
	if f32 {
		indices = p.src.gatherIndices()
	}
	for lv, spec := range [2]struct {
		root *G.Node
		data []*G.Node
	}{{obj.Lower, obj.LowerData}, {obj.Upper, obj.UpperData}} {
		l, err := readLevel(spec.root, spec.data, lv, r, f32, indices)
		if err != nil {
			return err
		}
		if p.random {
			if p.f32 && l.n > maxExact32 {
				return fmt.Errorf("graph: the %s has %d samples; Objective.Float32 reads sample indices in float32, exact up to %d, and the objectives draw random numbers per sample", levelNames[lv], l.n, maxExact32)
			}
			l.full = append(l.full, array{f64: indexValues(l.n)})
			l.rowLen = append(l.rowLen, 1)
		}
		p.levels[lv] = l
	}
	for _, n := range obj.Constants {
		if err := r.claim(n, "constant"); err != nil {
			return err
		}
	}
	if err := p.snapshotConstants(obj, r); err != nil {
		return err
	}
	if p.f32 {
		return p.checkIndices32(indices)
	}
	return nil
}

// maxExact32 is the largest integer below which every integer is a
// float32.
const maxExact32 = 1 << 24

// checkIndices32 checks that the input nodes read as Gather indices hold
// values exact in float32, in which a Float32 problem reads them.
func (p *Problem) checkIndices32(indices map[*G.Node]bool) error {
	for n := range indices {
		if n.Op() != nil {
			continue
		}
		vals, ok := p.fixed[n]
		if !ok {
			var err error
			if vals, err = valueData(n); err != nil {
				return err
			}
		}
		if err := checkExact32(n, vals); err != nil {
			return err
		}
	}
	return nil
}

// checkExact32 returns an error naming the first of the index values vals
// of n that float32 does not hold exactly.
func checkExact32(n *G.Node, vals []float64) error {
	for i, v := range vals {
		if float64(float32(v)) != v {
			return fmt.Errorf("graph: index %.17g at %s of %s is not exact in float32, in which Objective.Float32 reads indices (up to %d)", v, elementName(n.Name(), n.Shape(), i), nodeName(n), maxExact32)
		}
	}
	return nil
}

// indexValues returns 0, 1, ..., n−1.
func indexValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)
	}
	return v
}

// layout lays the variables vars out in one flat vector and returns their
// initial values.
func layout(vars []*G.Node, what string, r roles) ([]Var, []float64, error) {
	var vs []Var
	var init []float64
	for _, n := range vars {
		if err := r.claim(n, what); err != nil {
			return nil, nil, err
		}
		vals, err := valueData(n)
		if err != nil {
			return nil, nil, err
		}
		if len(vals) == 0 {
			return nil, nil, fmt.Errorf("graph: %s %s has shape %v, no elements", what, nodeName(n), n.Shape())
		}
		if err := checkFinite(n, what, vals); err != nil {
			return nil, nil, err
		}
		vs = append(vs, Var{Name: n.Name(), Shape: []int(n.Shape().Clone()), Offset: len(init), Size: len(vals)})
		init = append(init, vals...)
	}
	return vs, init, nil
}

// readLevel reads the data of the level lv, whose objective is root.
func readLevel(root *G.Node, data []*G.Node, lv int, r roles, f32 bool, indices map[*G.Node]bool) (level, error) {
	l := level{root: root, n: -1}
	what := "data of the " + levelNames[lv]
	for _, d := range data {
		if err := r.claim(d, what); err != nil {
			return l, err
		}
		vals, err := valueData(d)
		if err != nil {
			return l, err
		}
		shape := d.Shape()
		switch {
		case len(shape) == 0:
			return l, fmt.Errorf("graph: data node %s is a scalar; data need a sample axis 0", nodeName(d))
		case len(vals) == 0:
			return l, fmt.Errorf("graph: data node %s has shape %v, no elements; data need at least one sample", nodeName(d), shape)
		case l.n >= 0 && shape[0] != l.n:
			return l, fmt.Errorf("graph: data of the %s have different sample counts: %s has %d rows, %s has %d",
				levelNames[lv], nodeName(l.data[0]), l.n, nodeName(d), shape[0])
		}
		if err := checkFinite(d, what, vals); err != nil {
			return l, err
		}
		l.n = shape[0]
		l.data = append(l.data, d)
		if f32 && !indices[d] {
			l.full = append(l.full, array{f32: narrowed(vals)})
		} else {
			l.full = append(l.full, array{f64: vals})
		}
		l.rowLen = append(l.rowLen, len(vals)/shape[0])
	}
	if l.n < 0 {
		l.n = 1
	}
	return l, nil
}

// snapshotConstants copies the values of the constants the objectives
// read, after checking that every input node they read is declared.
func (p *Problem) snapshotConstants(obj Objective, r roles) error {
	readers := map[*G.Node][]string{}
	for lv, root := range []*G.Node{obj.Lower, obj.Upper} {
		for n := range p.src.reachable(root) {
			if n.Op() == nil && r[n] == "" {
				readers[n] = append(readers[n], levelNames[lv])
			}
		}
	}
	var undeclared []string
	for _, n := range p.src.order {
		switch who := readers[n]; {
		case n.Op() != nil:
		case who != nil:
			undeclared = append(undeclared, fmt.Sprintf("%s with shape %v, read by the %s", nodeName(n), n.Shape(), strings.Join(who, " and the ")))
		case r[n] == "constant":
			vals, err := valueData(n)
			if err != nil {
				return err
			}
			p.fixed[n] = append([]float64{}, vals...)
		}
	}
	if len(undeclared) > 0 {
		sort.Strings(undeclared)
		return fmt.Errorf("graph: input nodes read by an objective but declared in none of Outer, Inner, LowerData, UpperData and Constants: %s. Declare each as a variable (Outer, Inner), as data (LowerData, UpperData: samples on axis 0), or list it in Objective.Constants to keep its current value",
			strings.Join(undeclared, "; "))
	}
	return nil
}

// checkFinite returns an error naming the first non-finite element of vals,
// the values of n.
func checkFinite(n *G.Node, what string, vals []float64) error {
	// v − v is NaN for a non-finite v and 0 otherwise; four sums keep
	// the adds independent.
	var a0, a1, a2, a3 float64
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		a0 += vals[i] - vals[i]
		a1 += vals[i+1] - vals[i+1]
		a2 += vals[i+2] - vals[i+2]
		a3 += vals[i+3] - vals[i+3]
	}
	for ; i < len(vals); i++ {
		a0 += vals[i] - vals[i]
	}
	if a0+a1+a2+a3 == 0 {
		return nil
	}
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("graph: %s %s holds %v at %s", what, nodeName(n), v, elementName(n.Name(), n.Shape(), i))
		}
	}
	return nil
}

// elementName names element i (row-major) of a tensor of the given shape,
// as "name[i0,i1,...]".
func elementName(name string, shape []int, i int) string {
	idx := make([]string, len(shape))
	for a := len(shape) - 1; a >= 0; a-- {
		idx[a] = strconv.Itoa(i % max(shape[a], 1))
		i /= max(shape[a], 1)
	}
	return name + "[" + strings.Join(idx, ",") + "]"
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
