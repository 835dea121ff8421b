package dist

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/meta"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
	"github.com/nats-io/nats.go"
)

// Task-parallel meta-learning. A meta-learning task's meta-gradient
// depends only on the learner's settings, the parameters, the number of
// inner steps and the task's images and labels. So every worker process
// can compute any task: a MetaModel shard is a meta.Learner built from
// the coordinator's settings, and a call carries the parameters, the
// steps and the task, and gets back the task's meta-gradient and its
// meta.TaskStats (meta.Learner.TaskGradient). MetaTasks, a meta.TaskRunner,
// sends task i of a batch to shard i mod Shards and gives the learner the
// results, which it adds in task order: the run is the in-process one,
// bit for bit, whichever worker computed a task.

// MetaModel is the model name of meta-learning shards. Every worker
// offers it (meta is Go code of this module), and Register refuses it.
const MetaModel = "bilevel-meta"

// metaParams are a MetaModel shard's parameters: what a worker needs to
// build the coordinator's learner.
type metaParams struct {
	Settings meta.Settings
	CNN      models.CNNSettings
	Ways     int
}

// MetaTasks computes the meta-gradients of a meta.Learner's tasks on
// worker processes: set it as the learner's Settings.Runner. It is not
// safe for concurrent use.
type MetaTasks struct {
	p   *Problem
	dim int
}

var _ meta.TaskRunner = (*MetaTasks)(nil)

// NewMetaTasks has s.Workers workers build a learner of ms, cnn and ways
// (those of the coordinator's meta.NewLearner; ms.Runner, Workers and
// Outer are not sent) and returns the runner of its tasks. Of s, Model,
// Params and the sample counts and sizes are set here; Shards defaults to
// Workers/Replicas (each task goes to one shard, so Shards = Workers
// spreads a batch over all of them), and Threads to this process's
// GOMAXPROCS, which fixes the last bits of a result. Close it when done.
func NewMetaTasks(nc *nats.Conn, ms meta.Settings, cnn models.CNNSettings, ways int, s Settings) (*MetaTasks, error) {
	ms.Runner, ms.Workers, ms.Outer = nil, 1, optim.Adam{}
	l, err := meta.NewLearner(ms, cnn, ways)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(metaParams{Settings: ms, CNN: cnn, Ways: ways})
	if err != nil {
		return nil, fmt.Errorf("dist: meta settings: %w", err)
	}
	s.Model, s.Params = MetaModel, params
	s.NumLower, s.NumUpper, s.LowerSizes, s.UpperSizes = 0, 0, nil, nil
	if s.Threads == 0 {
		s.Threads = runtime.GOMAXPROCS(0)
	}
	p, err := New(nc, s)
	if err != nil {
		return nil, err
	}
	return &MetaTasks{p: p, dim: len(l.Snapshot().Params)}, nil
}

// RunTasks implements meta.TaskRunner: one call per task, task i to shard
// i mod Shards. A task whose worker is lost goes to another worker of its
// shard, or to a spare, or waits Settings.JoinTimeout for one to join; then
// it fails with a *CallError naming the task, the shard and the lost
// worker.
func (m *MetaTasks) RunTasks(grads [][]float64, stats []meta.TaskStats, params []float64, steps int, tasks []*data.Task) error {
	if len(params) != m.dim {
		return fmt.Errorf("dist: %d parameters for the workers' learner with %d", len(params), m.dim)
	}
	p := m.p
	if p.err != nil {
		return p.err
	}
	parts := make([]part, len(tasks))
	bodies := make([][]byte, len(tasks))
	for i, t := range tasks {
		parts[i].shard = p.shards[i%len(p.shards)]
		bodies[i] = encodeMetaTask(nil, t)
	}
	err := p.exchange(opMeta, parts, func(pt *part, _ *workerRef, _ bool) *callBody {
		return &callBody{op: opMeta, arg: uint64(steps), x: params, data: bodies[partIndex(parts, pt)]}
	}, m.dim, 4)
	if err != nil {
		i := 0
		for i < len(parts)-1 && parts[i].res != nil {
			i++
		}
		return &CallError{Oracle: fmt.Sprintf("meta-learning task %d of %d (shard %d)", i, len(tasks), parts[i].shard.spec.index), Err: err}
	}
	for i, pt := range parts {
		copy(grads[i], pt.res.a)
		b := pt.res.b
		stats[i] = meta.TaskStats{Accuracy: b[0], Loss: b[1], InnerRatio: b[2], CGResidual: b[3]}
	}
	return nil
}

