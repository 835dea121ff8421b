package graph

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Work split across cores runs on a fixed set of worker goroutines, started
// at the first split and kept: a split then costs a channel send per part,
// not a new goroutine (whose descriptor the runtime never frees), and the
// live heap stays flat from one oracle call to the next.
var pool struct {
	once sync.Once
	jobs chan func()
}

// runParts runs f(0), …, f(parts−1), f(0) on the calling goroutine and the
// others on the workers, and returns when all are done. Parts are queued
// for the workers (a part finding the queue full runs on the calling
// goroutine). While they run, the parts count as busy cores (running), so
// that an operation inside a part does not split again: a part waiting for
// parts queued behind it would never finish.
func runParts(parts int, f func(q int)) {
	running.Add(int32(parts))
	defer running.Add(-int32(parts))
	pool.once.Do(func() {
		n := max(runtime.GOMAXPROCS(0)-1, 1)
		pool.jobs = make(chan func(), n)
		for range n {
			go func() {
				for job := range pool.jobs {
					job()
				}
			}()
		}
	})
	var wg sync.WaitGroup
	for q := 1; q < parts; q++ {
		wg.Add(1)
		job := func() {
			defer wg.Done()
			f(q)
		}
		select {
		case pool.jobs <- job:
		default:
			job()
		}
	}
	f(0)
	wg.Wait()
}

// parallelElems is the number of elements above which an elementwise
// operation is split across cores.
const parallelElems = 1 << 16

// running counts the programs executing now and the parts of splits in
// progress. When there are as many as cores (tasks run in parallel, as
// package meta does, or a split already uses every core), the operations
// of each run on its own goroutine: splitting them too would only make the
// halves wait for each other.
var running atomic.Int32

// spareCores reports whether an operation may be split across cores.
func spareCores(parts int) bool {
	return parts >= 2 && int(running.Load()) < parts
}

// splitElems runs f on ranges [lo, hi) covering [0, n) whose bounds are
// multiples of grain, in parallel when n is at least parallelElems and
// cores are spare.
func splitElems(n, grain int, f func(lo, hi int)) {
	parts := runtime.GOMAXPROCS(0)
	units := n / grain
	if n < parallelElems || !spareCores(parts) || units < parts {
		f(0, n)
		return
	}
	runParts(parts, func(q int) {
		lo, hi := units*q/parts*grain, units*(q+1)/parts*grain
		if q == parts-1 {
			hi = n
		}
		f(lo, hi)
	})
}
