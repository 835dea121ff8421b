package optim_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobilevel/bilevel/optim"
)

// ExampleResume saves a run every 5 iterations, stops it after 12 (as a
// crash would), and continues it from the checkpoint file: the resumed run
// gives bit for bit what an uninterrupted run gives, and its
// MemoryRecorder holds the records of both parts.
func ExampleResume() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.ckpt")

	p := toy{c: [2]float64{1, -0.25}} // x* = (2, -1)
	method := optim.AIDBiO{Alpha: 0.25, D: 5, N: 2, Outer: optim.SGD{LR: 4}}
	settings := optim.Settings{
		MaxIter:    40,
		Checkpoint: optim.CheckpointSettings{Path: path, Every: 5},
	}
	first := settings
	first.MaxIter = 12 // the "crash"
	if _, err := optim.Solve(p, []float64{0, 0}, []float64{0, 0}, &first, method); err != nil {
		fmt.Println(err)
		return
	}

	st, err := optim.LoadCheckpoint(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("checkpoint after iteration", st.Iter)
	rec := &optim.MemoryRecorder{}
	settings.Recorder = rec
	res, err := optim.Resume(p, st, &settings, method)
	if err != nil {
		fmt.Println(err)
		return
	}
	want, _ := optim.Solve(p, []float64{0, 0}, []float64{0, 0}, &optim.Settings{MaxIter: 40}, method)
	fmt.Printf("x = [%.4f %.4f] after %d iterations, same bits as an uninterrupted run: %t\n",
		res.X[0], res.X[1], res.Iter, res.X[0] == want.X[0] && res.X[1] == want.X[1])
	fmt.Println("records from the resumed run:", len(rec.Records))

	// A damaged checkpoint is an error that says what is wrong.
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-10], 0o644)
	_, err = optim.LoadCheckpoint(path)
	var ce *optim.CheckpointError
	if errors.As(err, &ce) {
		what, _, _ := strings.Cut(ce.Problem, ":") // "truncated: the header announces … bytes, the file holds …"
		fmt.Println("after cutting 10 bytes:", what)
	}
	// Output:
	// checkpoint after iteration 12
	// x = [2.0000 -1.0000] after 40 iterations, same bits as an uninterrupted run: true
	// records from the resumed run: 28
	// after cutting 10 bytes: truncated
}
