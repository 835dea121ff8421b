package data

import (
	"fmt"
	"math"
	"slices"
)

// Dataset is a labelled data set of N samples of dimension D.
//
// X is the N×D matrix of samples in row-major order: sample i is
// X[i*D : (i+1)*D]. Labels[i] is the class of sample i, in [0, Classes).
// When every sample is an image, Height and Width give its shape in pixels
// (row-major, Height·Width == D); otherwise both are zero.
type Dataset struct {
	X       []float64
	Labels  []int
	N, D    int
	Classes int

	Height, Width int
}

// NewDataset returns a Dataset with N = len(labels) samples of dimension d
// that uses x and labels without copying them. If classes is zero or
// negative, Classes is set to the largest label plus one. It returns an error
// if len(x) is not N·d or a label lies outside [0, classes).
func NewDataset(x []float64, labels []int, d, classes int) (*Dataset, error) {
	ds := &Dataset{X: x, Labels: labels, N: len(labels), D: d, Classes: classes}
	if classes <= 0 {
		ds.Classes = 0
		for _, l := range labels {
			ds.Classes = max(ds.Classes, l+1)
		}
	}
	if err := ds.Validate(); err != nil {
		return nil, err
	}
	return ds, nil
}

// Validate returns an error describing the first inconsistency of ds: a
// negative size, len(X) != N·D, len(Labels) != N, a label outside
// [0, Classes), or an image shape that does not match D.
func (ds *Dataset) Validate() error {
	switch {
	case ds.N < 0 || ds.D < 0 || ds.Classes < 0:
		return fmt.Errorf("data: negative size N=%d D=%d Classes=%d", ds.N, ds.D, ds.Classes)
	case len(ds.X) != ds.N*ds.D:
		return fmt.Errorf("data: len(X) = %d, want N·D = %d·%d", len(ds.X), ds.N, ds.D)
	case len(ds.Labels) != ds.N:
		return fmt.Errorf("data: len(Labels) = %d, want N = %d", len(ds.Labels), ds.N)
	case (ds.Height != 0 || ds.Width != 0) && (ds.Height < 0 || ds.Width < 0 || ds.Height*ds.Width != ds.D):
		return fmt.Errorf("data: image shape %d×%d does not match D = %d", ds.Height, ds.Width, ds.D)
	}
	for i, l := range ds.Labels {
		if l < 0 || l >= ds.Classes {
			return fmt.Errorf("data: label %d of sample %d outside [0, %d)", l, i, ds.Classes)
		}
	}
	return nil
}

// MaxDatasetValues is the largest number of values (samples times
// features) FromIDX and the loaders of this package accept: a Dataset holds
// them as float64, 8 bytes each, so this is 1 GiB, against 376 MB for the
// full Fashion-MNIST training set. LoadFashionMNIST checks the declared
// size in the header of the images file before it reads the payload, so
// that a small compressed file that declares a huge array is refused
// without being decompressed.
const MaxDatasetValues = 1 << 27

// FromIDX builds a Dataset from an IDX array of images (N×D, or N×H×W for
// images of H×W pixels) and an IDX vector of N integer labels. Unsigned-byte
// images are scaled by 1/255 to [0, 1]; other element types are copied
// unchanged. If classes is zero or negative, Classes is set to the largest
// label plus one. The Dataset takes 8 bytes a value: more than
// MaxDatasetValues values are an error.
func FromIDX(images, labels *IDX, classes int) (*Dataset, error) {
	if len(images.Dims) < 2 {
		return nil, fmt.Errorf("data: images have dimensions %v, want N×D or N×H×W", images.Dims)
	}
	if len(labels.Dims) != 1 {
		return nil, fmt.Errorf("data: labels have dimensions %v, want a vector", labels.Dims)
	}
	n := images.Dims[0]
	if labels.Dims[0] != n {
		return nil, fmt.Errorf("data: %d images but %d labels", n, labels.Dims[0])
	}
	switch labels.Type {
	case IDXUint8, IDXInt8, IDXInt16, IDXInt32:
	default:
		return nil, fmt.Errorf("data: labels of type %v, want an integer type", labels.Type)
	}
	if v := images.Len(); v > MaxDatasetValues {
		return nil, fmt.Errorf("data: images of dimensions %v hold %d values, more than MaxDatasetValues = %d (1 GiB as float64)", images.Dims, v, MaxDatasetValues)
	}
	d := 1
	for _, v := range images.Dims[1:] {
		d *= v
	}
	x := images.Float64s(nil)
	if images.Type == IDXUint8 {
		for i := range x {
			x[i] /= 255
		}
	}
	ls := make([]int, n)
	for i, v := range labels.Float64s(nil) {
		ls[i] = int(v)
	}
	ds, err := NewDataset(x, ls, d, classes)
	if err != nil {
		return nil, err
	}
	if len(images.Dims) == 3 {
		ds.Height, ds.Width = images.Dims[1], images.Dims[2]
	}
	return ds, nil
}

