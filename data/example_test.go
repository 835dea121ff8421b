package data_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/gobilevel/bilevel/data"
)

func ExampleReadIDX() {
	// A tiny IDX file held in memory: two 2×3 images of unsigned bytes.
	file := []byte{
		0x00, 0x00, 0x08, 0x03, // magic: type 0x08 (unsigned byte), 3 dimensions
		0x00, 0x00, 0x00, 0x02, // 2 images
		0x00, 0x00, 0x00, 0x02, // of 2 rows
		0x00, 0x00, 0x00, 0x03, // of 3 columns
		0, 51, 102, 153, 204, 255, // image 0
		255, 255, 0, 0, 0, 0, // image 1
	}
	m, err := data.ReadIDX(bytes.NewReader(file))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Type, m.Dims, m.Len())
	fmt.Println(m.Bytes[:6])

	// A truncated file is reported with the offset of the problem.
	_, err = data.ReadIDX(bytes.NewReader(file[:20]))
	fmt.Println(err)

	// Output:
	// uint8 [2 2 3] 12
	// [0 51 102 153 204 255]
	// data: offset 16: payload truncated: want 12 bytes, have 4
}

func ExampleNewSampler() {
	// Batches of 4 of 10 samples, without replacement: every index once
	// per epoch, with a shorter last batch.
	s := data.NewSampler(10, 4, 1)
	var batch []int
	for range 2 * s.BatchesPerEpoch() {
		batch = s.Next(batch)
		fmt.Println(s.Epoch(), batch)
	}

	// Output:
	// 1 [5 4 0 7]
	// 1 [8 9 1 3]
	// 1 [6 2]
	// 2 [0 1 4 8]
	// 2 [5 2 6 7]
	// 2 [9 3]
}

func ExampleSampler_MarshalBinary() {
	s := data.NewSampler(10, 4, 1)
	s.Next(nil)

	// Checkpoint mid-epoch, then restore into another sampler.
	state, err := s.MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	var restored data.Sampler
	if err := restored.UnmarshalBinary(state); err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Next(nil), restored.Next(nil))

	// Output:
	// [8 9 1 3] [8 9 1 3]
}

func ExampleCorruptLabels() {
	clean := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	noisy := make([]int, len(clean))
	c, err := data.CorruptLabels(noisy, clean, 10, 0.5, 1)
	if err != nil {
		log.Fatal(err)
	}
	changed, resampled := c.Count()
	fmt.Println(noisy)
	fmt.Println("resampled:", resampled, "changed:", changed)

	// A detector that flags every resampled sample finds every changed one.
	precision, recall := data.PrecisionRecall(c.Resampled, c.Changed)
	fmt.Printf("precision %.2f, recall %.2f\n", precision, recall)

	// Output:
	// [8 1 6 2 4 6 6 7 8 2 1 3 2 3 5 5 6 7 8 9]
	// resampled: 10 changed: 8
	// precision 0.80, recall 1.00
}

func ExampleEmbeddedFashionMNIST() {
	train, test, err := data.EmbeddedFashionMNIST()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(train.N, train.D, train.Height, train.Width)
	fmt.Println(test.N, test.ClassCounts())
	fmt.Println(data.FashionMNISTClasses[train.Labels[0]])

	// Hyper-cleaning split: train and validation sets drawn from the
	// training images, half the training labels redrawn.
	parts, err := data.RandomSplit(train, 1, 3000, 1000)
	if err != nil {
		log.Fatal(err)
	}
	noisy, c, err := parts[0].Corrupt(0.5, 1)
	if err != nil {
		log.Fatal(err)
	}
	changed, _ := c.Count()
	fmt.Println(noisy.N, parts[1].N, changed)

	// Output:
	// 4000 784 28 28
	// 1000 [100 100 100 100 100 100 100 100 100 100]
	// Ankle boot
	// 3000 1000 1344
}

func ExampleRotate() {
	img := []float64{
		1, 2, 3,
		4, 5, 6,
		7, 8, 9,
	}
	rot := make([]float64, 9)
	data.Rotate(rot, img, 3, 1) // 90 degrees counter-clockwise
	for i := range 3 {
		fmt.Println(rot[3*i : 3*i+3])
	}

	// Output:
	// [3 6 9]
	// [2 5 8]
	// [1 4 7]
}

func ExampleTaskSampler() {
	train, _, err := data.EmbeddedFashionMNIST()
	if err != nil {
		log.Fatal(err)
	}
	// 6/2/2 base classes: 24/8/8 rotated classes for meta-train/val/test.
	split, err := data.SplitClasses(10, 1, 6, 2, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(split)
	s, err := data.NewTaskSampler(train, split[0], 5, 1, 15, 1)
	if err != nil {
		log.Fatal(err)
	}
	task := s.Next(nil)
	for _, c := range task.Classes {
		fmt.Printf("%s at %d degrees\n", data.FashionMNISTClasses[c/4], 90*(c%4))
	}
	fmt.Println(len(task.SupportX)/task.D, task.SupportY)
	fmt.Println(len(task.QueryX)/task.D, task.QueryY[:20])

	// Output:
	// [[0 1 2 5 6 7] [3 9] [4 8]]
	// Pullover at 0 degrees
	// Sandal at 270 degrees
	// T-shirt/top at 0 degrees
	// T-shirt/top at 90 degrees
	// Shirt at 90 degrees
	// 5 [0 1 2 3 4]
	// 75 [0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 1 1 1]
}

func ExampleSPD() {
	a := data.SPD(nil, 3, 100, 1) // eigenvalues 1, 10 and 100
	for i := range 3 {
		fmt.Printf("%7.3f\n", a[3*i:3*i+3])
	}
	fmt.Printf("trace %.3f\n", a[0]+a[4]+a[8])

	// Output:
	// [ 14.119 -18.508  25.163]
	// [-18.508  27.181 -34.302]
	// [ 25.163 -34.302  69.700]
	// trace 111.000
}

func ExampleLogisticData() {
	// The synthetic data of paper 002 §4.1: 16000 + 4000 samples of 50
	// features, labels from w·x + 0.1z thresholded at its median.
	ds, w := data.LogisticData(20000, 50, &data.LogisticOptions{Scale: 1}, 1)
	parts, err := data.RandomSplit(ds, 1, 16000, 4000)
	if err != nil {
		log.Fatal(err)
	}
	train, val := parts[0], parts[1]
	fmt.Println(len(w), train.N, val.N, ds.ClassCounts())

	// Output:
	// 50 16000 4000 [10000 10000]
}
