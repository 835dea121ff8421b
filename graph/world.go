package graph

import (
	"fmt"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
)

// A world is the IR of one level's objective instantiated for one batch
// size: its leaves (the variables, the level's data with batch rows, and
// the seed vectors of the second-order products) and the programs compiled
// on demand from it.
type world struct {
	p       *Problem
	b       *builder
	out     *node
	x, y    []*node // variable leaves
	v, u    []*node // seeds shaped like y and like x
	data    []*node // the level's data leaves, then index
	index   *node   // the batch's sample indices (random problems)
	other   []*node // leaves of the other level's data, always whole
	dataBuf []array // gathered batch rows (batch worlds only)
	bound   []array // scratch for batchData
	progs   map[int]*program
	sweep   *sweepProgram // FixedX's lower-level program (mixedsum.go)
	// grads holds the steps of FixedX's gradient program (progGradXY at
	// fixed x) that its ∇x outputs, its ∇y outputs and both need.
	grads [3][]bool
	level int
	ir    map[*G.Node]*node // the translation of each node of the objective
}

// Program kinds.
const (
	progValue   = iota
	progGradX   // ∇x
	progGradY   // ∇y
	progGradXY  // ∇x then ∇y
	progHVP     // ∇y ⟨∇y g, v⟩
	progMixedXY // ∇x ⟨∇y g, v⟩
	progMixedYX // ∇y ⟨∇x g, u⟩
	progLinear  // ∇y ⟨∇y g, v⟩ then ∇x ⟨∇y g, v⟩, with v dynamic

	// progFixed + kind is kind's program with y and the seeds dynamic: the
	// part that depends only on x and the data is computed once (FixedX).
	progFixed = 100
)

func (p *Problem) world(lv, batch int) (*world, error) {
	key := worldKey{lv, batch}
	if w, ok := p.worlds[key]; ok {
		return w, nil
	}
	l := &p.levels[lv]
	b := newBuilder()
	b.f32 = p.f32
	w := &world{p: p, b: b, progs: map[int]*program{}, level: lv}
	leaves := map[*G.Node]*node{}
	for i, v := range p.outer {
		w.x = append(w.x, b.leaf(v.Name, v.Shape))
		w.u = append(w.u, b.leaf("u:"+v.Name, v.Shape))
		leaves[p.outerNodes[i]] = w.x[i]
	}
	for i, v := range p.inner {
		w.y = append(w.y, b.leaf(v.Name, v.Shape))
		w.v = append(w.v, b.leaf("v:"+v.Name, v.Shape))
		leaves[p.innerNodes[i]] = w.y[i]
	}
	m := l.n
	if batch >= 0 {
		m = batch
		for i := range l.full {
			w.dataBuf = append(w.dataBuf, l.full[i].make(batch*l.rowLen[i]))
		}
	}
	for _, d := range l.data {
		shape := []int(d.Shape().Clone())
		shape[0] = m
		leaves[d] = w.dataLeaf(d, shape, &w.data)
	}
	im := newImporter(b, p.src, leaves, p.fixed)
	im.training = p.training
	if p.random {
		w.index = b.leaf("sample index", []int{m})
		w.data = append(w.data, w.index)
		im.seed, im.samples, im.index = p.seed, l.n, w.index
	}
	// The other level's data, should this objective read them, enter whole.
	for _, d := range p.levels[1-lv].data {
		leaves[d] = w.dataLeaf(d, d.Shape(), &w.other)
	}
	out, err := im.node(l.root)
	if err != nil {
		if batch >= 0 {
			return nil, fmt.Errorf("%w (with a batch of %d samples%s)", err, batch, p.sampleAxisHint(lv))
		}
		return nil, err
	}
	if out.size != 1 {
		return nil, fmt.Errorf("graph: the %s has %d elements with a batch of %d samples; want a scalar", levelNames[lv], out.size, batch)
	}
	w.out = b.reshape(out, []int{})
	w.ir = im.ir
	p.worlds[key] = w
	return w, nil
}

