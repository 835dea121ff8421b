package unroll

import "testing"

// benchProblem returns an allocation-free diagonal problem with d_y = d_x = n.
func benchProblem(n int) (*diagProblem, []float64, []float64) {
	p := &diagProblem{d: make([]float64, n), b: make([]float64, n)}
	x, y0 := make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		p.d[i] = 1 + float64(i%7)
		p.b[i] = float64(i%3) - 1
		x[i] = float64(i%5) / 5
	}
	return p, x, y0
}

// BenchmarkReverseSweep times Backward over T = 100 stored heavy-ball
// iterates of a 64-dimensional problem; the sweep reuses its buffers, so
// allocs/op must be 0.
func BenchmarkReverseSweep(b *testing.B) {
	const n, steps = 64, 100
	p, x, y0 := benchProblem(n)
	u := Unroller{Steps: steps, Alpha: 0.1, Momentum: 0.5}
	if err := u.Forward(p, x, y0); err != nil {
		b.Fatal(err)
	}
	dst := make([]float64, n)
	if _, err := u.Backward(dst, nil, p, nil); err != nil { // grow the scratch once
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Backward(dst, nil, p, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
}

// BenchmarkForward times the forward pass that stores the iterates.
func BenchmarkForward(b *testing.B) {
	const n, steps = 64, 100
	p, x, y0 := benchProblem(n)
	u := Unroller{Steps: steps, Alpha: 0.1, Momentum: 0.5}
	if err := u.Forward(p, x, y0); err != nil { // allocate the storage once
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := u.Forward(p, x, y0); err != nil {
			b.Fatal(err)
		}
	}
}
