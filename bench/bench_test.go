package bench

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/meta"
)

// BenchmarkRows times every Go row of the table (see Cases), one
// sub-benchmark per row: BenchmarkRows/large/f64/grad and so on. Besides
// ns/op, B/op and allocs/op it reports peakRSS-B, the growth of the
// process's resident set over the timed loop (see PeakStart).
//
// BENCH_TIER=light skips the heavy rows (seconds per call), heavy runs only
// them; unset runs all. BENCH_SPECS (a comma-separated subset of large,
// small, meta) restricts the problems. Light rows are called once before the timer starts; heavy rows
// are not, since Cases compiles every program beforehand.
func BenchmarkRows(b *testing.B) {
	tier := os.Getenv("BENCH_TIER")
	only := os.Getenv("BENCH_SPECS")
	want := func(name string) bool { return only == "" || strings.Contains(","+only+",", ","+name+",") }
	var cases []Case
	for _, s := range Specs {
		if !want(s.Name) {
			continue
		}
		for _, f32 := range []bool{false, true} {
			in, err := NewInstance(s, f32)
			if err != nil {
				b.Fatal(err)
			}
			cases = append(cases, in.Cases()...)
		}
	}
	if want("meta") {
		mc, err := MetaCases()
		if err != nil {
			b.Fatal(err)
		}
		cases = append(cases, mc...)
	}
	{
		for _, c := range cases {
			if (tier == "light" && c.Heavy) || (tier == "heavy" && !c.Heavy) {
				continue
			}
			b.Run(c.Name, func(b *testing.B) {
				if !c.Heavy {
					if err := c.Op(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				base := PeakStart()
				b.ResetTimer()
				for b.Loop() {
					if err := c.Op(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(PeakSince(base)), "peakRSS-B")
			})
		}
	}
}

// TestGenerator pins the generator's first values; torch_ref.py --selftest
// prints the same numbers from numpy.
func TestGenerator(t *testing.T) {
	u := Uniforms(7, 3)
	want := goldenUniforms
	for i := range want {
		if u[i] != want[i] {
			t.Errorf("Uniforms(7, 3)[%d] = %.17g, want %.17g", i, u[i], want[i])
		}
	}
	l := Labels(8, 5, 10)
	for i, w := range goldenLabels {
		if l[i] != w {
			t.Errorf("Labels(8, 5, 10)[%d] = %d, want %d", i, l[i], w)
		}
	}
	x := Symmetric(1, 1000, math.Sqrt(3))
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if m, v := s/1000, s2/1000; math.Abs(m) > 0.1 || math.Abs(v-1) > 0.15 {
		t.Errorf("Symmetric(…, √3): mean %g, variance %g; want 0 and 1", m, v)
	}
}

// TestSmallRows runs every small row once and checks the cross-check
// vectors are finite and AID and ITD agree in sign on most coordinates
// (both estimate the same hypergradient, loosely).
func TestSmallRows(t *testing.T) {
	r := map[string][]float64{}
	for _, f32 := range []bool{false, true} {
		in, err := NewInstance(Small, f32)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range in.Cases() {
			if err := c.Op(); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		}
		res, err := in.Results()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range res {
			for i, e := range v {
				if math.IsNaN(e) || math.IsInf(e, 0) {
					t.Fatalf("%s[%d] = %v", k, i, e)
				}
			}
			r[k] = v
		}
	}
	// Computing in float32 changes the oracles by float32 rounding only:
	// 100 units of 2⁻²⁴ (6.0e-6) relative to the largest element.
	for _, k := range []string{"grad", "hvp", "mixed"} {
		a, b := r[k], r["f32-"+k]
		var diff, norm float64
		for i := range a {
			diff = max(diff, math.Abs(a[i]-b[i]))
			norm = max(norm, math.Abs(a[i]))
		}
		if e := diff / norm; e == 0 || e > 100.0/(1<<24) {
			t.Errorf("%s: float32 moves it by %.1e relative", k, e)
		} else {
			t.Logf("%s: float32 moves it by %.1e relative", k, e)
		}
	}
}

// Values of Uniforms(7, 3) and Labels(8, 5, 10), the same in numpy.
var (
	goldenUniforms = []float64{0.1744736256454491, 0.7424361460311366, 0.9898142500945866}
	goldenLabels   = []int{5, 5, 4, 2, 1}
)

// TestMetaSetup checks that MetaParams fits meta.Learner's layout and the
// tasks have the declared shapes.
func TestMetaSetup(t *testing.T) {
	for _, m := range []meta.Gradient{meta.ITD, meta.AID} {
		for _, f32 := range []bool{false, true} {
			if _, err := NewMetaLearner(m, f32); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := MetaSpec
	ts := MetaTasks()
	if len(ts) != s.Tasks {
		t.Fatalf("%d tasks", len(ts))
	}
	for _, task := range ts {
		if len(task.SupportX) != s.Ways*s.Shots*task.D || len(task.QueryY) != s.Ways*s.Queries {
			t.Fatalf("task with %d support values and %d query labels", len(task.SupportX), len(task.QueryY))
		}
	}
}
