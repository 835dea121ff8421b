package meta

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/optim"
)

// PretrainSettings configures a Pretrainer. Zero values mean the defaults.
type PretrainSettings struct {
	// Batch is the number of images per step (default 64).
	Batch int
	// Shares is the number of parts of sizes differing by at most one that
	// the batch is split into for batch normalization, each normalized with
	// its own statistics (default 1: the whole batch); every share needs
	// two images. The result depends on Shares, not on Workers.
	Shares int
	// Outer is the optimizer, Adam (its zero value: LR 1e-3).
	Outer optim.Adam
	// Workers is the number of goroutines that process the shares
	// (default GOMAXPROCS, at most Shares). The graph's kernels split large
	// products across the cores within a share.
	Workers int
	// Seed draws the minibatches: step k's batch depends on (Seed, k) only.
	Seed uint64
}

// Pretrainer trains the backbone of models.CNN by plain classification of
// the 4·len(base) rotated classes of base classes of a data set (image i
// of base class base[b] turned by q quarter turns is class 4b + q), with a
// linear head on the features and Adam on the mean cross-entropy of each
// minibatch: the pre-trained reference baseline of few-shot learning. Its
// parameters are φ (models.CNN's outer vector), then the head W
// (features × classes) and b (classes).
type Pretrainer struct {
	s        PretrainSettings
	cnn      models.CNNSettings
	ds       *data.Dataset
	base     []int
	byBase   [][]int
	classes  int
	features int
	dimX     int
	st       Snapshot
	shares   []*pretrainShare
	workers  int
}

// pretrainShare is one batch-normalization share of a step: its compiled
// problems and buffers.
type pretrainShare struct {
	n        int
	pr       *probe
	head     *headProblem
	images   []float64
	labels   []int
	feats    []float64
	gradHead []float64
	gradFeat []float64
	gradPhi  []float64
}

