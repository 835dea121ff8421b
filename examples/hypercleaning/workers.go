package main

// Hyper-cleaning on worker processes (-workers, -nats): the training and
// validation samples are split between the workers (package dist), each
// building models.HyperCleaning on its rows of the same data with the
// whole λ, read at the global sample index (CleaningSettings.Offset). The
// solvers see a dist.Problem with the oracles of the in-process problem,
// sums reduced in shard order, which agree with it to rounding.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/internal/experiment"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/oracle"
)

// shardParams are what a worker needs to rebuild a setup's data and keep
// its rows: the data set and the flags and seed that draw the split and
// the corruption.
type shardParams struct {
	Data             string
	Train, Val, Test int
	P                float64
	Seed             uint64
	Center           bool
	Cr               float64
}

func init() {
	dist.Register("hypercleaning", func(params []byte, sh dist.Shard) (graph.Objective, error) {
		var sp shardParams
		if err := json.Unmarshal(params, &sp); err != nil {
			return graph.Objective{}, err
		}
		images, err := experiment.LoadImages(sp.Data)
		if err != nil {
			return graph.Objective{}, err
		}
		noisy, val, _, _, err := prepare(config{Train: sp.Train, Val: sp.Val, Tst: sp.Test, Center: sp.Center}, images, sp.P, sp.Seed)
		if err != nil {
			return graph.Objective{}, err
		}
		rows := func(ds *data.Dataset, r dist.Range) models.Data {
			return experiment.ModelData(ds.Subset(seqRange(r.Start, r.End)))
		}
		m, err := models.HyperCleaning(rows(noisy, sh.Lower), rows(val, sh.Upper), noisy.Classes,
			models.CleaningSettings{Cr: sp.Cr, Offset: sh.Lower.Start, Samples: noisy.N})
		if err != nil {
			return graph.Objective{}, err
		}
		return m.Objective, nil
	})
}

func seqRange(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// prepare draws a setup's data: the split of images, the centering (by
// the training images' mean) and the corruption of the training labels.
func prepare(c config, images *experiment.Images, p float64, seed uint64) (noisy, val, test *data.Dataset, corr *data.Corruption, err error) {
	train, val, test, err := images.Split(c.Train, c.Val, c.Tst, seed)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if c.Center {
		experiment.Center(train, val, test)
	}
	noisy, corr, err = train.Corrupt(p, seed)
	return noisy, val, test, corr, err
}

// startCluster starts the worker processes of -workers (on an embedded
// server, or on the server of -nats, where they are started by the user),
// or returns nil for the problem in this process.
func startCluster(c config) (*dist.Cluster, error) {
	if c.Workers == 0 {
		return nil, nil
	}
	start := c.Workers
	if c.NATS != "" {
		start = 0
	}
	return dist.StartCluster(dist.ClusterSettings{URL: c.NATS, Workers: start, Pool: workerPool()})
}

// workerPool is the pool of the workers: BILEVEL_DIST_POOL or
// "hypercleaning".
func workerPool() string {
	if p := os.Getenv(dist.EnvPool); p != "" {
		return p
	}
	return "hypercleaning"
}

// distProblem returns the setup's problem on the workers of cl: the data
// set of images, split as prepare splits it, in -workers shards.
func distProblem(c config, cl *dist.Cluster, images *experiment.Images, p float64, seed uint64, nLower, nUpper int) (oracle.Problem, []float64, []float64, error) {
	names := experiment.FileNames(c.Datasets)
	i := slices.Index(names, images.Name)
	if i < 0 {
		return nil, nil, nil, fmt.Errorf("data set %s is not among -data", images.Name)
	}
	params, err := json.Marshal(shardParams{Data: c.Datasets[i], Train: c.Train, Val: c.Val, Test: c.Tst, P: p, Seed: seed, Center: c.Center, Cr: c.Cr})
	if err != nil {
		return nil, nil, nil, err
	}
	dp, err := dist.New(cl.Conn, dist.Settings{Model: "hypercleaning", Params: params, NumLower: nLower, NumUpper: nUpper,
		Workers: c.Workers, Pool: workerPool()})
	if err != nil {
		return nil, nil, nil, err
	}
	return dp, dp.X0(nil), dp.Y0(nil), nil
}

// close releases the setup's workers, if any.
func (e *setup) close() {
	if d, ok := e.problem.(*dist.Problem); ok {
		d.Close()
	}
}
