package data

import (
	"fmt"
	"slices"
)

// Rotate stores in dst the side×side row-major image src rotated
// counter-clockwise by quarter·90 degrees; quarter is taken modulo 4 and may
// be negative. dst and src must have length side·side and must not overlap.
//
// A counter-clockwise quarter turn maps pixel (row i, column j) of the result
// to pixel (j, side−1−i) of src: the right column of src becomes the top row.
func Rotate(dst, src []float64, side, quarter int) {
	n := side
	if len(dst) != n*n || len(src) != n*n {
		panic(fmt.Sprintf("data: Rotate: lengths %d and %d, want %d", len(dst), len(src), n*n))
	}
	switch (quarter%4 + 4) % 4 {
	case 0:
		copy(dst, src)
	case 1:
		for i := range n {
			for j := range n {
				dst[i*n+j] = src[j*n+n-1-i]
			}
		}
	case 2:
		for i := range n {
			for j := range n {
				dst[i*n+j] = src[(n-1-i)*n+n-1-j]
			}
		}
	case 3:
		for i := range n {
			for j := range n {
				dst[i*n+j] = src[(n-1-j)*n+i]
			}
		}
	}
}

// SplitClasses partitions the base classes 0..classes-1 at random with the
// seed into disjoint groups of the given sizes, each sorted, for instance
// into meta-train, meta-validation and meta-test classes:
// SplitClasses(10, seed, 6, 2, 2) for Fashion-MNIST gives 6, 2 and 2 base
// classes, that is 24, 8 and 8 rotated classes. The sizes may sum to less
// than classes.
func SplitClasses(classes int, seed uint64, sizes ...int) ([][]int, error) {
	total := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("data: SplitClasses: negative size %d", s)
		}
		total += s
	}
	if classes < 0 || total > classes {
		return nil, fmt.Errorf("data: SplitClasses: sizes %v sum to %d, more than %d classes", sizes, total, classes)
	}
	perm := newRNG(seed, streamSplit).perm(classes)
	groups := make([][]int, len(sizes))
	for k, s := range sizes {
		groups[k] = slices.Clone(perm[:s])
		perm = perm[s:]
		slices.Sort(groups[k])
	}
	return groups, nil
}

// Task is an N-way K-shot classification task. Its N classes are numbered
// 0..N-1 in SupportY and QueryY; Classes[j] identifies task class j as the
// rotated class 4·b + q: base class b of the Dataset turned counter-clockwise
// by q·90 degrees.
//
// The support set holds K samples of each class, class 0 first, and the
// query set Q samples of each class in the same layout: sample i of the
// support set is SupportX[i*D : (i+1)*D] with label SupportY[i] = i / K.
type Task struct {
	Ways, Shots, Queries int
	D                    int

	Classes  []int
	SupportX []float64 // (Ways·Shots)×D, row-major
	SupportY []int
	QueryX   []float64 // (Ways·Queries)×D, row-major
	QueryY   []int
}

// TaskSampler draws N-way K-shot tasks from the square images of a Dataset.
// Its classes are the given base classes times the four rotations by 0, 90,
// 180 and 270 degrees, so 4·len(base) classes in all; give disjoint base
// classes (from SplitClasses) to the meta-train, meta-validation and
// meta-test samplers so that no rotation of a test class is seen in training.
//
// Each task draws N distinct rotated classes uniformly, then, for each,
// K + Q distinct images of its base class uniformly without replacement, the
// first K for the support set and the rest for the query set, rotated by the
// class's angle. Two rotated classes of one base class may share an image.
// A TaskSampler is deterministic for a seed and not safe for concurrent use.
type TaskSampler struct {
	ds                   *Dataset
	side                 int
	ways, shots, queries int
	base                 []int   // the base classes
	pool                 []int   // rotated classes 4·k + q, k indexing base
	byBase               [][]int // sample indices of each base class
	r                    *rng
}

