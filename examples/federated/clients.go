package main

// The clients of the federated parts (fedhr, imbalanced): how the data are
// split between them, how a client reads its own part and builds its
// objective, and where the clients run — worker processes of this program
// on an embedded or external NATS server (package dist), or simulated in
// this process (optim.Federation).

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// split says which data the clients of one run hold: the part (its model),
// the data set, the seed and the sizes. It is the parameters a worker
// receives to build a client (JSON), so that a client process reads and
// keeps only its own partition.
type split struct {
	Part      string // "fedhr" or "imbalanced"
	Data      string
	Seed      uint64
	Clients   int
	PerClient int     // fedhr: images per client
	Size      int     // imbalanced: images in all, after the imbalance
	Ratio     float64 // imbalanced: the largest class over the smallest
	Pool      int
	Hidden    int
}

// partition returns each client's training (lower level) and validation
// (upper level) samples, as indices into the training images whose labels
// are given: the pool of images (all of them drawn at random for fedhr; the
// imbalanced subset for imbalanced), sorted by label and cut into 2M
// shards, two per client at random (the non-iid split of paper 004's
// companion code, ShardsByLabel), and 20% of each client's images held out
// for its validation set.
func (s split) partition(labels []int) (train, val [][]int, err error) {
	pool, err := s.pool(labels)
	if err != nil {
		return nil, nil, err
	}
	poolLabels := make([]int, len(pool))
	for i, j := range pool {
		poolLabels[i] = labels[j]
	}
	shards, err := optim.ShardsByLabel(poolLabels, s.Clients, 2, s.Seed)
	if err != nil {
		return nil, nil, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0xc3))
	train, val = make([][]int, s.Clients), make([][]int, s.Clients)
	for m, sh := range shards {
		sh = slices.Clone(sh)
		rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		nv := max(1, len(sh)/5)
		for k, i := range sh {
			if k < nv {
				val[m] = append(val[m], pool[i])
			} else {
				train[m] = append(train[m], pool[i])
			}
		}
		slices.Sort(train[m])
		slices.Sort(val[m])
	}
	return train, val, nil
}

// pool returns the training images the clients share out, sorted.
func (s split) pool(labels []int) ([]int, error) {
	rng := rand.New(rand.NewPCG(s.Seed, 0xd1))
	if s.Part == "fedhr" {
		n := s.Clients * s.PerClient
		if n > len(labels) {
			return nil, fmt.Errorf("%d clients × %d images exceed the %d training images", s.Clients, s.PerClient, len(labels))
		}
		pool := rng.Perm(len(labels))[:n]
		slices.Sort(pool)
		return pool, nil
	}
	// The long tail of the companion code of paper 004
	// (imbalance/utils/sampling.py): class i keeps its first
	// ⌈(n/C)·μ^i⌉ images (all it has when fewer), μ = ratio^(−1/(C−1)).
	classes := slices.Max(labels) + 1
	nominal := float64(len(labels) / classes) // 6000 for MNIST
	mu := math.Pow(s.Ratio, -1/float64(classes-1))
	var kept []int
	taken := make([]int, classes)
	for i, l := range labels {
		if taken[l] < int(math.Ceil(nominal*math.Pow(mu, float64(l)))) {
			kept = append(kept, i)
			taken[l]++
		}
	}
	if s.Size > len(kept) {
		return nil, fmt.Errorf("the imbalanced subset has %d images, fewer than the %d asked", len(kept), s.Size)
	}
	pool := make([]int, s.Size)
	for k, j := range rng.Perm(len(kept))[:s.Size] {
		pool[k] = kept[j]
	}
	slices.Sort(pool)
	return pool, nil
}

// sizes returns the numbers of training and validation samples of each
// client.
func (s split) sizes(labels []int) (lower, upper []int, err error) {
	train, val, err := s.partition(labels)
	if err != nil {
		return nil, nil, err
	}
	for m := range train {
		lower, upper = append(lower, len(train[m])), append(upper, len(val[m]))
	}
	return lower, upper, nil
}

