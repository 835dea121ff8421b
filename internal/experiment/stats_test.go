package experiment

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSummarize: the order-statistic interval for the median picks
// [x_(2), x_(9)] for 10 values (coverage 1 − 2·11/1024 = 97.85%),
// [x_(6), x_(15)] for 20 (95.86%), and the range below 6 values (93.75%
// for 5, 50% for 2); NaN and ±Inf are left out; and the stated coverage is
// the one observed: over 4000 draws of 10 values from an exponential
// distribution (median ln 2) the interval holds the median 97.85% ± 0.7%
// of the time (3.3 standard errors).
func TestSummarize(t *testing.T) {
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(n - i) // reversed: Summarize sorts a copy
		}
		return v
	}
	for _, c := range []struct {
		vals           []float64
		n              int
		med, lo, hi    float64
		coverage, tolC float64
	}{
		{seq(10), 10, 5.5, 2, 9, 1 - 2*11.0/1024, 1e-12},
		{seq(20), 20, 10.5, 6, 15, 1 - 2*21700.0/1048576, 1e-12},
		{seq(5), 5, 3, 1, 5, 1 - 2.0/32, 1e-12},
		{[]float64{2, math.NaN(), 1, math.Inf(1)}, 2, 1.5, 1, 2, 0.5, 1e-12},
	} {
		in := append([]float64(nil), c.vals...)
		s := Summarize(c.vals)
		if s.N != c.n || s.Median != c.med || s.Lo != c.lo || s.Hi != c.hi || math.Abs(s.Coverage-c.coverage) > c.tolC {
			t.Errorf("Summarize(%v) = %+v, want n %d median %v [%v, %v] coverage %v", in, s, c.n, c.med, c.lo, c.hi, c.coverage)
		}
		for i := range in {
			if math.Float64bits(in[i]) != math.Float64bits(c.vals[i]) {
				t.Errorf("Summarize modified its input")
			}
		}
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) || s.Format("%.3g") != "—" {
		t.Errorf("Summarize(nil) = %+v", s)
	}
	if got := Summarize(seq(10)).Format("%.3g"); got != "5.5 [2, 9]" {
		t.Errorf("Format = %q", got)
	}
	if got := Summarize(seq(3)).Format("%.2g"); !strings.Contains(got, "n = 3: range, 75% coverage") {
		t.Errorf("Format of 3 values = %q, want the range and its coverage", got)
	}
	r := map[string]any{}
	Summarize([]float64{0.123456, 0.2, 0.3}).AddResult(r, "acc")
	if r["acc"] != 0.2 || r["acc_lo"] != 0.1235 || r["acc_hi"] != 0.3 {
		t.Errorf("AddResult: %v", r)
	}

	rnd := rand.New(rand.NewPCG(1, 2))
	const draws = 4000
	hits := 0
	v := make([]float64, 10)
	for range draws {
		for i := range v {
			v[i] = rnd.ExpFloat64()
		}
		if s := Summarize(v); s.Lo <= math.Ln2 && math.Ln2 <= s.Hi {
			hits++
		}
	}
	want := 1 - 2*11.0/1024
	se := math.Sqrt(want * (1 - want) / draws)
	if got := float64(hits) / draws; math.Abs(got-want) > 3.3*se {
		t.Errorf("observed coverage %.4f, stated %.4f (± %.4f)", got, want, 3.3*se)
	}
}
