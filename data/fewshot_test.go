package data

import (
	"slices"
	"strings"
	"testing"
)

func TestRotate(t *testing.T) {
	for _, test := range []struct {
		side, quarter int
		src, want     []float64
	}{
		// 1 2      2 4      4 3      3 1
		// 3 4  ->  1 3  ->  2 1  ->  4 2
		{2, 0, []float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}},
		{2, 1, []float64{1, 2, 3, 4}, []float64{2, 4, 1, 3}},
		{2, 2, []float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}},
		{2, 3, []float64{1, 2, 3, 4}, []float64{3, 1, 4, 2}},
		{2, -1, []float64{1, 2, 3, 4}, []float64{3, 1, 4, 2}},
		{2, 5, []float64{1, 2, 3, 4}, []float64{2, 4, 1, 3}},
		// 1 2 3      3 6 9
		// 4 5 6  ->  2 5 8   (counter-clockwise)
		// 7 8 9      1 4 7
		{3, 1, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{3, 6, 9, 2, 5, 8, 1, 4, 7}},
		{3, 2, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{3, 3, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{7, 4, 1, 8, 5, 2, 9, 6, 3}},
		{1, 1, []float64{5}, []float64{5}},
	} {
		dst := make([]float64, len(test.src))
		Rotate(dst, test.src, test.side, test.quarter)
		if !slices.Equal(dst, test.want) {
			t.Errorf("Rotate(%v, side %d, %d quarter turns) = %v, want %v", test.src, test.side, test.quarter, dst, test.want)
		}
	}
	// Four quarter turns, or one then three, give the identity.
	src := make([]float64, 28*28)
	for i := range src {
		src[i] = float64(i)
	}
	a, b := make([]float64, len(src)), make([]float64, len(src))
	Rotate(a, src, 28, 1)
	Rotate(b, a, 28, 3)
	if !slices.Equal(b, src) {
		t.Errorf("a quarter turn and three more is not the identity")
	}
}

func TestSplitClasses(t *testing.T) {
	groups, err := SplitClasses(10, 1, 6, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for k, want := range []int{6, 2, 2} {
		if len(groups[k]) != want || !slices.IsSorted(groups[k]) {
			t.Errorf("group %d = %v, want %d sorted classes", k, groups[k], want)
		}
		all = append(all, groups[k]...)
	}
	if slices.Sort(all); !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("groups %v do not partition 0..9", groups)
	}
	if again, _ := SplitClasses(10, 1, 6, 2, 2); !slices.Equal(again[2], groups[2]) {
		t.Errorf("SplitClasses is not deterministic")
	}
	if _, err := SplitClasses(10, 1, 6, 5); err == nil {
		t.Errorf("sizes summing to 11 of 10: no error")
	}
}

// imageSet returns a data set of n 3×3 images, 10 classes, where every image
// is distinct and its first pixel encodes its index.
func imageSet(n int) *Dataset {
	ds := &Dataset{X: make([]float64, 9*n), Labels: make([]int, n), N: n, D: 9, Classes: 10, Height: 3, Width: 3}
	for i := range n {
		for j := range 9 {
			ds.X[9*i+j] = float64(1000*i + j)
		}
		ds.Labels[i] = i % 10
	}
	return ds
}

