package data

import (
	"fmt"
	"math"
	"slices"
)

// LogisticOptions configures LogisticData. The zero value, or a nil pointer,
// gives the binary data of paper 002 §4.1 with r' = 1.
type LogisticOptions struct {
	// Classes is the number of classes: 0 or 2 for the binary recipe of
	// paper 002, 3 or more for multinomial logistic data.
	Classes int

	// Scale is the standard deviation r' of every feature; 0 means 1.
	// Paper 002 uses 1 (its Fig. 1), 0.5 and 2.
	Scale float64

	// Noise is the standard deviation of the response noise of the binary
	// recipe; 0 means 0.1, the paper's value, and a negative value means no
	// noise. It is ignored for multinomial data.
	Noise float64
}

// LogisticData draws n samples of p features for logistic regression and
// returns them with the ground-truth weights w.
//
// The binary recipe (Classes 0 or 2) is that of paper 002 §4.1 (appendix
// C.1): the weight vector w ∈ R^p has independent N(0, 1) entries (the paper
// does not give its wtrue; this is our choice), each sample has independent
// N(0, r'²) features x, its response is y = w·x + 0.1z with z ~ N(0, 1), and
// its label is 1 if y is above the median of the n responses and 0 otherwise
// (the paper's ±1 labels are 2·label − 1). There are ⌊n/2⌋ labels 1.
//
// The multinomial recipe (Classes = c ≥ 3) draws a c×p row-major weight
// matrix w with N(0, 1) entries and features as above, and draws each label
// from the softmax of the c scores w·x: a true multinomial logistic model.
//
// To make training and validation sets of the same model, draw them together
// and split them, for instance with RandomSplit(ds, seed, 16000, 4000) as in
// the paper. LogisticData panics if n or p is not positive or Classes is 1 or
// negative.
func LogisticData(n, p int, opts *LogisticOptions, seed uint64) (ds *Dataset, w []float64) {
	var o LogisticOptions
	if opts != nil {
		o = *opts
	}
	if o.Classes == 0 {
		o.Classes = 2
	}
	if n <= 0 || p <= 0 || o.Classes < 2 {
		panic(fmt.Sprintf("data: LogisticData: n = %d, p = %d, %d classes", n, p, o.Classes))
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	switch {
	case o.Noise == 0:
		o.Noise = 0.1
	case o.Noise < 0:
		o.Noise = 0
	}

	r := newRNG(seed, streamLogistic)
	rows := 1
	if o.Classes > 2 {
		rows = o.Classes
	}
	w = make([]float64, rows*p)
	for i := range w {
		w[i] = r.norm()
	}
	ds = &Dataset{X: make([]float64, n*p), Labels: make([]int, n), N: n, D: p, Classes: o.Classes}
	if o.Classes == 2 {
		y := make([]float64, n)
		for i := range n {
			x := ds.Row(i)
			for j := range x {
				x[j] = o.Scale * r.norm()
				y[i] += w[j] * x[j]
			}
			y[i] += o.Noise * r.norm()
		}
		sorted := slices.Clone(y)
		slices.Sort(sorted)
		med := sorted[n/2]
		if n%2 == 0 {
			med = (sorted[n/2-1] + sorted[n/2]) / 2
		}
		for i, v := range y {
			if v > med {
				ds.Labels[i] = 1
			}
		}
		return ds, w
	}

	s := make([]float64, o.Classes)
	for i := range n {
		x := ds.Row(i)
		for j := range x {
			x[j] = o.Scale * r.norm()
		}
		top := math.Inf(-1)
		for c := range s {
			s[c] = 0
			for j, v := range x {
				s[c] += w[c*p+j] * v
			}
			top = max(top, s[c])
		}
		sum := 0.0
		for c := range s {
			s[c] = math.Exp(s[c] - top)
			sum += s[c]
		}
		u := r.float64() * sum
		label := o.Classes - 1
		for c, v := range s {
			if u < v {
				label = c
				break
			}
			u -= v
		}
		ds.Labels[i] = label
	}
	return ds, w
}

// SPD stores in dst an n×n symmetric positive definite matrix with condition
// number cond, in row-major order, and returns it. If dst is nil a new slice
// is allocated; otherwise it must have length n·n.
//
// The matrix is Q·diag(λ)·Qᵀ where Q is a uniformly (Haar) distributed random
// orthogonal matrix, from the Gram–Schmidt orthonormalization of a Gaussian
// matrix, and the eigenvalues λ_k = cond^(k/(n−1)), k = 0, ..., n−1, are
// geometrically spaced from 1 to cond. For n = 1 the matrix is [1]. The result
// is exactly symmetric. SPD panics if n is not positive or cond < 1.
func SPD(dst []float64, n int, cond float64, seed uint64) []float64 {
	if n <= 0 || !(cond >= 1) || math.IsInf(cond, 1) {
		panic(fmt.Sprintf("data: SPD: n = %d, cond = %v", n, cond))
	}
	if dst == nil {
		dst = make([]float64, n*n)
	}
	if len(dst) != n*n {
		panic(fmt.Sprintf("data: SPD: destination length %d, want %d", len(dst), n*n))
	}
	r := newRNG(seed, streamSPD)
	q := make([]float64, n*n) // rows are the orthonormal vectors
	for k := range n {
		v := q[k*n : (k+1)*n]
		for {
			for j := range v {
				v[j] = r.norm()
			}
			// Two passes of modified Gram–Schmidt keep v orthogonal to
			// working precision.
			for range 2 {
				for i := range k {
					u := q[i*n : (i+1)*n]
					d := dot(u, v)
					for j := range v {
						v[j] -= d * u[j]
					}
				}
			}
			if norm := math.Sqrt(dot(v, v)); norm > 1e-8 {
				for j := range v {
					v[j] /= norm
				}
				break
			}
		}
	}
	lambda := make([]float64, n)
	for k := range lambda {
		lambda[k] = 1
		if n > 1 {
			lambda[k] = math.Pow(cond, float64(k)/float64(n-1))
		}
	}
	for i := range n {
		for j := i; j < n; j++ {
			s := 0.0
			for k := range n {
				s += q[k*n+i] * lambda[k] * q[k*n+j]
			}
			dst[i*n+j] = s
			dst[j*n+i] = s
		}
	}
	return dst
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, v := range a {
		s += v * b[i]
	}
	return s
}
