package meta

import (
	"fmt"
	"testing"

	"github.com/gobilevel/bilevel/data"
)

// TestFloat32Step checks the float32 meta-gradient (Settings.Float32)
// against the float64 one at the same parameters on the same tasks, for
// every method and both computations through the backbone: within
// float32Tol relative, about 170 units of float32's rounding 2⁻²⁴ (the
// worst measured is 2.8e-7, 5 units). AID's CG runs to convergence (20
// steps for the 39 unknowns of the head): truncated in the middle of its
// convergence, CG amplifies any perturbation of its products — float32
// rounding here, float64's in a float64 run — and the truncated
// estimates differ more (measured on these tasks: 5.4e-6 at 6 steps,
// 7.4e-4 at 8, 9.8e-5 at 10, 3.8e-6 at 12, 2.7e-7 at 20).
func TestFloat32Step(t *testing.T) {
	const float32Tol = 1e-5
	src := toyTasks(t, 3, 2, 3, 5)
	var tasks []*data.Task
	for i := range 3 {
		task, err := src.Task(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	worst := 0.0
	for _, c := range []Settings{
		{Gradient: ITD, Steps: 5, Alpha: 0.3},
		{Gradient: ITD, Steps: 5, Alpha: 0.3, Backprop: Direct},
		{Gradient: AID, Steps: 5, Alpha: 0.3, CGSteps: 20},
		{Gradient: AID, Steps: 5, Alpha: 0.3, CGSteps: 20, Backprop: Direct},
		{Gradient: ANIL, Steps: 3, Alpha: 0.3},
		{Gradient: MAML, Steps: 2, Alpha: 0.3},
	} {
		t.Run(fmt.Sprintf("%v backprop %d", c.Gradient, c.Backprop), func(t *testing.T) {
			var grads [2][]float64
			for i, f32 := range []bool{false, true} {
				s := c
				s.Float32, s.Workers = f32, 2
				l, err := NewLearner(s, tiny, 3)
				if err != nil {
					t.Fatal(err)
				}
				p := l.Snapshot().Params
				for j := range p[l.DimX():] { // a head initialization that is not zero
					p[l.DimX()+j] = 0.1 * float64(j%7-3)
				}
				if err := l.Restore(Snapshot{Params: p}); err != nil {
					t.Fatal(err)
				}
				grads[i] = make([]float64, len(p))
				if _, err := l.MetaGradient(grads[i], tasks); err != nil {
					t.Fatal(err)
				}
			}
			e := relErr(grads[1], grads[0])
			worst = max(worst, e)
			if e > float32Tol {
				t.Errorf("float32 meta-gradient differs from float64 by %.2e relative (tolerance %g)", e, float32Tol)
			} else {
				t.Logf("float32 meta-gradient differs from float64 by %.2e relative", e)
			}
		})
	}
	t.Logf("worst: %.2e (tolerance %g)", worst, float32Tol)
}
