package meta

import (
	"fmt"

	"github.com/gobilevel/bilevel/data"
)

// TaskRunner computes the meta-gradients of a batch's tasks somewhere else
// than the learner's goroutines: on worker processes, say
// (dist.MetaTasks). A task's meta-gradient depends only on the learner's
// settings, the parameters, the number of inner steps and the task's
// images and labels, so a runner whose workers build a Learner of the same
// Settings, model geometry and ways computes it with TaskGradient, and the
// learner adds the results in task order: its steps, results and
// checkpoints are those of in-process workers, bit for bit.
type TaskRunner interface {
	// RunTasks writes to grads[i] (of the length of params) the
	// meta-gradient of tasks[i] at params with steps inner steps, as
	// TaskGradient computes it, and to stats[i] what TaskGradient returns
	// with it. Its error names the task (and the worker) at fault.
	RunTasks(grads [][]float64, stats []TaskStats, params []float64, steps int, tasks []*data.Task) error
}

// TaskStats reports one task of a meta-iteration: the query accuracy and
// loss of the adapted model, and the inner loop's diagnostics that
// StepStats reports at worst over the batch (InnerRatio, CGResidual; 0
// where the method has none).
type TaskStats struct {
	Accuracy, Loss         float64
	InnerRatio, CGResidual float64
}

// TaskGradient writes to dst (the length of the parameters) the
// meta-gradient of task t at the parameters params with steps inner
// steps, and returns the query accuracy and loss of the adapted model and
// its inner loop's diagnostics: one term of MetaGradient's mean. It is
// what a TaskRunner's worker computes with a learner of the coordinator's
// settings; it does not
// change the learner's state, and is not safe for concurrent use.
// Parameters of another length are an error (they come from a message).
func (l *Learner) TaskGradient(dst, params []float64, steps int, t *data.Task) (TaskStats, error) {
	switch {
	case len(params) != len(l.st.Params):
		return TaskStats{}, fmt.Errorf("meta: %d parameters for a %v learner with %d", len(params), l.s.Gradient, len(l.st.Params))
	case len(dst) != len(params):
		return TaskStats{}, fmt.Errorf("meta: a task gradient of length %d for %d parameters", len(dst), len(params))
	case steps < 0:
		return TaskStats{}, fmt.Errorf("meta: %d inner steps", steps)
	}
	saved := l.st.Params
	l.st.Params = params
	defer func() { l.st.Params = saved }()
	var st TaskStats
	err := safely(func() error {
		var err error
		st, err = l.task(l.workers[0], t, steps, dst)
		return err
	})
	return st, err
}

// runTasks computes the tasks' meta-gradients into l.grads with the
// settings' TaskRunner.
func (l *Learner) runTasks(stats []TaskStats, steps int, tasks []*data.Task) error {
	for i := range tasks {
		l.grads[i] = grow(l.grads[i], len(l.st.Params))
	}
	return l.s.Runner.RunTasks(l.grads[:len(tasks)], stats, l.st.Params, steps, tasks)
}