// Stats returns the messages and bytes so far.
func (m *MetaTasks) Stats() Stats { return m.p.Stats() }

// Close tells the workers to forget the learner and stops listening; it
// does not close the NATS connection.
func (m *MetaTasks) Close() error { return m.p.Close() }

// partIndex returns the index of pt in parts.
func partIndex(parts []part, pt *part) int {
	for j := range parts {
		if &parts[j] == pt {
			return j
		}
	}
	panic("dist: a part of no task")
}

// The encoding of a meta-learning task in a call's data: ways, shots,
// queries and pixels per image (4 bytes each), the support images
// (vector) and labels (index list), the query images and labels.
func encodeMetaTask(buf []byte, t *data.Task) []byte {
	e := encoder{b: buf}
	for _, v := range []int{t.Ways, t.Shots, t.Queries, t.D} {
		e.u32(uint32(v))
	}
	e.f64s(t.SupportX)
	e.ints(t.SupportY)
	e.f64s(t.QueryX)
	e.ints(t.QueryY)
	return e.b
}

// maxMetaDim bounds the ways and pixels of a decoded task, so that their
// products cannot overflow.
const maxMetaDim = 1 << 24

func decodeMetaTask(b []byte) (*data.Task, error) {
	d := decoder{b: b}
	t := &data.Task{Ways: int(d.u32("ways")), Shots: int(d.u32("shots")), Queries: int(d.u32("queries")), D: int(d.u32("pixels"))}
	t.SupportX, t.SupportY = d.f64s("support images"), d.ints("support labels")
	t.QueryX, t.QueryY = d.f64s("query images"), d.ints("query labels")
	switch {
	case d.err != nil:
	case d.off != len(d.b):
		d.fail("%d bytes after the task", len(d.b)-d.off)
	case t.Ways < 1 || t.Ways > maxMetaDim || t.D < 1 || t.D > maxMetaDim:
		d.fail("a task of %d ways and %d pixels per image", t.Ways, t.D)
	case len(t.SupportX) != len(t.SupportY)*t.D || len(t.QueryX) != len(t.QueryY)*t.D:
		d.fail("%d support and %d query labels for %d and %d pixels of %d per image", len(t.SupportY), len(t.QueryY), len(t.SupportX), len(t.QueryX), t.D)
	}
	for _, ys := range [][]int{t.SupportY, t.QueryY} {
		for _, y := range ys {
			if d.err == nil && y >= t.Ways {
				d.fail("label %d of a %d-way task", y, t.Ways)
			}
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("a meta-learning task: %w", d.err)
	}
	for c := range t.Ways {
		t.Classes = append(t.Classes, c)
	}
	return t, nil
}

// newMetaShard builds the learner of a MetaModel shard.
func newMetaShard(params []byte, spec shardSpec) (*shard, error) {
	var mp metaParams
	if err := json.Unmarshal(params, &mp); err != nil {
		return nil, fmt.Errorf("model %s: its parameters: %w", MetaModel, err)
	}
	mp.Settings.Runner, mp.Settings.Workers = nil, 1
	l, err := meta.NewLearner(mp.Settings, mp.CNN, mp.Ways)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", MetaModel, err)
	}
	return &shard{spec: spec, learner: l}, nil
}

// metaCall computes a task's meta-gradient at the call's parameters x
// with arg inner steps.
func (s *shard) metaCall(c *callBody) (*resultBody, uint8, error) {
	t, err := decodeMetaTask(c.data)
	if err != nil {
		return nil, codeFailed, err
	}
	if c.arg > optim.MaxInnerSteps {
		return nil, codeFailed, fmt.Errorf("%d inner steps: at most %d", c.arg, optim.MaxInnerSteps)
	}
	grad := make([]float64, len(c.x))
	st, err := s.learner.TaskGradient(grad, c.x, int(c.arg), t)
	if err != nil {
		return nil, codeFailed, err
	}
	return &resultBody{a: grad, b: []float64{st.Accuracy, st.Loss, st.InnerRatio, st.CGResidual}}, 0, nil
}
