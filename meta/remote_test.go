package meta

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/data"
)

// learnerRunner is a TaskRunner that computes the tasks, in reverse
// order, with TaskGradient of another learner of the same settings, as a
// worker process does; fail, when set, is its error instead.
type learnerRunner struct {
	l    *Learner
	fail error
}

func (r learnerRunner) RunTasks(grads [][]float64, stats []TaskStats, params []float64, steps int, tasks []*data.Task) error {
	if r.fail != nil {
		return r.fail
	}
	for i := len(tasks) - 1; i >= 0; i-- {
		var err error
		if stats[i], err = r.l.TaskGradient(grads[i], params, steps, tasks[i]); err != nil {
			return err
		}
	}
	return nil
}

// TestRunner checks that steps whose tasks a TaskRunner computes with
// TaskGradient equal in-process steps bit for bit, for every method, and
// that a runner's error leaves the state unchanged.
func TestRunner(t *testing.T) {
	src := toyTasks(t, 3, 1, 2, 8)
	for _, s := range []Settings{{Gradient: ITD, Steps: 3, Alpha: 0.3}, {Gradient: AID, Steps: 3, Alpha: 0.3},
		{Gradient: ANIL, Steps: 2, Alpha: 0.3}, {Gradient: MAML, Steps: 2, Alpha: 0.3}} {
		t.Run(s.Gradient.String(), func(t *testing.T) {
			s.Workers = 2
			in, _ := NewLearner(s, tiny, 3)
			worker, _ := NewLearner(s, tiny, 3)
			initial := worker.Snapshot().Params
			s.Runner = learnerRunner{l: worker}
			out, err := NewLearner(s, tiny, 3)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				var batch []*data.Task
				for j := range 3 {
					task, err := src.Task(3*k+j, nil)
					if err != nil {
						t.Fatal(err)
					}
					batch = append(batch, task)
				}
				a, err := in.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				b, err := out.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				if a.Loss != b.Loss || a.Accuracy != b.Accuracy || a.GradNorm != b.GradNorm {
					t.Errorf("step %d: runner %+v, in process %+v", k, b, a)
				}
			}
			if sa, sb := in.Snapshot(), out.Snapshot(); !slices.Equal(sa.Params, sb.Params) || !slices.Equal(sa.Opt.M, sb.Opt.M) {
				t.Errorf("after 3 steps the runner's parameters differ from in-process ones by %.2e", relErr(sb.Params, sa.Params))
			}
			if !slices.Equal(worker.Snapshot().Params, initial) {
				t.Error("TaskGradient changed the worker's parameters")
			}
		})
	}
	l, _ := NewLearner(Settings{Runner: learnerRunner{fail: errors.New("worker w1 lost")}}, tiny, 3)
	task, _ := src.Task(0, nil)
	before := l.Snapshot()
	if _, err := l.Step([]*data.Task{task}); err == nil || !strings.Contains(err.Error(), "iteration 0: worker w1 lost") {
		t.Errorf("a failing runner: error %v, want one naming the iteration and the runner's error", err)
	}
	if after := l.Snapshot(); after.Iter != 0 || !slices.Equal(after.Params, before.Params) {
		t.Error("a failed step changed the state")
	}
}
