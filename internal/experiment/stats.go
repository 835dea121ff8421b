package experiment

import (
	"fmt"
	"math"
	"sort"
)

// Summary is a figure over seeds: the median of the finite values and a
// distribution-free confidence interval for the population median, the
// order-statistic interval [x_(j), x_(n+1−j)] of the sorted values. Its
// coverage does not depend on the distribution of the values:
//
//	P(x_(j) ≤ median ≤ x_(n+1−j)) = 1 − 2·P(Binomial(n, ½) ≤ j − 1),
//
// and j is the largest index whose coverage is at least 95%. For n = 10
// that is [x_(2), x_(9)] with coverage 97.9%; for n = 20, [x_(6), x_(15)]
// with 95.9%. Below n = 6 no interval reaches 95%: Lo and Hi are then the
// smallest and largest value and Coverage says how much less than 95% they
// cover (93.8% for n = 5, 50% for n = 2).
type Summary struct {
	// N is the number of finite values; failed runs (NaN) are left out.
	N int
	// Median is the sample median (NaN when N = 0).
	Median float64
	// Lo and Hi bound the interval; Coverage is its exact coverage
	// probability for the median (0 when N = 0).
	Lo, Hi, Coverage float64
}

// Summarize returns the Summary of vals (not modified); NaN and infinite
// values are left out.
func Summarize(vals []float64) Summary {
	var v []float64
	for _, x := range vals {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	n := len(v)
	if n == 0 {
		return Summary{Median: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	sort.Float64s(v)
	s := Summary{N: n, Median: MedianOf(v)}
	j, cov := 1, medianCoverage(n, 1)
	for j+1 <= (n+1)/2 {
		c := medianCoverage(n, j+1)
		if c < 0.95 {
			break
		}
		j, cov = j+1, c
	}
	s.Lo, s.Hi, s.Coverage = v[j-1], v[n-j], cov
	return s
}

// medianCoverage is 1 − 2·P(Binomial(n, ½) ≤ j − 1), the probability that
// [x_(j), x_(n+1−j)] holds the median of a continuous distribution.
func medianCoverage(n, j int) float64 {
	// P(B ≤ j−1) = Σ_{i<j} C(n, i) / 2ⁿ, summed in logarithms so that
	// large n does not overflow.
	tail := 0.0
	for i := range j {
		lc, _ := math.Lgamma(float64(n + 1))
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		tail += math.Exp(lc - a - b - float64(n)*math.Ln2)
	}
	return 1 - 2*tail
}

// Format formats s as "median [lo, hi]" with the precision of format
// (say "%.3g"), followed by the coverage when it is below 95% ("(n = 3,
// 75% range)").
func (s Summary) Format(format string) string {
	if s.N == 0 {
		return "—"
	}
	out := fmt.Sprintf(format+" ["+format+", "+format+"]", s.Median, s.Lo, s.Hi)
	if s.Coverage < 0.95 {
		out += fmt.Sprintf(" (n = %d: range, %.0f%% coverage)", s.N, 100*s.Coverage)
	}
	return out
}

// AddResult adds s to a program's result line under key (the median),
// key_lo and key_hi (the interval), rounded to 4 significant digits.
func (s Summary) AddResult(result map[string]any, key string) {
	if s.N == 0 {
		return
	}
	result[key] = roundSig(s.Median)
	result[key+"_lo"] = roundSig(s.Lo)
	result[key+"_hi"] = roundSig(s.Hi)
}

// roundSig rounds v to 4 significant digits.
func roundSig(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	e := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}