func TestTaskSampler(t *testing.T) {
	ds := imageSet(200) // 20 images a class
	groups, err := SplitClasses(10, 3, 6, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	const ways, shots, queries = 5, 2, 3
	rowOf := make(map[[9]float64]int) // image -> index, for every rotation
	for i := range ds.N {
		for q := range 4 {
			var img [9]float64
			Rotate(img[:], ds.Row(i), 3, q)
			rowOf[img] = 4*i + q
		}
	}
	for split, base := range groups {
		s, err := NewTaskSampler(ds, base, min(ways, 4*len(base)), shots, queries, 9)
		if err != nil {
			t.Fatal(err)
		}
		var task *Task
		for range 50 {
			task = s.Next(task)
			n := task.Ways
			if len(task.Classes) != n || len(task.SupportX) != n*shots*9 || len(task.SupportY) != n*shots || len(task.QueryX) != n*queries*9 || len(task.QueryY) != n*queries {
				t.Fatalf("task sizes wrong: %+v", task)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(task.Classes)))) != n {
				t.Fatalf("repeated classes %v", task.Classes)
			}
			used := make(map[int]bool) // image indices of one class
			check := func(x []float64, y []int, per int, set string) {
				for i, label := range y {
					if label != i/per {
						t.Fatalf("%s label %d is %d, want %d", set, i, label, i/per)
					}
					var img [9]float64
					copy(img[:], x[9*i:9*i+9])
					code, ok := rowOf[img]
					if !ok {
						t.Fatalf("%s sample %d is no rotation of an image", set, i)
					}
					c := task.Classes[label]
					row, quarter := code/4, code%4
					if !slices.Contains(base, c/4) {
						t.Fatalf("split %d: class %d of base %d not in %v", split, c, c/4, base)
					}
					if ds.Labels[row] != c/4 || quarter != c%4 {
						t.Fatalf("%s sample %d is image %d (class %d) turned %d times, want class %d turned %d times", set, i, row, ds.Labels[row], quarter, c/4, c%4)
					}
					if key := 1000*label + row; used[key] {
						t.Fatalf("image %d used twice in class %d", row, label)
					} else {
						used[key] = true
					}
				}
			}
			check(task.SupportX, task.SupportY, shots, "support")
			check(task.QueryX, task.QueryY, queries, "query")
		}
	}

	// Deterministic for a seed.
	a, _ := NewTaskSampler(ds, groups[0], 5, 1, 1, 4)
	b, _ := NewTaskSampler(ds, groups[0], 5, 1, 1, 4)
	for range 5 {
		ta, tb := a.Next(nil), b.Next(nil)
		if !slices.Equal(ta.Classes, tb.Classes) || !slices.Equal(ta.SupportX, tb.SupportX) || !slices.Equal(ta.QueryX, tb.QueryX) {
			t.Fatalf("TaskSampler is not deterministic")
		}
	}
}

func TestNewTaskSamplerErrors(t *testing.T) {
	ds := imageSet(50) // 5 images a class
	flat := toy(50, 10)
	for _, test := range []struct {
		name                 string
		ds                   *Dataset
		base                 []int
		ways, shots, queries int
		want                 string
	}{
		{"not images", flat, []int{0, 1}, 2, 1, 1, "square images"},
		{"zero ways", ds, []int{0, 1}, 0, 1, 1, "0 ways"},
		{"too many ways", ds, []int{0, 1}, 9, 1, 1, "only 8 rotated classes"},
		{"class out of range", ds, []int{0, 10}, 2, 1, 1, "base class 10 outside"},
		{"repeated class", ds, []int{3, 3}, 2, 1, 1, "base class 3 repeated"},
		{"too few images", ds, []int{0, 1}, 2, 3, 3, "has 5 samples, want at least 6"},
	} {
		if _, err := NewTaskSampler(test.ds, test.base, test.ways, test.shots, test.queries, 1); err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("%s: error %v, want one containing %q", test.name, err, test.want)
		}
	}
}

// TestTaskSamplerFashionMNIST draws 5-way 1-shot tasks from the embedded
// Fashion-MNIST subset with 24/8/8 rotated meta-train/val/test classes.
func TestTaskSamplerFashionMNIST(t *testing.T) {
	train, _, err := EmbeddedFashionMNIST()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := SplitClasses(10, 1, 6, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []int{24, 8, 8} {
		s, err := NewTaskSampler(train, groups[k], 5, 1, 15, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.pool) != want {
			t.Errorf("split %d has %d rotated classes, want %d", k, len(s.pool), want)
		}
		task := s.Next(nil)
		for _, c := range task.Classes {
			if !slices.Contains(groups[k], c/4) {
				t.Errorf("split %d task has class %d of base %d", k, c, c/4)
			}
		}
		if lo, hi := slices.Min(task.QueryX), slices.Max(task.QueryX); lo < 0 || hi > 1 {
			t.Errorf("pixels in [%v, %v]", lo, hi)
		}
	}
}

func BenchmarkTaskSampler(b *testing.B) {
	ds := imageSet(1000)
	s, err := NewTaskSampler(ds, []int{0, 1, 2, 3, 4, 5}, 5, 5, 15, 1)
	if err != nil {
		b.Fatal(err)
	}
	var task *Task
	b.ReportAllocs()
	for b.Loop() {
		task = s.Next(task)
	}
}