// images reads the training (or test) images of data set name: all of
// them (rows nil; labels only when labelsOnly) or the given rows, scaled
// to [0, 1]. The files are read as bytes, so that a client process holds
// the images of its own rows only as float64.
func images(name string, test bool, rows []int, labelsOnly bool) (*data.Dataset, error) {
	if name == "embedded" {
		train, tst, err := data.EmbeddedFashionMNIST()
		if test {
			train = tst
		}
		if err != nil || rows == nil {
			return train, err
		}
		return train.Subset(rows), nil
	}
	dir := name
	switch name {
	case "mnist":
		d, err := experiment.MNISTDir()
		if err != nil {
			return nil, err
		}
		dir = d
	case "fashion":
		dir = data.DefaultFashionMNISTDir
	}
	open := func(base string) (*data.IDX, error) {
		for _, f := range []string{base + ".gz", base} {
			m, err := data.ReadIDXFile(filepath.Join(dir, f))
			if !errors.Is(err, os.ErrNotExist) {
				return m, err
			}
		}
		return nil, fmt.Errorf("no %s(.gz) in %s", base, dir)
	}
	imFile, lbFile := data.FashionMNISTTrainImages, data.FashionMNISTTrainLabels
	if test {
		imFile, lbFile = data.FashionMNISTTestImages, data.FashionMNISTTestLabels
	}
	lb, err := open(lbFile)
	if err != nil {
		return nil, err
	}
	if labelsOnly {
		labels := make([]int, lb.Len())
		for i, v := range lb.Float64s(nil) {
			labels[i] = int(v)
		}
		return &data.Dataset{Labels: labels, N: len(labels), Classes: 10}, nil
	}
	im, err := open(imFile)
	if err != nil {
		return nil, err
	}
	if im.Type != data.IDXUint8 || len(im.Dims) != 3 || lb.Len() != im.Dims[0] {
		return nil, fmt.Errorf("%s: %v images of dimensions %v for %d labels, want uint8 N×H×W", dir, im.Type, im.Dims, lb.Len())
	}
	if rows != nil {
		d := im.Dims[1] * im.Dims[2]
		sub := &data.IDX{Type: im.Type, Dims: []int{len(rows), im.Dims[1], im.Dims[2]}, Bytes: make([]byte, 0, len(rows)*d)}
		sl := &data.IDX{Type: lb.Type, Dims: []int{len(rows)}}
		for _, i := range rows {
			if i < 0 || i >= im.Dims[0] {
				return nil, fmt.Errorf("image %d of %d", i, im.Dims[0])
			}
			sub.Bytes = append(sub.Bytes, im.Bytes[i*d:(i+1)*d]...)
			sl.Bytes = append(sl.Bytes, lb.Bytes[i*lb.Type.Size():(i+1)*lb.Type.Size()]...)
		}
		im, lb = sub, sl
	}
	return data.FromIDX(im, lb, 10)
}

// labelsOf returns the labels of the training images of data set name.
func labelsOf(name string) ([]int, error) {
	ds, err := images(name, false, nil, true)
	if err != nil {
		return nil, err
	}
	return ds.Labels, nil
}

// clientData returns client m's training and validation images, pooled.
func (s split) clientData(m int) (train, val *data.Dataset, err error) {
	labels, err := labelsOf(s.Data)
	if err != nil {
		return nil, nil, err
	}
	tr, va, err := s.partition(labels)
	if err != nil {
		return nil, nil, err
	}
	if m < 0 || m >= len(tr) {
		return nil, nil, fmt.Errorf("client %d of %d", m, len(tr))
	}
	if train, err = images(s.Data, false, tr[m], false); err != nil {
		return nil, nil, err
	}
	if val, err = images(s.Data, false, va[m], false); err != nil {
		return nil, nil, err
	}
	if train, err = experiment.Pool(train, s.Pool); err != nil {
		return nil, nil, err
	}
	val, err = experiment.Pool(val, s.Pool)
	return train, val, err
}

// objective builds client m's objective: the part's model on the client's
// own images.
func (s split) objective(m int) (graph.Objective, error) {
	train, val, err := s.clientData(m)
	if err != nil {
		return graph.Objective{}, err
	}
	if s.Part == "fedhr" {
		return hrObjective(train, val, s)
	}
	return vsObjective(train, val, s)
}

