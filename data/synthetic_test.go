package data

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestLogisticDataBinary(t *testing.T) {
	for _, test := range []struct {
		n, p  int
		scale float64
		noise float64
		ones  int     // number of labels 1: ⌊n/2⌋
		sd    float64 // expected feature standard deviation
	}{
		{2000, 50, 0, 0, 1000, 1},
		{1001, 10, 0.5, 0, 500, 0.5},
		{4000, 5, 2, -1, 2000, 2},
	} {
		opts := &LogisticOptions{Scale: test.scale, Noise: test.noise}
		ds, w := LogisticData(test.n, test.p, opts, 1)
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
		if ds.N != test.n || ds.D != test.p || ds.Classes != 2 || len(w) != test.p {
			t.Fatalf("N, D, Classes, len(w) = %d, %d, %d, %d", ds.N, ds.D, ds.Classes, len(w))
		}
		if got := ds.ClassCounts()[1]; got != test.ones {
			t.Errorf("n = %d: %d labels 1, want %d", test.n, got, test.ones)
		}
		_, std := ds.MeanStd()
		for j, s := range std {
			if math.Abs(s-test.sd) > 0.1*test.sd {
				t.Errorf("feature %d has sd %v, want about %v", j, s, test.sd)
			}
		}
		// Labels follow w·x thresholded at its median, up to the noise.
		scores := make([]float64, ds.N)
		for i := range ds.N {
			scores[i] = dot(w, ds.Row(i))
		}
		med := slices.Clone(scores)
		slices.Sort(med)
		agree := 0
		for i, s := range scores {
			if (s > med[ds.N/2]) == (ds.Labels[i] == 1) {
				agree++
			}
		}
		if f := float64(agree) / float64(ds.N); f < 0.98 {
			t.Errorf("labels agree with the noiseless model on %v of samples, want at least 0.98", f)
		}
	}
	a, wa := LogisticData(100, 3, nil, 4)
	b, wb := LogisticData(100, 3, &LogisticOptions{Classes: 2, Scale: 1, Noise: 0.1}, 4)
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Labels, b.Labels) || !slices.Equal(wa, wb) {
		t.Errorf("nil options differ from the explicit defaults, or LogisticData is not deterministic")
	}
}

func TestLogisticDataMultinomial(t *testing.T) {
	const n, p, c = 3000, 4, 5
	ds, w := LogisticData(n, p, &LogisticOptions{Classes: c, Scale: 0.5}, 2)
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	if ds.Classes != c || len(w) != c*p {
		t.Fatalf("Classes = %d, len(w) = %d, want %d, %d", ds.Classes, len(w), c, c*p)
	}
	// The mean log-likelihood of the labels under the true model beats that
	// of uniform guessing, and the argmax class is the most frequent label.
	ll, agree := 0.0, 0
	for i := range n {
		x := ds.Row(i)
		s := make([]float64, c)
		for k := range s {
			s[k] = dot(w[k*p:(k+1)*p], x)
		}
		top := slices.Max(s)
		z := 0.0
		for _, v := range s {
			z += math.Exp(v - top)
		}
		ll += s[ds.Labels[i]] - top - math.Log(z)
		if s[ds.Labels[i]] == top {
			agree++
		}
	}
	if ll/n <= -math.Log(c) {
		t.Errorf("mean log-likelihood %v, not better than uniform %v", ll/n, -math.Log(c))
	}
	if f := float64(agree) / n; f < 0.4 {
		t.Errorf("label is the argmax class for %v of samples, want at least 0.4", f)
	}
}

func TestSPD(t *testing.T) {
	for _, test := range []struct {
		n    int
		cond float64
	}{
		{1, 1}, {2, 10}, {5, 1}, {20, 1e4}, {50, 100},
	} {
		a := SPD(nil, test.n, test.cond, 3)
		for i := range test.n {
			for j := range test.n {
				if a[i*test.n+j] != a[j*test.n+i] {
					t.Fatalf("n = %d: not symmetric at (%d, %d)", test.n, i, j)
				}
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(mat.NewSymDense(test.n, slices.Clone(a)), false) {
			t.Fatalf("n = %d: eigendecomposition failed", test.n)
		}
		vals := eig.Values(nil) // ascending
		for k, v := range vals {
			want := 1.0
			if test.n > 1 {
				want = math.Pow(test.cond, float64(k)/float64(test.n-1))
			}
			if math.Abs(v-want) > 1e-10*test.cond {
				t.Errorf("n = %d, cond = %v: eigenvalue %d is %v, want %v", test.n, test.cond, k, v, want)
			}
		}
		if b := SPD(make([]float64, test.n*test.n), test.n, test.cond, 3); !slices.Equal(a, b) {
			t.Errorf("n = %d: SPD is not deterministic", test.n)
		}
	}
	if a, b := SPD(nil, 4, 10, 1), SPD(nil, 4, 10, 2); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 give the same matrix")
	}
	for _, f := range []func(){
		func() { SPD(nil, 0, 1, 1) },
		func() { SPD(nil, 2, 0.5, 1) },
		func() { SPD(nil, 2, math.NaN(), 1) },
		func() { SPD(make([]float64, 3), 2, 2, 1) },
		func() { LogisticData(0, 1, nil, 1) },
		func() { LogisticData(1, 1, &LogisticOptions{Classes: 1}, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		}()
	}
}

func BenchmarkSPD(b *testing.B) {
	dst := make([]float64, 100*100)
	b.ReportAllocs()
	for b.Loop() {
		SPD(dst, 100, 1e3, 1)
	}
}
