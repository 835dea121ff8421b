package data

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// toy returns a data set of n samples of dimension 2 whose sample i is
// (i, -i) with label i mod classes.
func toy(n, classes int) *Dataset {
	ds := &Dataset{X: make([]float64, 2*n), Labels: make([]int, n), N: n, D: 2, Classes: classes}
	for i := range n {
		ds.X[2*i], ds.X[2*i+1] = float64(i), -float64(i)
		ds.Labels[i] = i % classes
	}
	return ds
}

func TestNewDataset(t *testing.T) {
	for _, test := range []struct {
		name        string
		x           []float64
		labels      []int
		d, classes  int
		wantClasses int
		wantErr     string
	}{
		{"explicit classes", []float64{1, 2, 3, 4}, []int{0, 1}, 2, 5, 5, ""},
		{"inferred classes", []float64{1, 2, 3}, []int{0, 3, 1}, 1, 0, 4, ""},
		{"empty", nil, nil, 3, 0, 0, ""},
		{"short x", []float64{1, 2, 3}, []int{0, 1}, 2, 2, 0, "len(X) = 3"},
		{"label too large", []float64{1, 2}, []int{0, 2}, 1, 2, 0, "label 2 of sample 1"},
		{"negative label", []float64{1}, []int{-1}, 1, 3, 0, "label -1 of sample 0"},
	} {
		t.Run(test.name, func(t *testing.T) {
			ds, err := NewDataset(test.x, test.labels, test.d, test.classes)
			if test.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), test.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ds.N != len(test.labels) || ds.D != test.d || ds.Classes != test.wantClasses {
				t.Errorf("N, D, Classes = %d, %d, %d, want %d, %d, %d", ds.N, ds.D, ds.Classes, len(test.labels), test.d, test.wantClasses)
			}
		})
	}
}

func TestValidateImageShape(t *testing.T) {
	ds := toy(3, 2)
	ds.Height, ds.Width = 1, 2
	if err := ds.Validate(); err != nil {
		t.Errorf("1×2 images of D = 2: %v", err)
	}
	ds.Height, ds.Width = 2, 2
	if err := ds.Validate(); err == nil {
		t.Errorf("2×2 images of D = 2: no error")
	}
}

func TestFromIDX(t *testing.T) {
	images := &IDX{Type: IDXUint8, Dims: []int{2, 1, 2}, Bytes: []byte{0, 255, 51, 102}}
	labels := &IDX{Type: IDXUint8, Dims: []int{2}, Bytes: []byte{3, 1}}
	ds, err := FromIDX(images, labels, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := &Dataset{X: []float64{0, 1, 0.2, 0.4}, Labels: []int{3, 1}, N: 2, D: 2, Classes: 4, Height: 1, Width: 2}
	if !slices.Equal(ds.X, want.X) || !slices.Equal(ds.Labels, want.Labels) || ds.N != want.N || ds.D != want.D || ds.Classes != want.Classes || ds.Height != want.Height || ds.Width != want.Width {
		t.Errorf("FromIDX = %+v, want %+v", ds, want)
	}

	// Float images are copied unscaled; a 2-dimensional array has no shape.
	fimages := &IDX{Type: IDXFloat32, Dims: []int{1, 3}, Values: []float64{-1, 0.5, 7}}
	flabels := &IDX{Type: IDXInt32, Dims: []int{1}, Values: []float64{0}}
	ds, err = FromIDX(fimages, flabels, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.X, []float64{-1, 0.5, 7}) || ds.Classes != 2 || ds.Height != 0 {
		t.Errorf("FromIDX(float32) = %+v", ds)
	}

	for _, test := range []struct {
		name           string
		images, labels *IDX
		classes        int
		want           string
	}{
		{"vector images", &IDX{Type: IDXUint8, Dims: []int{2}, Bytes: []byte{1, 2}}, labels, 0, "want N×D"},
		{"matrix labels", images, &IDX{Type: IDXUint8, Dims: []int{2, 1}, Bytes: []byte{1, 2}}, 0, "want a vector"},
		{"count mismatch", images, &IDX{Type: IDXUint8, Dims: []int{3}, Bytes: []byte{1, 2, 3}}, 0, "2 images but 3 labels"},
		{"float labels", images, &IDX{Type: IDXFloat64, Dims: []int{2}, Values: []float64{1, 2}}, 0, "integer type"},
		{"label out of range", images, labels, 2, "label 3 of sample 0"},
	} {
		if _, err := FromIDX(test.images, test.labels, test.classes); err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("%s: error %v, want one containing %q", test.name, err, test.want)
		}
	}
}

