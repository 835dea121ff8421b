package graph

import (
	"runtime"
	"sync"
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
