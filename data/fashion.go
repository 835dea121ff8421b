package data

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
)

// DefaultFashionMNISTDir is where the Debian package dataset-fashion-mnist
// installs the Fashion-MNIST files (apt-get install dataset-fashion-mnist).
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// The base names of the four Fashion-MNIST (and MNIST) files. The Debian
// package ships them gzip-compressed, with a ".gz" suffix.
const (
	FashionMNISTTrainImages = "train-images-idx3-ubyte"
	FashionMNISTTrainLabels = "train-labels-idx1-ubyte"
	FashionMNISTTestImages  = "t10k-images-idx3-ubyte"
	FashionMNISTTestLabels  = "t10k-labels-idx1-ubyte"
)

// FashionMNISTClasses holds the names of the ten Fashion-MNIST classes, indexed
// by label.
var FashionMNISTClasses = [10]string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// LoadFashionMNIST reads the Fashion-MNIST training set (60000 images) and
// test set (10000 images) from dir, or from DefaultFashionMNISTDir if dir is
// "". Each of the four files is looked up under its base name plus ".gz" and
// then under its base name alone. The images are 28×28 (D = 784, Height =
// Width = 28) with pixels scaled to [0, 1]; there are 10 classes, named in
// FashionMNISTClasses.
//
// LoadFashionMNIST also reads MNIST, which uses the same file names and
// format. The full training set takes 376 MB as float64; a file that
// declares more than MaxDatasetValues values is refused from its header,
// before its payload is read.
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	if dir == "" {
		dir = DefaultFashionMNISTDir
	}
	open := func(base string) (*IDX, error) {
		for _, name := range []string{base + ".gz", base} {
			path := filepath.Join(dir, name)
			m, err := readIDXFile(path, MaxDatasetValues)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return m, err
		}
		return nil, fmt.Errorf("data: no %s(.gz) in %s (install the Debian package dataset-fashion-mnist): %w", base, dir, fs.ErrNotExist)
	}
	train, err = loadImagesLabels(open, FashionMNISTTrainImages, FashionMNISTTrainLabels)
	if err != nil {
		return nil, nil, err
	}
	test, err = loadImagesLabels(open, FashionMNISTTestImages, FashionMNISTTestLabels)
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadImagesLabels(open func(string) (*IDX, error), images, labels string) (*Dataset, error) {
	im, err := open(images)
	if err != nil {
		return nil, err
	}
	lb, err := open(labels)
	if err != nil {
		return nil, err
	}
	if im.Type != IDXUint8 || len(im.Dims) != 3 || im.Dims[1] != 28 || im.Dims[2] != 28 {
		return nil, fmt.Errorf("data: %s: %v images of dimensions %v, want uint8 N×28×28", images, im.Type, im.Dims)
	}
	ds, err := FromIDX(im, lb, 10)
	if err != nil {
		return nil, fmt.Errorf("data: %s, %s: %w", images, labels, err)
	}
	return ds, nil
}

//go:embed embedded/*.gz
var embeddedFS embed.FS

//go:embed embedded/LICENSE
var embeddedLicense string

// embeddedIDX decodes the embedded files once.
var embeddedIDX = sync.OnceValues(func() (map[string]*IDX, error) {
	out := make(map[string]*IDX)
	for _, base := range []string{FashionMNISTTrainImages, FashionMNISTTrainLabels, FashionMNISTTestImages, FashionMNISTTestLabels} {
		name := "embedded/" + base + ".gz"
		f, err := embeddedFS.Open(name)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		m, err := readIDX(f, name, MaxDatasetValues)
		f.Close()
		if err != nil {
			return nil, err
		}
		out[base] = m
	}
	return out, nil
})

// EmbeddedFashionMNIST returns a real subset of Fashion-MNIST compiled into
// the package: 4000 training images (400 of each class) drawn from the 60000
// of the training set and 1000 test images (100 of each class) drawn from the
// 10000 of the test set, chosen uniformly at random with a fixed seed by the
// program in data/internal/mkembedded, and kept in their original order. The
// images are 28×28 with pixels scaled to [0, 1]. Each call returns new
// Datasets that the caller may modify.
//
// Fashion-MNIST is copyright 2017 Zalando SE and distributed under the MIT
// license; see EmbeddedLicense.
func EmbeddedFashionMNIST() (train, test *Dataset, err error) {
	files, err := embeddedIDX()
	if err != nil {
		return nil, nil, err
	}
	open := func(base string) (*IDX, error) { return files[base], nil }
	train, err = loadImagesLabels(open, FashionMNISTTrainImages, FashionMNISTTrainLabels)
	if err != nil {
		return nil, nil, err
	}
	test, err = loadImagesLabels(open, FashionMNISTTestImages, FashionMNISTTestLabels)
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// EmbeddedLicense returns the license of the Fashion-MNIST images returned
// by EmbeddedFashionMNIST (MIT, copyright 2017 Zalando SE).
func EmbeddedLicense() string { return embeddedLicense }
