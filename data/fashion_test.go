package data

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkImages checks the sizes, class balance and pixel range of a
// Fashion-MNIST data set.
func checkImages(t *testing.T, name string, ds *Dataset, n, perClass int) {
	t.Helper()
	if err := ds.Validate(); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if ds.N != n || ds.D != 784 || ds.Height != 28 || ds.Width != 28 || ds.Classes != 10 {
		t.Errorf("%s: N, D, Height, Width, Classes = %d, %d, %d, %d, %d, want %d, 784, 28, 28, 10", name, ds.N, ds.D, ds.Height, ds.Width, ds.Classes, n)
	}
	if got, want := ds.ClassCounts(), slices.Repeat([]int{perClass}, 10); !slices.Equal(got, want) {
		t.Errorf("%s: class counts %v, want %v", name, got, want)
	}
	lo, hi := slices.Min(ds.X), slices.Max(ds.X)
	if lo != 0 || hi != 1 {
		t.Errorf("%s: pixels in [%v, %v], want [0, 1]", name, lo, hi)
	}
	for i, v := range ds.X[:784*50] {
		if k := v * 255; math.Abs(k-math.Round(k)) > 1e-9 {
			t.Fatalf("%s: pixel %d is %v, not a multiple of 1/255", name, i, v)
		}
	}
}

func TestEmbeddedFashionMNIST(t *testing.T) {
	train, test, err := EmbeddedFashionMNIST()
	if err != nil {
		t.Fatal(err)
	}
	checkImages(t, "train", train, 4000, 400)
	checkImages(t, "test", test, 1000, 100)

	// Each call returns fresh data sets.
	train.X[0] = 42
	again, _, err := EmbeddedFashionMNIST()
	if err != nil {
		t.Fatal(err)
	}
	if again.X[0] == 42 {
		t.Errorf("EmbeddedFashionMNIST returned shared storage")
	}
	if lic := EmbeddedLicense(); !strings.Contains(lic, "Zalando SE") || !strings.Contains(lic, "Permission is hereby granted") {
		t.Errorf("EmbeddedLicense does not hold the MIT license of Zalando SE")
	}
}

// TestLoadFashionMNIST reads the full data set from the Debian package
// dataset-fashion-mnist when it is installed, and checks that the embedded
// subset holds the images that embedded/indices.txt lists.
func TestLoadFashionMNIST(t *testing.T) {
	if testing.Short() {
		t.Skip("reading the full data set takes a few seconds")
	}
	if _, err := os.Stat(filepath.Join(DefaultFashionMNISTDir, FashionMNISTTrainImages+".gz")); err != nil {
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	train, test, err := LoadFashionMNIST("")
	if err != nil {
		t.Fatal(err)
	}
	checkImages(t, "train", train, 60000, 6000)
	checkImages(t, "test", test, 10000, 1000)

	etrain, etest, err := EmbeddedFashionMNIST()
	if err != nil {
		t.Fatal(err)
	}
	lists, err := os.ReadFile(filepath.Join("embedded", "indices.txt"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(lists), "\n\n")
	if len(parts) != 2 {
		t.Fatalf("indices.txt has %d lists, want 2", len(parts))
	}
	for k, pair := range []struct{ full, sub *Dataset }{{train, etrain}, {test, etest}} {
		fields := strings.Fields(parts[k])
		idx := make([]int, 0, len(fields))
		for _, f := range fields[4:] { // skip "NAME (N indices, 0-based):"
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, v)
		}
		want := pair.full.Subset(idx)
		if !slices.Equal(want.X, pair.sub.X) || !slices.Equal(want.Labels, pair.sub.Labels) {
			t.Errorf("embedded set %d differs from the listed images of the full set", k)
		}
	}
}

func TestLoadFashionMNISTErrors(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadFashionMNIST(dir)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), FashionMNISTTrainImages) {
		t.Errorf("empty directory: error %v, want fs.ErrNotExist naming %s", err, FashionMNISTTrainImages)
	}

	// Raw (uncompressed) files are found too; a wrong image size is reported.
	write := func(name string, m *IDX) {
		t.Helper()
		if err := WriteIDXFile(filepath.Join(dir, name), m); err != nil {
			t.Fatal(err)
		}
	}
	write(FashionMNISTTrainImages, &IDX{Type: IDXUint8, Dims: []int{1, 28, 28}, Bytes: make([]byte, 784)})
	write(FashionMNISTTrainLabels+".gz", &IDX{Type: IDXUint8, Dims: []int{1}, Bytes: []byte{9}})
	write(FashionMNISTTestImages, &IDX{Type: IDXUint8, Dims: []int{1, 27, 29}, Bytes: make([]byte, 27*29)})
	write(FashionMNISTTestLabels, &IDX{Type: IDXUint8, Dims: []int{1}, Bytes: []byte{0}})
	_, _, err = LoadFashionMNIST(dir)
	if err == nil || !strings.Contains(err.Error(), "dimensions [1 27 29]") {
		t.Errorf("27×29 test images: error %v", err)
	}
	write(FashionMNISTTestImages, &IDX{Type: IDXUint8, Dims: []int{1, 28, 28}, Bytes: make([]byte, 784)})
	write(FashionMNISTTestLabels, &IDX{Type: IDXUint8, Dims: []int{1}, Bytes: []byte{10}})
	_, _, err = LoadFashionMNIST(dir)
	if err == nil || !strings.Contains(err.Error(), "label 10") {
		t.Errorf("label 10: error %v", err)
	}
	write(FashionMNISTTestLabels, &IDX{Type: IDXUint8, Dims: []int{1}, Bytes: []byte{4}})
	train, test, err := LoadFashionMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 1 || train.Labels[0] != 9 || test.N != 1 || test.Labels[0] != 4 {
		t.Errorf("train labels %v, test labels %v, want [9] and [4]", train.Labels, test.Labels)
	}

	// An images file whose header declares more than MaxDatasetValues
	// pixels (2²⁸ here, a 261 KB gzip file if the zero payload were there:
	// 2.8 GB once widened to float64) is refused from its header alone.
	head := []byte{0, 0, 8, 3, 0, 0x05, 0x39, 0x78, 0, 0, 0, 28, 0, 0, 0, 28} // 342392 × 28 × 28
	if err := os.WriteFile(filepath.Join(dir, FashionMNISTTrainImages), head, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadFashionMNIST(dir)
	if err == nil || !strings.Contains(err.Error(), "hold more than 134217728 elements") || !strings.Contains(err.Error(), "offset 12") {
		t.Errorf("a header of 2²⁸ pixels: error %v; want the size refused at the dimensions", err)
	}
}