// Row returns sample i, a slice of ds.X that aliases it.
func (ds *Dataset) Row(i int) []float64 {
	return ds.X[i*ds.D : (i+1)*ds.D : (i+1)*ds.D]
}

// Subset returns a new Dataset holding copies of the samples idx[0],
// idx[1], ... in that order; an index may repeat. It panics if an index is
// out of range.
func (ds *Dataset) Subset(idx []int) *Dataset {
	sub := &Dataset{
		X:       make([]float64, len(idx)*ds.D),
		Labels:  make([]int, len(idx)),
		N:       len(idx),
		D:       ds.D,
		Classes: ds.Classes,
		Height:  ds.Height,
		Width:   ds.Width,
	}
	for k, i := range idx {
		if i < 0 || i >= ds.N {
			panic(fmt.Sprintf("data: Subset: index %d out of range [0, %d)", i, ds.N))
		}
		copy(sub.X[k*ds.D:], ds.Row(i))
		sub.Labels[k] = ds.Labels[i]
	}
	return sub
}

// OneHot stores the one-hot encoding of the labels, the N×Classes row-major
// matrix with a 1 at (i, Labels[i]) and zeros elsewhere, in dst and returns
// it. If dst is nil a new slice is allocated; otherwise it must have length
// N·Classes.
func (ds *Dataset) OneHot(dst []float64) []float64 {
	n := ds.N * ds.Classes
	if dst == nil {
		dst = make([]float64, n)
	}
	if len(dst) != n {
		panic(fmt.Sprintf("data: OneHot: destination length %d, want %d", len(dst), n))
	}
	clear(dst)
	for i, l := range ds.Labels {
		dst[i*ds.Classes+l] = 1
	}
	return dst
}

// ClassCounts returns the number of samples of each class.
func (ds *Dataset) ClassCounts() []int {
	c := make([]int, ds.Classes)
	for _, l := range ds.Labels {
		c[l]++
	}
	return c
}

// MeanStd returns the mean and the (population) standard deviation of each
// of the D features over the N samples.
func (ds *Dataset) MeanStd() (mean, std []float64) {
	mean = make([]float64, ds.D)
	std = make([]float64, ds.D)
	if ds.N == 0 {
		return mean, std
	}
	for i := range ds.N {
		for j, v := range ds.Row(i) {
			mean[j] += v
		}
	}
	for j := range mean {
		mean[j] /= float64(ds.N)
	}
	for i := range ds.N {
		for j, v := range ds.Row(i) {
			std[j] += (v - mean[j]) * (v - mean[j])
		}
	}
	for j := range std {
		std[j] = math.Sqrt(std[j] / float64(ds.N))
	}
	return mean, std
}

// Standardize replaces each feature x of every sample, in place, by
// (x - mean[j]) / std[j], where j is the feature's column. Features with a
// zero standard deviation are only centered. Use the mean and standard
// deviation of the training set (from MeanStd) for the validation and test
// sets too.
func (ds *Dataset) Standardize(mean, std []float64) {
	if len(mean) != ds.D || len(std) != ds.D {
		panic(fmt.Sprintf("data: Standardize: mean and std of lengths %d and %d, want %d", len(mean), len(std), ds.D))
	}
	for i := range ds.N {
		row := ds.Row(i)
		for j := range row {
			row[j] -= mean[j]
			if std[j] != 0 {
				row[j] /= std[j]
			}
		}
	}
}

// RandomSplit draws disjoint random subsets of ds with the given sizes, for
// instance train/validation splits: it shuffles the sample indices with the
// seed and gives the first sizes[0] to the first part, the next sizes[1] to
// the second, and so on. Within a part, samples keep their order in ds. The
// sizes may sum to less than N; the remaining samples are left out.
func RandomSplit(ds *Dataset, seed uint64, sizes ...int) ([]*Dataset, error) {
	total := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("data: RandomSplit: negative size %d", s)
		}
		total += s
	}
	if total > ds.N {
		return nil, fmt.Errorf("data: RandomSplit: sizes %v sum to %d > N = %d", sizes, total, ds.N)
	}
	perm := newRNG(seed, streamSplit).perm(ds.N)
	parts := make([]*Dataset, len(sizes))
	for k, s := range sizes {
		idx := perm[:s:s]
		perm = perm[s:]
		slices.Sort(idx)
		parts[k] = ds.Subset(idx)
	}
	return parts, nil
}

