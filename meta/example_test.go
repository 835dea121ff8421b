package meta_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
)

// patterns returns a data set of 8×8 images of four classes, each a fixed
// random pattern plus noise.
func patterns() *data.Dataset {
	rng := rand.New(rand.NewPCG(1, 2))
	var x []float64
	var labels []int
	base := make([][]float64, 4)
	for c := range base {
		base[c] = make([]float64, 64)
		for i := range base[c] {
			base[c][i] = rng.Float64()
		}
	}
	for n := 0; n < 20; n++ {
		for c := range base {
			for _, v := range base[c] {
				x = append(x, v+0.3*rng.NormFloat64())
			}
			labels = append(labels, c)
		}
	}
	ds, _ := data.NewDataset(x, labels, 64, 4)
	ds.Height, ds.Width = 8, 8
	return ds
}

func ExampleLearner() {
	ds := patterns()
	// 3-way 1-shot tasks over the rotations of base classes 0-2 for
	// training, of class 3 for testing (its four rotations).
	train := &meta.Tasks{Data: ds, Base: []int{0, 1, 2}, Ways: 3, Shots: 1, Queries: 3, Seed: 1}
	test := &meta.Tasks{Data: ds, Base: []int{3}, Ways: 3, Shots: 1, Queries: 3, Seed: 2}
	backbone := models.CNNSettings{Side: 8, Blocks: 2, Filters: 4}
	l, err := meta.NewLearner(meta.Settings{Gradient: meta.ITD, Steps: 10, Alpha: 0.3, TaskBatch: 4}, backbone, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	tasks := make([]*data.Task, 4)
	for k := 0; k < 5; k++ {
		for j := range tasks {
			tasks[j], _ = train.Task(4*k+j, tasks[j]) // task indices k·B + j: resumable
		}
		if _, err := l.Step(tasks); err != nil {
			fmt.Println(err)
			return
		}
	}
	acc, err := l.Evaluate(test, 0, 20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("iterations:", l.Snapshot().Iter, "test tasks:", acc.N)

	// A checkpoint holds the state; a new learner continues from it.
	dir, err := os.MkdirTemp("", "meta-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "learner.ckpt")
	if err := meta.WriteCheckpoint(path, l.Snapshot()); err != nil {
		fmt.Println(err)
		return
	}
	var st meta.Snapshot
	if err := meta.ReadCheckpoint(path, &st); err != nil {
		fmt.Println(err)
		return
	}
	l2, _ := meta.NewLearner(meta.Settings{Gradient: meta.ITD, Steps: 10, Alpha: 0.3, TaskBatch: 4}, backbone, 3)
	fmt.Println("restored:", l2.Restore(st) == nil, "at iteration", l2.Snapshot().Iter)
	// Output:
	// iterations: 5 test tasks: 20
	// restored: true at iteration 5
}