func init() {
	// A worker builds client Shard.Index of the split in its parameters;
	// its data are that client's images, its shard ranges their sizes.
	dist.Register("federated-client", func(params []byte, sh dist.Shard) (graph.Objective, error) {
		var s split
		if err := json.Unmarshal(params, &s); err != nil {
			return graph.Objective{}, err
		}
		return s.objective(sh.Index)
	})
}

// clients are the clients of one run and the problem Solve runs on.
type clients struct {
	fed    optim.FedClients
	p      oracle.Problem // the clients' average objective: dimensions and the default Neumann step
	x0, y0 []float64
	dp     *dist.Problem // the clients' processes, nil in process
}

// cluster is where the client processes run: a NATS server (embedded or
// the one of -nats) and the workers this program started.
type cluster struct {
	c    *dist.Cluster
	pool string
}

// newCluster starts the NATS server and the workers (or joins the server
// of -nats, where the workers are started by the user), or returns nil
// when the clients are simulated in this process.
func newCluster(c config) (*cluster, error) {
	if c.Workers == 0 {
		return nil, nil
	}
	start := c.workers()
	if c.NATS != "" {
		start = 0
	}
	cl, err := dist.StartCluster(dist.ClusterSettings{URL: c.NATS, Workers: start, Pool: natsPool()})
	if err != nil {
		return nil, err
	}
	return &cluster{c: cl, pool: natsPool()}, nil
}

func (cl *cluster) Close() {
	if cl != nil {
		cl.c.Close()
	}
}

// open makes the clients of split s: client processes on cl, or, when cl
// is nil, the clients simulated in this process on one problem holding
// every client's images (optim.Federation).
func (cl *cluster) open(s split, workers int) (*clients, error) {
	labels, err := labelsOf(s.Data)
	if err != nil {
		return nil, err
	}
	lower, upper, err := s.sizes(labels)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		params, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		dp, err := dist.New(cl.c.Conn, dist.Settings{Model: "federated-client", Params: params, LowerSizes: lower, UpperSizes: upper,
			Workers: workers, Pool: cl.pool, JoinTimeout: 2 * time.Minute, ProbeTimeout: time.Minute})
		if err != nil {
			return nil, err
		}
		return &clients{fed: dp.Clients(), p: dp, x0: dp.X0(nil), y0: dp.Y0(nil), dp: dp}, nil
	}
	// In process: the clients' images, client after client, and each
	// client's shards the ranges they occupy.
	var trains, vals []*data.Dataset
	fed := &optim.Federation{Lower: make([][]int, s.Clients), Upper: make([][]int, s.Clients)}
	nt, nv := 0, 0
	for m := range s.Clients {
		tr, va, err := s.clientData(m)
		if err != nil {
			return nil, err
		}
		trains, vals = append(trains, tr), append(vals, va)
		for i := range tr.N {
			fed.Lower[m] = append(fed.Lower[m], nt+i)
		}
		for i := range va.N {
			fed.Upper[m] = append(fed.Upper[m], nv+i)
		}
		nt, nv = nt+tr.N, nv+va.N
	}
	train, val := concat(trains), concat(vals)
	var obj graph.Objective
	if s.Part == "fedhr" {
		obj, err = hrObjective(train, val, s)
	} else {
		obj, err = vsObjective(train, val, s)
	}
	if err != nil {
		return nil, err
	}
	p, err := graph.Compile(obj)
	if err != nil {
		return nil, err
	}
	return &clients{fed: fed, p: p, x0: p.X0(nil), y0: p.Y0(nil)}, nil
}

func (c *clients) Close() {
	if c.dp != nil {
		c.dp.Close()
	}
}

// concat returns the samples of the data sets one after the other.
func concat(ds []*data.Dataset) *data.Dataset {
	out := &data.Dataset{D: ds[0].D, Classes: ds[0].Classes, Height: ds[0].Height, Width: ds[0].Width}
	for _, d := range ds {
		out.X = append(out.X, d.X...)
		out.Labels = append(out.Labels, d.Labels...)
		out.N += d.N
	}
	return out
}