// NewPretrainer returns a pretrainer at the initial backbone of cnn and a
// zero head.
func NewPretrainer(ds *data.Dataset, base []int, cnn models.CNNSettings, s PretrainSettings) (*Pretrainer, error) {
	if s.Batch == 0 {
		s.Batch = 64
	}
	if s.Shares == 0 {
		s.Shares = 1
	}
	if err := s.Outer.Validate(); err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	side := cnn.Side
	if side == 0 {
		side = 28
	}
	if ds.Height != side || ds.Width != side {
		return nil, fmt.Errorf("meta: Pretrainer: images of %d×%d pixels; the backbone takes %d×%d", ds.Height, ds.Width, side, side)
	}
	feats, err := models.CNNFeatures(cnn)
	if err != nil {
		return nil, err
	}
	if len(base) == 0 {
		return nil, fmt.Errorf("meta: Pretrainer: no base classes")
	}
	p := &Pretrainer{s: s, cnn: cnn, ds: ds, base: append([]int(nil), base...), classes: 4 * len(base), features: feats}
	pos := map[int]int{}
	for k, b := range base {
		if b < 0 || b >= ds.Classes {
			return nil, fmt.Errorf("meta: Pretrainer: base class %d outside [0, %d)", b, ds.Classes)
		}
		if _, dup := pos[b]; dup {
			return nil, fmt.Errorf("meta: Pretrainer: base class %d repeated", b)
		}
		pos[b] = k
	}
	p.byBase = make([][]int, len(base))
	for i, l := range ds.Labels {
		if k, ok := pos[l]; ok {
			p.byBase[k] = append(p.byBase[k], i)
		}
	}
	for k, m := range p.byBase {
		if len(m) == 0 {
			return nil, fmt.Errorf("meta: Pretrainer: base class %d has no images", base[k])
		}
	}
	if s.Batch < 2 {
		return nil, fmt.Errorf("meta: Pretrainer: Batch = %d; want at least 2 images", s.Batch)
	}
	ns := s.Shares
	if ns < 1 || ns > s.Batch/2 { // batch normalization needs two images per share
		return nil, fmt.Errorf("meta: Pretrainer: Shares = %d; want between 1 and Batch/2 = %d", ns, s.Batch/2)
	}
	p.workers = s.Workers
	if p.workers <= 0 {
		p.workers = runtime.GOMAXPROCS(0)
	}
	p.workers = min(p.workers, ns)
	for i := 0; i < ns; i++ {
		n := s.Batch/ns + b2i(i < s.Batch%ns)
		pr, err := newProbe(n, cnn, false)
		if err != nil {
			return nil, err
		}
		sh := &pretrainShare{n: n, pr: pr, images: make([]float64, n*side*side), labels: make([]int, n),
			feats: make([]float64, 2*n*feats), gradFeat: make([]float64, 2*n*feats), gradPhi: make([]float64, pr.p.DimX())}
		if sh.head, err = newHead(n, n, p.classes, cnn, false); err != nil {
			return nil, err
		}
		sh.gradHead = make([]float64, sh.head.head.DimY())
		p.shares = append(p.shares, sh)
		p.dimX = pr.p.DimX()
	}
	p.st.Params = make([]float64, p.dimX+p.shares[0].head.head.DimY())
	p.shares[0].pr.p.X0(p.st.Params[:p.dimX])
	return p, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Classes returns the number of rotated classes.
func (p *Pretrainer) Classes() int { return p.classes }

// Backbone returns φ; it aliases the pretrainer's parameters.
func (p *Pretrainer) Backbone() []float64 { return p.st.Params[:p.dimX] }

// Snapshot returns a copy of the pretrainer's state.
func (p *Pretrainer) Snapshot() Snapshot { return p.st.clone() }

// Restore restores a state saved by Snapshot.
func (p *Pretrainer) Restore(st Snapshot) error {
	if len(st.Params) != len(p.st.Params) {
		return fmt.Errorf("meta: pretrainer state with %d parameters; want %d", len(st.Params), len(p.st.Params))
	}
	for _, v := range [][]float64{st.Opt.M, st.Opt.S} {
		if v != nil && len(v) != len(st.Params) {
			return fmt.Errorf("meta: optimizer state of length %d for %d parameters", len(v), len(st.Params))
		}
	}
	p.st = st.clone()
	return nil
}

// Step runs one step of Adam on a minibatch drawn from (Seed, iteration)
// and reports its mean loss and accuracy before the step.
func (p *Pretrainer) Step() (StepStats, error) {
	start := time.Now()
	k := p.st.Iter
	rng := rand.New(rand.NewPCG(taskSeed(p.s.Seed, uint64(k)), 0x9e7a))
	d := p.ds.D
	side := p.ds.Height
	for _, sh := range p.shares {
		for i := 0; i < sh.n; i++ {
			b, q := rng.IntN(len(p.base)), rng.IntN(4)
			img := p.byBase[b][rng.IntN(len(p.byBase[b]))]
			data.Rotate(sh.images[i*d:(i+1)*d], p.ds.Row(img), side, q)
			sh.labels[i] = 4*b + q
		}
	}
	phi, head := p.st.Params[:p.dimX], p.st.Params[p.dimX:]
	accs, losses := make([]float64, len(p.shares)), make([]float64, len(p.shares))
	err := parallelIndices(p.workers, len(p.shares), func(i int) error {
		var err error
		accs[i], losses[i], err = p.shares[i].step(phi, head, p.classes, p.features, p.cnn.NoBias)
		return err
	})
	if err != nil {
		return StepStats{Iter: k}, fmt.Errorf("meta: pretraining step %d: %w", k, err)
	}
	// The batch mean: each share's mean weighted by its size, in share
	// order, so that the sum does not depend on the workers.
	grad := make([]float64, len(p.st.Params))
	var acc, loss, norm float64
	for i, sh := range p.shares {
		c := float64(sh.n) / float64(p.s.Batch)
		for j, v := range sh.gradPhi {
			grad[j] += c * v
		}
		for j, v := range sh.gradHead {
			grad[p.dimX+j] += c * v
		}
		acc += c * accs[i]
		loss += c * losses[i]
	}
	for _, v := range grad {
		norm += v * v
	}
	if !finite(grad) {
		return StepStats{Iter: k}, fmt.Errorf("meta: pretraining step %d: %w", k, ErrNonFinite)
	}
	p.s.Outer.Step(&p.st.Opt, p.st.Params, grad)
	p.st.Iter++
	return StepStats{Iter: k, Loss: loss, Accuracy: acc, GradNorm: math.Sqrt(norm), Seconds: time.Since(start).Seconds()}, nil
}

// step computes the gradient of the share's mean cross-entropy in φ and in
// the head, and its accuracy and loss.
func (w *pretrainShare) step(phi, head []float64, classes, features int, noBias bool) (acc, loss float64, err error) {
	nf := w.n * features
	if err := w.pr.features(w.feats[nf:], phi, w.images); err != nil {
		return 0, 0, err
	}
	copy(w.feats[:nf], w.feats[nf:]) // the head problem's support set is unused
	if err := w.head.setLabels(w.labels, w.labels); err != nil {
		return 0, 0, err
	}
	w.head.head.GradF(w.gradFeat, w.gradHead, w.feats, head, nil)
	w.pr.pullback(w.gradPhi, w.gradFeat[nf:])
	acc, loss = scoreHead(w.feats[nf:], w.labels, head, features, classes, noBias)
	return acc, loss, nil
}