func TestSubset(t *testing.T) {
	ds := toy(5, 3)
	sub := ds.Subset([]int{4, 0, 4})
	if want := []float64{4, -4, 0, 0, 4, -4}; !slices.Equal(sub.X, want) {
		t.Errorf("X = %v, want %v", sub.X, want)
	}
	if want := []int{1, 0, 1}; !slices.Equal(sub.Labels, want) {
		t.Errorf("Labels = %v, want %v", sub.Labels, want)
	}
	if sub.N != 3 || sub.D != 2 || sub.Classes != 3 {
		t.Errorf("N, D, Classes = %d, %d, %d, want 3, 2, 3", sub.N, sub.D, sub.Classes)
	}
	sub.X[0] = 100
	if ds.X[8] != 4 {
		t.Errorf("Subset shares storage with the original")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Subset with an index out of range did not panic")
		}
	}()
	ds.Subset([]int{5})
}

func TestOneHotAndCounts(t *testing.T) {
	ds := &Dataset{X: make([]float64, 4), Labels: []int{2, 0, 2, 1}, N: 4, D: 1, Classes: 3}
	want := []float64{
		0, 0, 1,
		1, 0, 0,
		0, 0, 1,
		0, 1, 0,
	}
	if got := ds.OneHot(nil); !slices.Equal(got, want) {
		t.Errorf("OneHot(nil) = %v, want %v", got, want)
	}
	dst := slices.Repeat([]float64{9}, 12)
	if got := ds.OneHot(dst); !slices.Equal(got, want) || &got[0] != &dst[0] {
		t.Errorf("OneHot(dst) = %v, want %v in dst", got, want)
	}
	if got, want := ds.ClassCounts(), []int{1, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("ClassCounts = %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("OneHot with a short destination did not panic")
		}
	}()
	ds.OneHot(make([]float64, 11))
}

func TestMeanStdStandardize(t *testing.T) {
	ds := &Dataset{X: []float64{1, 5, 3, 5, 5, 5}, Labels: []int{0, 0, 0}, N: 3, D: 2, Classes: 1}
	mean, std := ds.MeanStd()
	if want := []float64{3, 5}; !slices.Equal(mean, want) {
		t.Errorf("mean = %v, want %v", mean, want)
	}
	if want := []float64{math.Sqrt(8.0 / 3), 0}; !slices.Equal(std, want) {
		t.Errorf("std = %v, want %v", std, want)
	}
	ds.Standardize(mean, std)
	s := math.Sqrt(8.0 / 3)
	if want := []float64{-2 / s, 0, 0, 0, 2 / s, 0}; !slices.Equal(ds.X, want) {
		t.Errorf("standardized X = %v, want %v", ds.X, want)
	}
}

func TestRandomSplit(t *testing.T) {
	ds := toy(100, 4)
	parts, err := RandomSplit(ds, 7, 60, 30)
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].N != 60 || parts[1].N != 30 {
		t.Fatalf("sizes %d, %d, want 60, 30", parts[0].N, parts[1].N)
	}
	seen := make(map[float64]bool)
	for _, p := range parts {
		prev := -1.0
		for i := range p.N {
			v := p.X[2*i]
			if seen[v] {
				t.Errorf("sample %v in two parts", v)
			}
			if v <= prev {
				t.Errorf("samples out of order: %v after %v", v, prev)
			}
			if p.Labels[i] != int(v)%4 || p.X[2*i+1] != -v {
				t.Errorf("sample %v has a wrong row or label", v)
			}
			seen[v], prev = true, v
		}
	}
	again, _ := RandomSplit(ds, 7, 60, 30)
	other, _ := RandomSplit(ds, 8, 60, 30)
	if !slices.Equal(again[1].X, parts[1].X) {
		t.Errorf("RandomSplit is not deterministic")
	}
	if slices.Equal(other[1].X, parts[1].X) {
		t.Errorf("seeds 7 and 8 give the same split")
	}
	for _, sizes := range [][]int{{60, 41}, {-1, 2}} {
		if _, err := RandomSplit(ds, 1, sizes...); err == nil {
			t.Errorf("sizes %v: no error", sizes)
		}
	}
}

func TestBalancedIndices(t *testing.T) {
	labels := make([]int, 1000)
	for i := range labels {
		labels[i] = (i * i) % 7 % 3 // unbalanced classes 0, 1, 2
	}
	idx, err := BalancedIndices(labels, 3, 50, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 150 || !slices.IsSorted(idx) || len(slices.Compact(slices.Clone(idx))) != 150 {
		t.Fatalf("indices not 150 distinct sorted values: %v", idx)
	}
	counts := make([]int, 3)
	for _, i := range idx {
		counts[labels[i]]++
	}
	if !slices.Equal(counts, []int{50, 50, 50}) {
		t.Errorf("class counts %v, want [50 50 50]", counts)
	}
	if again, _ := BalancedIndices(labels, 3, 50, 3); !slices.Equal(again, idx) {
		t.Errorf("BalancedIndices is not deterministic")
	}
	for _, test := range []struct {
		labels            []int
		classes, perClass int
		want              string
	}{
		{[]int{0, 1, 1}, 2, 2, "class 0 has 1 samples"},
		{[]int{0, 2}, 2, 1, "label 2 of sample 1"},
		{[]int{0}, 0, 1, "classes = 0"},
	} {
		if _, err := BalancedIndices(test.labels, test.classes, test.perClass, 1); err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("BalancedIndices(%v, %d, %d): error %v, want one containing %q", test.labels, test.classes, test.perClass, err, test.want)
		}
	}
}

