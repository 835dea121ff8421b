package optim

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gobilevel/bilevel/oracle"
)

// State is everything a run carries from one outer iteration to the next.
// Methods read and write it in Iterate; Solve and Resume own its life cycle.
//
// All exported fields and the random stream survive MarshalBinary and
// UnmarshalBinary exactly, so a run resumed from a decoded State repeats the
// uninterrupted run bit for bit. Scratch buffers (Work) and the settings of
// the run (projections, sampling) are not part of the State.
type State struct {
	// X and Y are the current upper and lower variables (x_k, y_k).
	X, Y []float64
	// V is the linear-system variable v ≈ (∇yy g)⁻¹ ∇y f, warm-started across
	// iterations by AID-type methods; nil for methods without one.
	V []float64
	// Iter is the number of completed outer iterations; the next Iterate
	// performs iteration k = Iter.
	Iter int

	// XOpt and YOpt are the memories of the optimizers that update x and y.
	XOpt, YOpt OptState
	// Vecs holds a method's named vectors that carry over between
	// iterations (momentum, variance-reduced estimators). Name them
	// "<method>.<name>"; create them with Vec.
	Vecs map[string][]float64
	// Scalars holds named scalars that carry over (schedules, estimates such
	// as the curvature bound behind a default step size).
	Scalars map[string]float64
	// LowerEpoch and UpperEpoch are the positions of the shuffled-epoch
	// samplers of the two data sets (unused when sampling with replacement).
	LowerEpoch, UpperEpoch Epoch

	// Calls counts every oracle call made by the run so far.
	Calls oracle.Calls
	// Elapsed is the wall time spent in Init and Iterate so far, monitoring
	// and recording excluded.
	Elapsed time.Duration
	// Upper is the last monitored upper objective, NaN before the first.
	Upper float64

	rng *rand.Rand // the run's random stream, see Rand
	pcg *rand.PCG  // rng's source, serialized

	work   map[string][]float64
	run    *runContext
	resume *resumeInfo // set by ReadCheckpoint, used once by Resume
}

// Epoch is the state of a shuffled-epoch sampler: a permutation of the
// sample indices (replaced, never modified, at each new epoch) and the
// position of the next unused one.
type Epoch struct {
	Perm []int
	Pos  int
}

// pcgStream is the second seed word of every run's PCG.
const pcgStream = 0x9e3779b97f4a7c15

// NewState returns a State at (x0, y0), copied, with iteration 0, empty
// buffers and a random stream seeded by seed.
func NewState(x0, y0 []float64, seed uint64) *State {
	pcg := rand.NewPCG(seed, pcgStream)
	return &State{
		X:       slices.Clone(x0),
		Y:       slices.Clone(y0),
		Vecs:    map[string][]float64{},
		Scalars: map[string]float64{},
		Upper:   math.NaN(),
		rng:     rand.New(pcg),
		pcg:     pcg,
	}
}

// Rand returns the run's random stream. Methods draw everything random
// from it (Batch does), which makes a run a function of its seed. Its source
// is a PCG whose position is saved by MarshalBinary.
func (st *State) Rand() *rand.Rand { return st.rng }

// Vec returns the persistent vector called name, creating it with n zeros
// the first time. It panics if the vector exists with another length.
func (st *State) Vec(name string, n int) []float64 {
	if st.Vecs == nil {
		st.Vecs = map[string][]float64{}
	}
	v, ok := st.Vecs[name]
	if !ok {
		v = make([]float64, n)
		st.Vecs[name] = v
	}
	if len(v) != n {
		panic(fmt.Sprintf("optim: State.Vec(%q, %d): exists with length %d", name, n, len(v)))
	}
	return v
}

// Work returns a scratch vector of length n called name. Its contents at the
// start of an iteration are unspecified: a method must write it before
// reading it, because Work buffers are not saved with the State.
func (st *State) Work(name string, n int) []float64 {
	if st.work == nil {
		st.work = map[string][]float64{}
	}
	v := st.work[name]
	if cap(v) < n {
		v = make([]float64, n)
		st.work[name] = v
	}
	return v[:n]
}

// StepX moves X by the optimizer o along −grad (o's memory is XOpt) and then
// projects it onto Settings.ProjectX, if any.
func (st *State) StepX(o Optimizer, grad []float64) {
	o.Step(&st.XOpt, st.X, grad)
	st.ProjectX(st.X)
}

