package bench

import (
	"runtime"
	"sync"
	"time"
)

// Peak is the multiply-add rate of this machine's vector units, measured by
// a loop of independent register-only multiply-adds in assembly
// (peak_amd64.s): the rate no product kernel can exceed. Rates are in
// flop/s, two per multiply-add, with one goroutine (one core) and with
// one goroutine per core at once.
type Peak struct {
	// ISA is the instruction set measured: "AVX-512", "AVX2", or "" where
	// there is no loop for this build (not amd64, or the purego tag) and
	// every rate is 0.
	ISA            string
	F64One, F64All float64
	F32One, F32All float64
}

// peakLoop runs n rounds of a multiply-add loop of some precision; a round
// is flops floating-point operations.
type peakLoop struct {
	run   func(n int)
	flops float64
}

// MeasurePeak measures the peak rates of the widest vector unit this build
// uses, best of reps timings of about 20 ms each.
func MeasurePeak(reps int) Peak {
	isa, f64, f32 := peakLoops()
	if isa == "" {
		return Peak{}
	}
	all := runtime.GOMAXPROCS(0)
	return Peak{ISA: isa,
		F64One: peakRate(f64, 1, reps), F64All: peakRate(f64, all, reps),
		F32One: peakRate(f32, 1, reps), F32All: peakRate(f32, all, reps)}
}

// peakRate returns the best rate of loop run on workers goroutines at once,
// each locked to its thread, over reps timings.
func peakRate(loop peakLoop, workers, reps int) float64 {
	// Rounds for about 20 ms, from a first short timing.
	n := 1 << 14
	t := time.Now()
	loop.run(n)
	if el := time.Since(t).Seconds(); el > 0 {
		n = max(n, int(float64(n)*0.02/el))
	}
	best := 0.0
	for range reps {
		var start, done sync.WaitGroup
		start.Add(1)
		done.Add(workers)
		for range workers {
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				defer done.Done()
				start.Wait()
				loop.run(n)
			}()
		}
		t := time.Now()
		start.Done()
		done.Wait()
		best = max(best, float64(workers)*float64(n)*loop.flops/time.Since(t).Seconds())
	}
	return best
}