func TestCorruptLabels(t *testing.T) {
	const n = 20000
	src := make([]int, n)
	for i := range src {
		src[i] = i % 10
	}
	for _, test := range []struct {
		p, classes float64
		// expected fractions of resampled and changed labels
		resampled, changed float64
	}{
		{0, 10, 0, 0},
		{1, 10, 1, 0.9},
		{0.5, 10, 0.5, 0.45},
		{0.3, 2, 0.3, 0.15},
	} {
		dst := make([]int, n)
		in := slices.Clone(src)
		if test.classes == 2 {
			for i := range in {
				in[i] %= 2
			}
		}
		c, err := CorruptLabels(dst, in, int(test.classes), test.p, 42)
		if err != nil {
			t.Fatal(err)
		}
		changed, resampled := c.Count()
		// Four standard deviations of a binomial proportion.
		tol := func(q float64) float64 { return 4*math.Sqrt(q*(1-q)/n) + 1e-12 }
		if f := float64(resampled) / n; math.Abs(f-test.resampled) > tol(test.resampled) {
			t.Errorf("p = %v, %v classes: resampled fraction %v, want %v", test.p, test.classes, f, test.resampled)
		}
		if f := float64(changed) / n; math.Abs(f-test.changed) > tol(test.changed) {
			t.Errorf("p = %v, %v classes: changed fraction %v, want %v", test.p, test.classes, f, test.changed)
		}
		for i := range dst {
			switch {
			case dst[i] < 0 || dst[i] >= int(test.classes):
				t.Fatalf("label %d out of range", dst[i])
			case c.Changed[i] != (dst[i] != in[i]):
				t.Fatalf("Changed[%d] = %v for labels %d -> %d", i, c.Changed[i], in[i], dst[i])
			case c.Changed[i] && !c.Resampled[i]:
				t.Fatalf("label %d changed but not resampled", i)
			}
		}
	}

	// Deterministic, and in place gives the same result.
	a := make([]int, n)
	ca, _ := CorruptLabels(a, src, 10, 0.5, 9)
	b := slices.Clone(src)
	cb, _ := CorruptLabels(b, b, 10, 0.5, 9)
	if !slices.Equal(a, b) || !slices.Equal(ca.Changed, cb.Changed) || !slices.Equal(ca.Resampled, cb.Resampled) {
		t.Errorf("CorruptLabels in place or repeated differs")
	}

	// Bad arguments are errors that leave dst alone.
	for _, test := range []struct {
		p       float64
		classes int
		src     []int
		want    string
	}{
		{math.NaN(), 10, src, "probability NaN"}, {2, 10, src, "probability 2"}, {-0.1, 10, src, "probability -0.1"},
		{0.5, 0, src, "0 classes"}, {0.5, -3, src, "-3 classes"}, {0.5, 5, src, "label 5 of sample 5"}, {0.5, 10, []int{0, -1}, "label -1"},
	} {
		dst := make([]int, len(test.src))
		c, err := CorruptLabels(dst, test.src, test.classes, test.p, 1)
		if err == nil || c != nil || !strings.Contains(err.Error(), test.want) || slices.ContainsFunc(dst, func(l int) bool { return l != 0 }) {
			t.Errorf("CorruptLabels(p %v, %d classes): %v, %v; want an error saying %q and dst untouched", test.p, test.classes, c, err, test.want)
		}
	}
}

func TestDatasetCorrupt(t *testing.T) {
	ds := toy(1000, 10)
	noisy, c, err := ds.Corrupt(0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ds.Corrupt(math.NaN(), 1); err == nil {
		t.Error("Corrupt(NaN) accepted")
	}
	if &noisy.X[0] != &ds.X[0] {
		t.Errorf("Corrupt copied X")
	}
	for i, l := range ds.Labels {
		if l != i%10 {
			t.Fatalf("Corrupt modified the original labels")
		}
		if c.Changed[i] != (noisy.Labels[i] != l) {
			t.Fatalf("Changed[%d] wrong", i)
		}
	}
}

func TestPrecisionRecall(t *testing.T) {
	for _, test := range []struct {
		flagged, truth    []bool
		precision, recall float64
	}{
		{[]bool{true, true, false, false}, []bool{true, false, true, false}, 0.5, 0.5},
		{[]bool{true, false, false}, []bool{true, true, false}, 1, 0.5},
		{[]bool{false, false}, []bool{true, false}, math.NaN(), 0},
		{[]bool{true, false}, []bool{false, false}, 0, math.NaN()},
	} {
		p, r := PrecisionRecall(test.flagged, test.truth)
		same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
		if !same(p, test.precision) || !same(r, test.recall) {
			t.Errorf("PrecisionRecall(%v, %v) = %v, %v, want %v, %v", test.flagged, test.truth, p, r, test.precision, test.recall)
		}
	}
}
