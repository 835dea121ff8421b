// Package catalog registers the models of package models with package
// dist, on the data sets of package data, so that dist/cmd/worker can
// serve them and a coordinator can name them without writing a
// Constructor:
//
//	logistic         models.LogisticRegression (a penalty per feature)
//	binary-logistic  models.BinaryLogisticRegression
//	ridge            models.RidgeRegression, on targets ±1
//	mlp              models.MLP (hyper-representation)
//
// Each is built from Params, sent as JSON in dist.Settings.Params (Settings
// makes both). A worker reads the data set whole and keeps the rows of its
// shard, so every worker needs the data at hand (the Debian package
// dataset-fashion-mnist, say); a model on data larger than one machine
// needs its own Constructor that reads only its rows.
//
// Hyper-cleaning is not here: its per-sample weights λ_i must be indexed by
// the global sample index, which models.HyperCleaning cannot do yet.
package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
)

// Params describe a catalog model and its data.
type Params struct {
	// Data is the data set: "synthetic" (data.LogisticData, the default),
	// "fashion-mnist" (the files in Dir, default data.DefaultFashionMNISTDir)
	// or "fashion-embedded" (data.EmbeddedFashionMNIST).
	Data string `json:",omitempty"`
	Dir  string `json:",omitempty"`
	// Train and Val are the numbers of lower-level (training) and
	// upper-level (validation) samples: the first ones of the training
	// and test sets, or for synthetic data the first Train and the next
	// Val of one draw.
	Train, Val int
	// Features, Classes and Seed shape synthetic data (defaults 20
	// features; 2 classes for binary-logistic and ridge, 10 otherwise).
	// The Fashion-MNIST sets have 784 features and 10 classes.
	Features, Classes int    `json:",omitempty"`
	Seed              uint64 `json:",omitempty"`
	// Bias adds the models' intercepts; Float32 holds the data in float32
	// (graph.Objective.Float32Data).
	Bias, Float32 bool `json:",omitempty"`
	// Hidden is the MLP's hidden width (default 32) and MLPSeed the seed
	// of its first layer.
	Hidden  int    `json:",omitempty"`
	MLPSeed uint64 `json:",omitempty"`
}

// Models lists the names catalog registers.
var Models = []string{"logistic", "binary-logistic", "ridge", "mlp"}

// Settings returns dist.Settings for model on the data p describes: the
// model's name, p as JSON, and the sample counts. Set the number of
// workers (and the rest) on the result.
func Settings(model string, p Params) (dist.Settings, error) {
	if err := p.check(model); err != nil {
		return dist.Settings{}, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return dist.Settings{}, err
	}
	return dist.Settings{Model: model, Params: b, NumLower: p.Train, NumUpper: p.Val}, nil
}

func (p *Params) check(model string) error {
	switch {
	case model != "logistic" && model != "binary-logistic" && model != "ridge" && model != "mlp":
		return fmt.Errorf("catalog: no model %q; the catalog has %v", model, Models)
	case p.Train < 1 || p.Val < 1:
		return fmt.Errorf("catalog: Params.Train = %d and Val = %d: want at least one sample each", p.Train, p.Val)
	case p.Data != "" && p.Data != "synthetic" && p.Data != "fashion-mnist" && p.Data != "fashion-embedded":
		return fmt.Errorf("catalog: Params.Data = %q: want synthetic, fashion-mnist or fashion-embedded", p.Data)
	case p.Features < 0 || p.Classes < 0 || p.Hidden < 0:
		return fmt.Errorf("catalog: Params.Features = %d, Classes = %d, Hidden = %d: none may be negative", p.Features, p.Classes, p.Hidden)
	}
	binary := model == "binary-logistic" || model == "ridge"
	if p.Data == "" {
		p.Data = "synthetic"
	}
	if p.Data != "synthetic" && binary {
		return fmt.Errorf("catalog: %s needs two classes; Fashion-MNIST has 10: use Data synthetic", model)
	}
	if p.Data == "synthetic" {
		if p.Features == 0 {
			p.Features = 20
		}
		if p.Classes == 0 {
			p.Classes = 10
			if binary {
				p.Classes = 2
			}
		}
		if binary && p.Classes != 2 {
			return fmt.Errorf("catalog: %s has two classes, not Params.Classes = %d", model, p.Classes)
		}
	}
	return nil
}

