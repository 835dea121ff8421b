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
	return softmaxScores(z.RawMatrix().Data, ds.Labels, b, classes)
}

// softmaxScores returns the mean cross-entropy and the accuracy of the
// row-major logits z (n×c) plus the intercept b (nil: none) against labels.
func softmaxScores(z []float64, labels []int, b []float64, c int) (loss, acc float64) {
	n := len(labels)
	correct := 0
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
		loss += best + math.Log(s) - row[labels[i]]
		if arg == labels[i] {
			correct++
		}
	}
	return loss / float64(n), float64(correct) / float64(n)
}