// dataLeaf appends to leaves a leaf for the data node d with the given
// shape, in d's precision, and returns the node objectives read it as. In
// a problem computed in float32 every leaf is read as it is: its programs
// bind float32 data where they are (program.bindArray).
func (w *world) dataLeaf(d *G.Node, shape []int, leaves *[]*node) *node {
	f32 := false
	for _, l := range w.p.levels {
		for i, e := range l.data {
			f32 = f32 || e == d && l.full[i].f32 != nil
		}
	}
	if f32 && !w.p.f32 {
		*leaves = append(*leaves, w.b.leaf32(d.Name(), shape))
		return w.b.widen((*leaves)[len(*leaves)-1])
	}
	*leaves = append(*leaves, w.b.leaf(d.Name(), shape))
	return (*leaves)[len(*leaves)-1]
}

// sampleAxisHint names the constants the objective of level lv reads that
// have one row per sample of the level: data left undeclared, the usual
// cause of an objective that cannot take a batch.
func (p *Problem) sampleAxisHint(lv int) string {
	l := &p.levels[lv]
	var names []string
	for n := range p.src.reachable(l.root) {
		_, fixed := p.fixed[n]
		if s := n.Shape(); (fixed || isGorgoniaConstant(n)) && len(s) > 0 && s[0] == l.n && l.n > 1 {
			names = append(names, nodeName(n))
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("; the constant %s has %d rows, one per sample of the %s: if it holds per-sample values, declare it in %s",
		strings.Join(names, ", "), l.n, levelNames[lv], [2]string{"LowerData", "UpperData"}[lv])
}

// mustWorld returns the world of a batch after checking its indices. The
// full-data worlds were built by Compile, so an error here comes from a
// batch size the graph cannot take (a reshape to a fixed sample count, say):
// a programmer error for the caller of an oracle.
func (p *Problem) mustWorld(lv int, batch []int) *world {
	size := -1
	if batch != nil {
		if len(batch) == 0 {
			panic("graph: empty batch; pass nil for all samples")
		}
		size = len(batch)
		n := p.levels[lv].n
		for _, i := range batch {
			if i < 0 || i >= n {
				panic(fmt.Sprintf("graph: batch index %d out of range for %d samples of the %s", i, n, levelNames[lv]))
			}
		}
	}
	w, err := p.world(lv, size)
	if err != nil {
		panic(err)
	}
	return w
}

// zerosFor returns d, or zeros shaped like leaf where d is a structural zero.
func (w *world) zerosFor(d, leaf *node) *node {
	if d != nil {
		return d
	}
	return w.b.constant(leaf.shape, make([]float64, leaf.size))
}

// inner returns Σ_i ⟨a_i, s_i⟩ over the non-zero a_i, or nil.
func (w *world) inner(a, s []*node) *node {
	var sum *node
	for i := range a {
		if a[i] != nil {
			sum = w.b.add2(sum, w.b.sumAll(w.b.mul(a[i], s[i])))
		}
	}
	return sum
}

// program returns, compiling it on first use, the program of a kind.
func (w *world) program(p *Problem, kind int) *program {
	if pr, ok := w.progs[kind]; ok {
		return pr
	}
	b := w.b
	vars := append(append([]*node{}, w.x...), w.y...)
	var outs []*node
	var dynamic map[*node]bool
	fixed := kind >= progFixed
	switch kind % progFixed {
	case progValue:
		outs = []*node{w.out}
	case progGradX, progGradY, progGradXY:
		d := b.grad(w.out, vars)
		for i, leaf := range vars {
			isX := i < len(w.x)
			if k := kind % progFixed; (isX && k != progGradY) || (!isX && k != progGradX) {
				outs = append(outs, w.zerosFor(d[i], leaf))
			}
		}
	case progHVP, progMixedXY, progLinear:
		gy := b.grad(w.out, w.y)
		var d []*node
		if s := w.inner(gy, w.v); s != nil {
			d = b.grad(s, vars)
		} else {
			d = make([]*node, len(vars))
		}
		hy, mx := d[len(w.x):], d[:len(w.x)]
		if kind%progFixed != progMixedXY {
			for i, leaf := range w.y {
				outs = append(outs, w.zerosFor(hy[i], leaf))
			}
		}
		if kind%progFixed != progHVP {
			for i, leaf := range w.x {
				outs = append(outs, w.zerosFor(mx[i], leaf))
			}
		}
		if kind%progFixed == progLinear {
			dynamic = map[*node]bool{}
			for _, v := range w.v {
				dynamic[v] = true
			}
		}
	case progMixedYX:
		gx := b.grad(w.out, w.x)
		var d []*node
		if s := w.inner(gx, w.u); s != nil {
			d = b.grad(s, w.y)
		} else {
			d = make([]*node, len(w.y))
		}
		for i, leaf := range w.y {
			outs = append(outs, w.zerosFor(d[i], leaf))
		}
	}
	if fixed {
		dynamic = map[*node]bool{}
		for _, l := range [][]*node{w.y, w.v, w.u} {
			for _, n := range l {
				dynamic[n] = true
			}
		}
	}
	pr := w.compile(outs, dynamic)
	w.progs[kind] = pr
	return pr
}

// gradNeed returns the steps of pr, the world's gradient program at
// fixed x, that its ∇x outputs (x), its ∇y outputs (y) or both need.
func (w *world) gradNeed(pr *program, x, y bool) []bool {
	k := b2i(y) + 2*b2i(x) - 1 // 0: ∇y, 1: ∇x, 2: both
	if w.grads[k] == nil {
		var outs []int
		if x {
			outs = seq(0, len(w.x))
		}
		if y {
			outs = append(outs, seq(len(w.x), len(w.x)+len(w.y))...)
		}
		w.grads[k] = pr.need(outs...)
	}
	return w.grads[k]
}

// compile compiles a program of the world in the problem's precision
// (Objective.Float32).
func (w *world) compile(outs []*node, dynamic map[*node]bool) *program {
	return compile(outs, dynamic, w.p.f32)
}

// batchData returns the data buffers of the batch for the data leaves pr
// reads: the full arrays for a nil batch, else the batch's rows gathered
// into the world's buffers, or into new ones when fresh is set; then the
// other level's data, whole.
func (w *world) batchData(p *Problem, pr *program, batch []int, fresh bool) []array {
	l := &p.levels[w.level]
	bufs := w.bound[:0]
	for i, d := range w.data {
		var buf array
		switch {
		case !pr.uses(d):
		case batch == nil:
			buf = l.full[i]
		default:
			row := l.rowLen[i]
			buf = w.dataBuf[i]
			if fresh {
				buf = buf.make(len(batch) * row)
			}
			for r, s := range batch {
				buf.rows(r, r+1, row).copyFrom(l.full[i].rows(s, s+1, row))
			}
		}
		bufs = append(bufs, buf)
	}
	bufs = append(bufs, p.levels[1-w.level].full...)
	w.bound = bufs
	return bufs
}

// bind binds x, y and data to pr.
func (w *world) bind(p *Problem, pr *program, x, y []float64, data []array) {
	p.checkLen(x, p.dimX, "x")
	p.checkLen(y, p.dimY, "y")
	for i, v := range p.outer {
		pr.bind(w.x[i], x[v.Offset:v.Offset+v.Size])
	}
	for i, v := range p.inner {
		pr.bind(w.y[i], y[v.Offset:v.Offset+v.Size])
	}
	w.bindData(pr, data)
}

// bindData binds the data leaves, the level's and then the other
// level's, to data (see batchData).
func (w *world) bindData(pr *program, data []array) {
	for i, d := range w.data {
		pr.bindArray(d, data[i])
	}
	for i, d := range w.other {
		pr.bindArray(d, data[len(w.data)+i])
	}
}

// bindFlat binds the flat vector s to the leaves laid out as vs.
func bindFlat(pr *program, seeds []*node, vs []Var, s []float64) {
	for i, v := range vs {
		pr.bind(seeds[i], s[v.Offset:v.Offset+v.Size])
	}
}

// call runs the program of a kind on one level at (x, y), with seed v (or
// u for MixedYX) when the kind takes one, and returns it for reading.
func (p *Problem) call(lv, kind int, x, y, seed []float64, batch []int) *program {
	w := p.mustWorld(lv, batch)
	pr := w.program(p, kind)
	w.bind(p, pr, x, y, w.batchData(p, pr, batch, false))
	switch kind {
	case progHVP, progMixedXY:
		bindFlat(pr, w.v, p.inner, p.checkLen(seed, p.dimY, "v"))
	case progMixedYX:
		bindFlat(pr, w.u, p.outer, p.checkLen(seed, p.dimX, "u"))
	}
	pr.run()
	return pr
}
