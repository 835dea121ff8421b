package graph_test

import (
	"fmt"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gobilevel/bilevel/bench"
	"github.com/gobilevel/bilevel/graph"
)

// gemmShapes are the products of BenchmarkGEMM: op(A) m×k times op(B) k×n.
var gemmShapes = []struct {
	what    string
	m, k, n int
	ta, tb  bool
}{
	{"square", 256, 256, 256, false, false},
	{"square", 512, 512, 512, false, false},
	{"square", 1024, 1024, 1024, false, false},
	{"square", 2048, 2048, 2048, false, false},
	{"square, Aᵀ", 1024, 1024, 1024, true, false},
	{"square, Bᵀ", 1024, 1024, 1024, false, true},
	{"square, AᵀBᵀ", 1024, 1024, 1024, true, true},
	{"MLP forward X·W₁", 20000, 784, 256, false, false},
	{"MLP weight gradient Xᵀ·δ", 784, 20000, 256, true, false},
	{"MLP second layer Hᵀ·δ", 256, 20000, 256, true, false},
	{"minibatch X·W₁", 128, 784, 256, false, false},
	{"1000 classes X·W", 20000, 784, 1000, false, false},
	{"1000 classes Xᵀ·(P−Y)", 784, 20000, 1000, true, false},
}

// BenchmarkGEMM times the general product of gemm.go on square and
// tall-skinny shapes in float64 and float32 — and, in a build with
// -tags openblas, OpenBLAS's dgemm and sgemm on the same operands — beside
// the peak multiply-add rate of both cores, measured in the same process
// before each shape (bench.MeasurePeak; the best rate so far, which a
// machine shared with other work lowers the least). Metrics: GFLOPS (2mnk
// per second) and peak-% (of that rate); sub-benchmarks prec/shape/impl.
//
//	go test -run '^$' -bench '^BenchmarkGEMM$' ./graph/
//	CGO_LDFLAGS=-lopenblas go test -tags openblas -run '^$' -bench '^BenchmarkGEMM$' ./graph/
func BenchmarkGEMM(b *testing.B) {
	openblas := bench.BLAS() == "netlib"
	var best bench.Peak
	for _, f32 := range []bool{false, true} {
		prec := map[bool]string{false: "f64", true: "f32"}[f32]
		for _, s := range gemmShapes {
			name := fmt.Sprintf("%s/%dx%dx%d%s", prec, s.m, s.k, s.n, map[[2]bool]string{{true, false}: "-At", {false, true}: "-Bt", {true, true}: "-AtBt"}[[2]bool{s.ta, s.tb}])
			peak := bench.MeasurePeak(3)
			best.F64All, best.F32All = max(best.F64All, peak.F64All), max(best.F32All, peak.F32All)
			rate := best.F64All
			if f32 {
				rate = best.F32All
			}
			run := func(impl string, op func()) {
				b.Run(name+"/"+impl, func(b *testing.B) {
					op()
					for b.Loop() {
						op()
					}
					gflops := 2 * float64(s.m) * float64(s.k) * float64(s.n) * float64(b.N) / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(gflops, "GFLOPS")
					if rate > 0 {
						b.ReportMetric(100*gflops*1e9/rate, "peak-%")
					}
				})
			}
			if f32 {
				a, bb, c := gemmOperands[float32](s.m*s.k), gemmOperands[float32](s.k*s.n), make([]float32, s.m*s.n)
				run("ours", func() { graph.Gemm32(c, a, bb, s.m, s.n, s.k, s.ta, s.tb) })
				if openblas {
					ga, gb := blasGeneral32(a, s.m, s.k, s.ta), blasGeneral32(bb, s.k, s.n, s.tb)
					gc := blas32.General{Rows: s.m, Cols: s.n, Stride: s.n, Data: c}
					run("openblas", func() { blas32.Gemm(trans(s.ta), trans(s.tb), 1, ga, gb, 0, gc) })
					time.Sleep(parkOpenBLAS)
				}
				continue
			}
			a, bb, c := gemmOperands[float64](s.m*s.k), gemmOperands[float64](s.k*s.n), make([]float64, s.m*s.n)
			run("ours", func() { graph.Gemm64(c, a, bb, s.m, s.n, s.k, s.ta, s.tb) })
			if openblas {
				ga, gb := blasGeneral64(a, s.m, s.k, s.ta), blasGeneral64(bb, s.k, s.n, s.tb)
				gc := blas64.General{Rows: s.m, Cols: s.n, Stride: s.n, Data: c}
				run("openblas", func() { blas64.Gemm(trans(s.ta), trans(s.tb), 1, ga, gb, 0, gc) })
				time.Sleep(parkOpenBLAS)
			}
		}
	}
}

// parkOpenBLAS is the time OpenBLAS's threads are given after its runs to
// stop spinning (about 2^28 cycles), so that they do not take a core from
// the next measurement.
const parkOpenBLAS = 500 * time.Millisecond

// BenchmarkPeakFMA reports the peak rates of bench.MeasurePeak, in GFLOPS.
func BenchmarkPeakFMA(b *testing.B) {
	var p bench.Peak
	for b.Loop() {
		p = bench.MeasurePeak(3)
	}
	b.ReportMetric(p.F64One/1e9, "f64-1core-GFLOPS")
	b.ReportMetric(p.F64All/1e9, "f64-all-GFLOPS")
	b.ReportMetric(p.F32One/1e9, "f32-1core-GFLOPS")
	b.ReportMetric(p.F32All/1e9, "f32-all-GFLOPS")
}

func gemmOperands[T float32 | float64](n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(i%17) - 8
	}
	return v
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// blasGeneral64 returns the row-major rows×cols matrix op(x) as blas64 sees
// it: x itself, cols×rows when transposed.
func blasGeneral64(x []float64, rows, cols int, t bool) blas64.General {
	if t {
		rows, cols = cols, rows
	}
	return blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: x}
}

func blasGeneral32(x []float32, rows, cols int, t bool) blas32.General {
	if t {
		rows, cols = cols, rows
	}
	return blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: x}
}
