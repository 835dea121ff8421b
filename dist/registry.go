package dist

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gobilevel/bilevel/graph"
)

// Range is the samples [Start, End) of one level held by a shard, as
// global indices into the level's Total samples. Total 0 means the level
// has no per-sample data (its objective declares none): it is not split,
// and Start = End = 0.
type Range struct {
	Start, End, Total int
}

// Len returns the number of samples of the range.
func (r Range) Len() int { return r.End - r.Start }

// Shard tells a Constructor which part of the data to hold: the samples
// Lower of the lower-level data and Upper of the upper-level data. It is
// shard Index of Count.
type Shard struct {
	Index, Count int
	Lower, Upper Range
}

// Constructor builds the objective of a model on one shard of its data.
// params are the bytes of Settings.Params, passed unchanged (JSON, say).
//
// The objective must be the model's whole-data objective restricted to the
// shard's samples: the same variables (names, shapes, starting values) on
// every shard; as data of the lower (upper) level, exactly the rows
// sh.Lower (sh.Upper) of the whole data, in order; each objective a mean
// over its level's samples plus terms that do not depend on the samples.
// A per-sample variable (one weight per training sample, say) keeps its
// global size and is read by the global sample index. Worker checks what
// it can: the sample counts, that neither objective reads the other
// level's data, that the layout agrees across shards, and that each
// objective is a mean over samples (by splitting a small batch in two).
type Constructor func(params []byte, sh Shard) (graph.Objective, error)

var registry = struct {
	sync.RWMutex
	m map[string]Constructor
}{m: map[string]Constructor{}}

// Register makes a model available to the workers of this program under
// name, which is what Settings.Model names. Call it from an init function
// or at the top of main, before ServeIfWorker. Register panics if name is
// not 1 to 64 letters, digits, '_' or '-', if c is nil or if name is taken
// (MetaModel always is): those are programmer errors.
func Register(name string, c Constructor) {
	if err := checkName(name); err != nil {
		panic("dist: Register: " + err.Error())
	}
	if c == nil {
		panic("dist: Register of a nil Constructor for model " + name)
	}
	if name == MetaModel {
		panic("dist: Register: model name " + MetaModel + " is reserved for meta-learning tasks")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.m[name]; ok {
		panic("dist: Register called twice for model " + name)
	}
	registry.m[name] = c
}

// Models returns the names of the registered models, sorted.
func Models() []string {
	registry.RLock()
	defer registry.RUnlock()
	var names []string
	for n := range registry.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func lookup(name string) (Constructor, error) {
	registry.RLock()
	defer registry.RUnlock()
	c, ok := registry.m[name]
	if !ok {
		return nil, fmt.Errorf("no model %q is registered in this program (it has %v): call dist.Register in the worker's program", name, Models())
	}
	return c, nil
}