// StepY moves Y by the optimizer o along −grad (o's memory is YOpt) and then
// projects it onto Settings.ProjectY, if any. For methods whose y-update is
// an optimizer step rather than plain gradient descent.
func (st *State) StepY(o Optimizer, grad []float64) {
	o.Step(&st.YOpt, st.Y, grad)
	st.ProjectY(st.Y)
}

// ProjectX projects x in place onto Settings.ProjectX; without one it does
// nothing.
func (st *State) ProjectX(x []float64) {
	if st.run != nil && st.run.projX != nil {
		st.run.projX.Project(x, x)
	}
}

// ProjectY projects y in place onto Settings.ProjectY; without one it does
// nothing. Methods with a constrained lower level call it after y-updates.
func (st *State) ProjectY(y []float64) {
	if st.run != nil && st.run.projY != nil {
		st.run.projY.Project(y, y)
	}
}

// Projections returns the run's projections (Settings.ProjectX and
// ProjectY); nil means unconstrained. Methods that cannot honour one return
// an error from Init.
func (st *State) Projections() (x, y Projection) {
	if st.run == nil {
		return nil, nil
	}
	return st.run.projX, st.run.projY
}

// DataSet selects the lower-level or the upper-level data set.
type DataSet int

const (
	Lower DataSet = iota // the data set of g
	Upper                // the data set of f
)

// Sampling is how Batch draws indices.
type Sampling int

const (
	// WithReplacement draws each index uniformly and independently.
	WithReplacement Sampling = iota
	// Shuffled walks through a random permutation of the data set; when
	// fewer than size indices are left in the epoch, the rest are dropped
	// and a new permutation starts. A batch never repeats an index.
	Shuffled
)

// Batch draws a minibatch of size indices of the data set from p using the
// run's Rand and Settings.Sampling (WithReplacement when called outside
// Solve and Resume). Size 0 returns nil, the whole data set, and draws
// nothing. Methods validate sizes in Init; Batch panics if size is negative
// or larger than the data set. The returned slice is new and may be kept.
func (st *State) Batch(p oracle.Samples, set DataSet, size int) []int {
	if size == 0 {
		return nil
	}
	n, ep := p.NumLower(), &st.LowerEpoch
	if set == Upper {
		n, ep = p.NumUpper(), &st.UpperEpoch
	}
	if size < 0 || size > n {
		panic(fmt.Sprintf("optim: batch size %d outside [0, %d]", size, n))
	}
	b := make([]int, size)
	if st.run == nil || st.run.sampling == WithReplacement {
		for i := range b {
			b[i] = st.rng.IntN(n)
		}
		return b
	}
	if len(ep.Perm) != n || ep.Pos+size > n {
		// A fresh slice: permutations are never modified in place, so
		// copies of the State may share them.
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		st.rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		ep.Perm, ep.Pos = perm, 0
	}
	copy(b, ep.Perm[ep.Pos:])
	ep.Pos += size
	return b
}

// stateWire is the encoded form of a State. Vecs and Scalars are lists
// sorted by name, not gob maps: gob sizes a map by the count the input
// claims, so 20 crafted bytes could make the decoder allocate gigabytes,
// while lists grow only with the input actually read.
type stateWire struct {
	Version                int
	X, Y, V                []float64
	Iter                   int
	XOpt, YOpt             OptState
	Vecs                   []namedVec
	Scalars                []namedScalar
	LowerEpoch, UpperEpoch Epoch
	Calls                  oracle.Calls
	Elapsed                time.Duration
	Upper                  float64
	PCG                    []byte
}

type namedVec struct {
	Name string
	V    []float64
}

type namedScalar struct {
	Name string
	V    float64
}

// stateVersion 2 replaced version 1's maps by lists.
const stateVersion = 2