// BalancedIndices draws perClass sample indices of each of the classes
// 0..classes-1 uniformly at random without replacement, and returns the
// classes·perClass indices in increasing order. It returns an error if a
// class has fewer than perClass samples.
func BalancedIndices(labels []int, classes, perClass int, seed uint64) ([]int, error) {
	if classes <= 0 || perClass < 0 {
		return nil, fmt.Errorf("data: BalancedIndices: classes = %d, perClass = %d", classes, perClass)
	}
	byClass := make([][]int, classes)
	for i, l := range labels {
		if l < 0 || l >= classes {
			return nil, fmt.Errorf("data: BalancedIndices: label %d of sample %d outside [0, %d)", l, i, classes)
		}
		byClass[l] = append(byClass[l], i)
	}
	r := newRNG(seed, streamBalanced)
	idx := make([]int, 0, classes*perClass)
	for c, members := range byClass {
		if len(members) < perClass {
			return nil, fmt.Errorf("data: BalancedIndices: class %d has %d samples, want %d", c, len(members), perClass)
		}
		// A partial Fisher–Yates shuffle picks the first perClass.
		for i := range perClass {
			j := i + r.intn(len(members)-i)
			members[i], members[j] = members[j], members[i]
		}
		idx = append(idx, members[:perClass]...)
	}
	slices.Sort(idx)
	return idx, nil
}

// Corruption records which labels CorruptLabels touched.
//
// Resampled[i] is true when label i was redrawn, which happens with
// probability p; Changed[i] is true when the new label differs from the
// original. Changed implies Resampled, and a redrawn label stays the same
// with probability 1/classes. Changed is the mask to score a data-cleaning
// method with (see PrecisionRecall).
type Corruption struct {
	Changed   []bool
	Resampled []bool
}

// Count returns the number of changed and of resampled labels.
func (c *Corruption) Count() (changed, resampled int) {
	for i := range c.Changed {
		if c.Changed[i] {
			changed++
		}
		if c.Resampled[i] {
			resampled++
		}
	}
	return changed, resampled
}

// CorruptLabels copies src into dst and, independently for each sample with
// probability p, replaces the label by a class drawn uniformly from
// 0..classes-1, which may be the original class, as in the data hyper-cleaning
// experiments of papers 002 and 003. The expected fraction of changed labels
// is therefore p·(classes-1)/classes. dst may be src, for corruption in place;
// otherwise it must have the same length (a programmer error: it panics).
// A p that is NaN or outside [0, 1], a classes that is not positive and a
// label of src outside [0, classes) are errors, and dst is then unchanged.
func CorruptLabels(dst, src []int, classes int, p float64, seed uint64) (*Corruption, error) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("data: CorruptLabels: destination length %d, want %d", len(dst), len(src)))
	}
	if !(p >= 0 && p <= 1) {
		return nil, fmt.Errorf("data: CorruptLabels: probability %v outside [0, 1]", p)
	}
	if classes <= 0 {
		return nil, fmt.Errorf("data: CorruptLabels: %d classes, want at least 1", classes)
	}
	for i, l := range src {
		if l < 0 || l >= classes {
			return nil, fmt.Errorf("data: CorruptLabels: label %d of sample %d outside [0, %d)", l, i, classes)
		}
	}
	r := newRNG(seed, streamCorrupt)
	c := &Corruption{Changed: make([]bool, len(src)), Resampled: make([]bool, len(src))}
	for i, l := range src {
		dst[i] = l
		if r.float64() < p {
			c.Resampled[i] = true
			dst[i] = r.intn(classes)
			c.Changed[i] = dst[i] != l
		}
	}
	return c, nil
}

// Corrupt returns a copy of ds whose labels are corrupted by CorruptLabels
// with probability p and the seed, and its errors. The copy shares X with
// ds; ds is not modified.
func (ds *Dataset) Corrupt(p float64, seed uint64) (*Dataset, *Corruption, error) {
	noisy := *ds
	noisy.Labels = make([]int, ds.N)
	c, err := CorruptLabels(noisy.Labels, ds.Labels, ds.Classes, p, seed)
	if err != nil {
		return nil, nil, err
	}
	return &noisy, c, nil
}

// PrecisionRecall scores a detector of corrupted samples: flagged[i] says the
// detector flags sample i, truth[i] that it is corrupted (for example
// Corruption.Changed). Precision is the fraction of flagged samples that are
// corrupted and recall the fraction of corrupted samples that are flagged; each
// is NaN when its denominator is zero. It panics if the lengths differ.
func PrecisionRecall(flagged, truth []bool) (precision, recall float64) {
	if len(flagged) != len(truth) {
		panic(fmt.Sprintf("data: PrecisionRecall: lengths %d and %d differ", len(flagged), len(truth)))
	}
	var tp, nf, nt int
	for i := range flagged {
		if flagged[i] {
			nf++
		}
		if truth[i] {
			nt++
		}
		if flagged[i] && truth[i] {
			tp++
		}
	}
	return float64(tp) / float64(nf), float64(tp) / float64(nt)
}