// Objective builds model on the whole data p describes: the problem in
// one process, which the workers' shards split.
func Objective(model string, p Params) (graph.Objective, error) {
	s, err := Settings(model, p)
	if err != nil {
		return graph.Objective{}, err
	}
	return build(model, s.Params, dist.Shard{Count: 1, Lower: dist.Range{End: p.Train, Total: p.Train}, Upper: dist.Range{End: p.Val, Total: p.Val}})
}

func init() {
	for _, name := range Models {
		dist.Register(name, func(params []byte, sh dist.Shard) (graph.Objective, error) { return build(name, params, sh) })
	}
}

// build is the Constructor of every catalog model.
func build(model string, params []byte, sh dist.Shard) (graph.Objective, error) {
	var p Params
	if err := json.Unmarshal(params, &p); err != nil {
		return graph.Objective{}, fmt.Errorf("catalog: parameters of %s: %w", model, err)
	}
	if err := p.check(model); err != nil {
		return graph.Objective{}, err
	}
	train, val, classes, err := p.load(sh)
	if err != nil {
		return graph.Objective{}, err
	}
	var obj graph.Objective
	switch model {
	case "logistic":
		m, err := models.LogisticRegression(train, val, classes, models.LogisticSettings{Bias: p.Bias})
		if err != nil {
			return graph.Objective{}, err
		}
		obj = m.Objective
	case "binary-logistic":
		m, err := models.BinaryLogisticRegression(train, val, models.BinarySettings{Bias: p.Bias})
		if err != nil {
			return graph.Objective{}, err
		}
		obj = m.Objective
	case "ridge":
		for _, d := range []*models.Data{&train, &val} {
			d.Targets = make([]float64, d.N)
			for i, l := range d.Labels {
				d.Targets[i] = float64(2*l - 1)
			}
		}
		m, err := models.RidgeRegression(train, val)
		if err != nil {
			return graph.Objective{}, err
		}
		obj = m.Objective
	case "mlp":
		m, err := models.MLP(train, val, classes, models.MLPSettings{Hidden: p.Hidden, Bias: p.Bias, Seed: p.MLPSeed})
		if err != nil {
			return graph.Objective{}, err
		}
		obj = m.Objective
	}
	obj.Float32Data = p.Float32
	return obj, nil
}

// load returns the shard's rows of the training and validation data, and
// the number of classes.
func (p Params) load(sh dist.Shard) (train, val models.Data, classes int, err error) {
	if sh.Lower.Total != p.Train || sh.Upper.Total != p.Val {
		return train, val, 0, fmt.Errorf("catalog: the shard splits %d and %d samples, the parameters say Train = %d and Val = %d: make the dist.Settings with catalog.Settings", sh.Lower.Total, sh.Upper.Total, p.Train, p.Val)
	}
	var tr, te *data.Dataset
	switch p.Data {
	case "synthetic":
		all, _ := data.LogisticData(p.Train+p.Val, p.Features, &data.LogisticOptions{Classes: p.Classes}, p.Seed)
		tr, te = all, all
	case "fashion-mnist":
		tr, te, err = data.LoadFashionMNIST(p.Dir)
	case "fashion-embedded":
		tr, te, err = data.EmbeddedFashionMNIST()
	}
	if err != nil {
		return train, val, 0, err
	}
	valOffset := 0
	if p.Data == "synthetic" {
		valOffset = p.Train
	}
	if p.Train > tr.N || valOffset+p.Val > te.N {
		return train, val, 0, fmt.Errorf("catalog: %s has %d training and %d test samples; Params ask for %d and %d", p.Data, tr.N, te.N-valOffset, p.Train, p.Val)
	}
	rows := func(ds *data.Dataset, offset int, r dist.Range) models.Data {
		idx := make([]int, r.Len())
		for i := range idx {
			idx[i] = offset + r.Start + i
		}
		s := ds.Subset(idx)
		return models.Data{X: s.X, N: s.N, D: s.D, Labels: s.Labels}
	}
	return rows(tr, 0, sh.Lower), rows(te, valOffset, sh.Upper), tr.Classes, nil
}
