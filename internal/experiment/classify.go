package experiment

import (
	"math"

	"github.com/gobilevel/bilevel/data"
	"gonum.org/v1/gonum/mat"
)

// Linear evaluates the linear classifier with weights w (d×c, row-major,
// the layout of the models' W) and optional intercept b (length c, nil for
// none) on ds: the mean softmax cross-entropy and the accuracy.
func Linear(ds *data.Dataset, w, b []float64, classes int) (loss, acc float64) {
	x := mat.NewDense(ds.N, ds.D, ds.X)
	wm := mat.NewDense(ds.D, classes, w)
	var z mat.Dense
	z.Mul(x, wm)
	loss, acc, _ = SoftmaxScores(z.RawMatrix().Data, ds.Labels, b, classes)
	return loss, acc
}

// SoftmaxScores returns the mean softmax cross-entropy, the accuracy and
// the class-balanced accuracy (the mean over the classes present in labels
// of each class's accuracy) of the row-major logits z (n×c) plus the
// intercept b (nil: none; added to z in place) against labels.
func SoftmaxScores(z []float64, labels []int, b []float64, c int) (loss, acc, balanced float64) {
	n := len(labels)
	correct := 0
	hits, count := make([]float64, c), make([]float64, c)
	for i := range n {
		row := z[i*c : (i+1)*c]
		if b != nil {
			for k := range row {
				row[k] += b[k]
			}
		}
		best, arg := math.Inf(-1), 0
		for k, v := range row {
			if v > best {
				best, arg = v, k
			}
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - best)
		}
		l := labels[i]
		loss += best + math.Log(s) - row[l]
		count[l]++
		if arg == l {
			correct++
			hits[l]++
		}
	}
	present := 0
	for k := range c {
		if count[k] > 0 {
			balanced += hits[k] / count[k]
			present++
		}
	}
	return loss / float64(n), float64(correct) / float64(n), balanced / float64(present)
}