// MarshalBinary encodes the State (gob), including the PCG state of Rand.
// Floats are stored as their bits, so decoding gives back the same numbers.
func (st *State) MarshalBinary() ([]byte, error) {
	pcg, err := st.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	w := stateWire{
		Version: stateVersion,
		X:       st.X, Y: st.Y, V: st.V, Iter: st.Iter,
		XOpt: st.XOpt, YOpt: st.YOpt,
		LowerEpoch: st.LowerEpoch, UpperEpoch: st.UpperEpoch,
		Calls: st.Calls, Elapsed: st.Elapsed, Upper: st.Upper,
		PCG: pcg,
	}
	for _, k := range slices.Sorted(maps.Keys(st.Vecs)) {
		w.Vecs = append(w.Vecs, namedVec{k, st.Vecs[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(st.Scalars)) {
		w.Scalars = append(w.Scalars, namedScalar{k, st.Scalars[k]})
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("optim: encoding State: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalBinary replaces st by the State encoded in data.
func (st *State) UnmarshalBinary(data []byte) error {
	var w stateWire
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&w); err != nil {
		return fmt.Errorf("optim: decoding State: %w", err)
	}
	if w.Version != stateVersion {
		return fmt.Errorf("optim: decoding State: version %d, this package reads version %d", w.Version, stateVersion)
	}
	pcg := new(rand.PCG)
	if err := pcg.UnmarshalBinary(w.PCG); err != nil {
		return fmt.Errorf("optim: decoding State: random stream: %w", err)
	}
	vecs := make(map[string][]float64, len(w.Vecs))
	for _, v := range w.Vecs {
		if _, dup := vecs[v.Name]; dup {
			return fmt.Errorf("optim: decoding State: vector %q appears twice", v.Name)
		}
		vecs[v.Name] = v.V
	}
	scalars := make(map[string]float64, len(w.Scalars))
	for _, v := range w.Scalars {
		if _, dup := scalars[v.Name]; dup {
			return fmt.Errorf("optim: decoding State: scalar %q appears twice", v.Name)
		}
		scalars[v.Name] = v.V
	}
	*st = State{
		X: w.X, Y: w.Y, V: w.V, Iter: w.Iter,
		XOpt: w.XOpt, YOpt: w.YOpt,
		Vecs: vecs, Scalars: scalars,
		LowerEpoch: w.LowerEpoch, UpperEpoch: w.UpperEpoch,
		Calls: w.Calls, Elapsed: w.Elapsed, Upper: w.Upper,
		rng: rand.New(pcg), pcg: pcg,
	}
	return nil
}

// Clone returns a deep copy of st with its own random stream in the same
// position. Scratch buffers and run settings are not copied.
func (st *State) Clone() *State {
	c := new(State)
	st.copyInto(c)
	return c
}

// copyInto makes dst a deep copy of st, reusing dst's memory.
func (st *State) copyInto(dst *State) {
	dst.X = append(dst.X[:0], st.X...)
	dst.Y = append(dst.Y[:0], st.Y...)
	if st.V == nil {
		dst.V = nil
	} else {
		dst.V = append(dst.V[:0], st.V...)
	}
	dst.Iter = st.Iter
	st.XOpt.copyInto(&dst.XOpt)
	st.YOpt.copyInto(&dst.YOpt)
	if dst.Vecs == nil {
		dst.Vecs = map[string][]float64{}
	}
	for k := range dst.Vecs {
		if _, ok := st.Vecs[k]; !ok {
			delete(dst.Vecs, k)
		}
	}
	for k, v := range st.Vecs {
		dst.Vecs[k] = append(dst.Vecs[k][:0], v...)
	}
	if dst.Scalars == nil {
		dst.Scalars = map[string]float64{}
	}
	clear(dst.Scalars)
	for k, v := range st.Scalars {
		dst.Scalars[k] = v
	}
	st.LowerEpoch.copyInto(&dst.LowerEpoch)
	st.UpperEpoch.copyInto(&dst.UpperEpoch)
	dst.Calls, dst.Elapsed, dst.Upper = st.Calls, st.Elapsed, st.Upper
	if dst.pcg == nil {
		dst.pcg = new(rand.PCG)
		dst.rng = rand.New(dst.pcg)
	}
	*dst.pcg = *st.pcg
}

// copyInto shares the permutation, which Batch never modifies in place.
func (e Epoch) copyInto(dst *Epoch) { *dst = e }

// nonFinite returns the first state variable that is not finite, its index
// and value, or "" if the state is finite. Vecs are checked in name order.
func (st *State) nonFinite() (name string, i int, v float64) {
	for _, c := range []struct {
		name string
		s    []float64
	}{{"x", st.X}, {"y", st.Y}, {"v", st.V}} {
		if i := firstNonFinite(c.s); i >= 0 {
			return c.name, i, c.s[i]
		}
	}
	var keys []string
	for k, s := range st.Vecs {
		if firstNonFinite(s) >= 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if i := firstNonFinite(st.Vecs[k]); i >= 0 {
			return fmt.Sprintf("Vecs[%q]", k), i, st.Vecs[k][i]
		}
	}
	return "", -1, 0
}