// NewTaskSampler returns a TaskSampler of tasks with ways classes, shots
// support and queries query samples per class, drawn from the images of ds
// whose labels are in base. It returns an error if the images of ds are not
// square, a base class is out of range or repeated, there are fewer than
// ways rotated classes, or a base class has fewer than shots + queries
// samples.
func NewTaskSampler(ds *Dataset, base []int, ways, shots, queries int, seed uint64) (*TaskSampler, error) {
	if ds.Height <= 0 || ds.Height != ds.Width {
		return nil, fmt.Errorf("data: NewTaskSampler: images of %d×%d pixels, want square images", ds.Height, ds.Width)
	}
	if ways <= 0 || shots <= 0 || queries < 0 {
		return nil, fmt.Errorf("data: NewTaskSampler: %d ways, %d shots, %d queries", ways, shots, queries)
	}
	if ways > 4*len(base) {
		return nil, fmt.Errorf("data: NewTaskSampler: %d ways but only %d rotated classes", ways, 4*len(base))
	}
	pos := make(map[int]int, len(base))
	for k, b := range base {
		if b < 0 || b >= ds.Classes {
			return nil, fmt.Errorf("data: NewTaskSampler: base class %d outside [0, %d)", b, ds.Classes)
		}
		if _, dup := pos[b]; dup {
			return nil, fmt.Errorf("data: NewTaskSampler: base class %d repeated", b)
		}
		pos[b] = k
	}
	s := &TaskSampler{
		ds: ds, side: ds.Height,
		ways: ways, shots: shots, queries: queries,
		base:   slices.Clone(base),
		byBase: make([][]int, len(base)),
		r:      newRNG(seed, streamTasks),
	}
	for k := range base {
		for q := range 4 {
			s.pool = append(s.pool, 4*k+q)
		}
	}
	for i, l := range ds.Labels {
		if k, ok := pos[l]; ok {
			s.byBase[k] = append(s.byBase[k], i)
		}
	}
	for k, members := range s.byBase {
		if len(members) < shots+queries {
			return nil, fmt.Errorf("data: NewTaskSampler: base class %d has %d samples, want at least %d", base[k], len(members), shots+queries)
		}
	}
	return s, nil
}

// Next draws a task into dst, reusing its storage, and returns it. If dst is
// nil a new Task is allocated.
func (s *TaskSampler) Next(dst *Task) *Task {
	if dst == nil {
		dst = new(Task)
	}
	d := s.ds.D
	n, k, q := s.ways, s.shots, s.queries
	dst.Ways, dst.Shots, dst.Queries, dst.D = n, k, q, d
	dst.Classes = resize(dst.Classes, n)
	dst.SupportX = resize(dst.SupportX, n*k*d)
	dst.SupportY = resize(dst.SupportY, n*k)
	dst.QueryX = resize(dst.QueryX, n*q*d)
	dst.QueryY = resize(dst.QueryY, n*q)

	// Partial Fisher–Yates shuffles pick distinct classes and images.
	for j := range n {
		i := j + s.r.intn(len(s.pool)-j)
		s.pool[j], s.pool[i] = s.pool[i], s.pool[j]
	}
	for j, c := range s.pool[:n] {
		b, quarter := c/4, c%4
		dst.Classes[j] = 4*s.base[b] + quarter
		members := s.byBase[b]
		for i := range k + q {
			m := i + s.r.intn(len(members)-i)
			members[i], members[m] = members[m], members[i]
			var out []float64
			if i < k {
				out = dst.SupportX[(j*k+i)*d : (j*k+i+1)*d]
				dst.SupportY[j*k+i] = j
			} else {
				out = dst.QueryX[(j*q+i-k)*d : (j*q+i-k+1)*d]
				dst.QueryY[j*q+i-k] = j
			}
			Rotate(out, s.ds.Row(members[i]), s.side, quarter)
		}
	}
	return dst
}

// resize returns s with length n, reusing its storage when large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
