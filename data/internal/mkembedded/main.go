// Command mkembedded regenerates the real Fashion-MNIST subset that package
// data embeds (data/embedded). From the root of the module, after
// apt-get install dataset-fashion-mnist:
//
//	go run ./data/internal/mkembedded
//
// It draws, with data.BalancedIndices and a fixed seed, 400 training images
// of each of the 10 classes from the 60000 of the training set and 100 test
// images of each class from the 10000 of the test set, keeps them in their
// original order, and writes them as gzip-compressed IDX files under the
// standard names, together with the license, a README and the list of the
// chosen indices. The output is deterministic.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobilevel/bilevel/data"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("mkembedded: ")
	src := flag.String("src", data.DefaultFashionMNISTDir, "directory holding the Fashion-MNIST IDX files")
	dst := flag.String("dst", filepath.Join("data", "embedded"), "output directory")
	seed := flag.Uint64("seed", 1, "seed of the random choice")
	trainPer := flag.Int("train", 400, "training images per class")
	testPer := flag.Int("test", 100, "test images per class")
	flag.Parse()

	if err := os.MkdirAll(*dst, 0o755); err != nil {
		log.Fatal(err)
	}
	var lists []string
	for _, set := range []struct {
		images, labels string
		perClass       int
	}{
		{data.FashionMNISTTrainImages, data.FashionMNISTTrainLabels, *trainPer},
		{data.FashionMNISTTestImages, data.FashionMNISTTestLabels, *testPer},
	} {
		idx, err := subset(*src, *dst, set.images, set.labels, set.perClass, *seed)
		if err != nil {
			log.Fatal(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%d indices, 0-based):\n", set.images, len(idx))
		for i, v := range idx {
			sep := " "
			if i%20 == 19 || i == len(idx)-1 {
				sep = "\n"
			}
			fmt.Fprintf(&b, "%d%s", v, sep)
		}
		lists = append(lists, b.String())
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(*dst, name), []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	write("indices.txt", strings.Join(lists, "\n"))
	write("LICENSE", license)
	write("README.md", fmt.Sprintf(readme, *trainPer, 10**trainPer, *testPer, 10**testPer, *seed))
}

// subset copies perClass random images of each class of the named pair of
// files from src to dst and returns the indices taken.
func subset(src, dst, images, labels string, perClass int, seed uint64) ([]int, error) {
	im, err := data.ReadIDXFile(filepath.Join(src, images+".gz"))
	if err != nil {
		return nil, err
	}
	lb, err := data.ReadIDXFile(filepath.Join(src, labels+".gz"))
	if err != nil {
		return nil, err
	}
	if im.Type != data.IDXUint8 || lb.Type != data.IDXUint8 || len(im.Dims) != 3 || len(lb.Dims) != 1 || im.Dims[0] != lb.Dims[0] {
		return nil, fmt.Errorf("%s, %s: unexpected types %v, %v or dimensions %v, %v", images, labels, im.Type, lb.Type, im.Dims, lb.Dims)
	}
	ls := make([]int, lb.Dims[0])
	for i, b := range lb.Bytes {
		ls[i] = int(b)
	}
	idx, err := data.BalancedIndices(ls, 10, perClass, seed)
	if err != nil {
		return nil, err
	}
	d := im.Dims[1] * im.Dims[2]
	outIm := &data.IDX{Type: data.IDXUint8, Dims: []int{len(idx), im.Dims[1], im.Dims[2]}, Bytes: make([]byte, 0, len(idx)*d)}
	outLb := &data.IDX{Type: data.IDXUint8, Dims: []int{len(idx)}, Bytes: make([]byte, 0, len(idx))}
	for _, i := range idx {
		outIm.Bytes = append(outIm.Bytes, im.Bytes[i*d:(i+1)*d]...)
		outLb.Bytes = append(outLb.Bytes, lb.Bytes[i])
	}
	if err := data.WriteIDXFile(filepath.Join(dst, images+".gz"), outIm); err != nil {
		return nil, err
	}
	if err := data.WriteIDXFile(filepath.Join(dst, labels+".gz"), outLb); err != nil {
		return nil, err
	}
	return idx, nil
}

const license = `Fashion-MNIST
Copyright (c) 2017 Zalando SE, https://tech.zalando.com
Source: https://github.com/zalandoresearch/fashion-mnist

The images and labels in this directory are a subset of Fashion-MNIST, taken
from the Debian package dataset-fashion-mnist (0.0~git20200523.55506a9-1),
whose /usr/share/doc/dataset-fashion-mnist/copyright states this license.

License: Expat (MIT)

Permission is hereby granted, free of charge, to any person obtaining a
copy of this software and associated documentation files (the "Software"),
to deal in the Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, sublicense,
and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included
in all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS
OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.
IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY
CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT,
TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE
SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
`

const readme = `# Embedded Fashion-MNIST subset

A small real subset of Fashion-MNIST (Zalando SE, MIT license: see LICENSE),
compiled into package data and returned by data.EmbeddedFashionMNIST.

- train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz: %d images of each of
  the 10 classes (%d in all), drawn uniformly without replacement from the
  60000 images of the Fashion-MNIST training set.
- t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz: %d images of each
  class (%d in all), drawn from the 10000 images of the test set.
- The draw is data.BalancedIndices(labels, 10, perClass, seed) with seed %d;
  the images keep their original order. indices.txt lists the 0-based indices
  taken from each original file.
- The files are IDX (unsigned byte, 28×28 images), gzip-compressed at the best
  level, written by data.WriteIDXFile.

Regenerate them, from the root of the module, with

    apt-get install dataset-fashion-mnist   # files in /usr/share/datasets/fashion-mnist
    go run ./data/internal/mkembedded

which reads the four .gz files of the Debian package dataset-fashion-mnist
(0.0~git20200523.55506a9-1) and rewrites this directory: the same images
and, with the same Go release's compress/gzip, the same bytes.
`
