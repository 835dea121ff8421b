package models

import (
	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
)

// CNNInitModel is the few-shot problem of CNN in which every parameter is
// adapted to the task, MAML's (Finn et al. 2017; the MAML baseline of paper
// 003, §5): the network's parameters are θ = θ_0 + δ, all of them — the
// backbone's filters, γ and β and the head's W and b — and
//
//	g(θ_0, δ) = CE(h_θ(X_s)W_θ + b_θ, Y_s),
//	f(θ_0, δ) = CE(h_θ(X_q)W_θ + b_θ, Y_q),
//
// with the outer variable x = θ_0, the initialization MAML learns, and the
// inner variable y = δ, the task's displacement from it. Gradient descent
// on g in δ from δ_0 = 0 runs exactly MAML's inner loop
// θ_{t+1} = θ_t − α∇L_S(θ_t) from θ_0, so d f(θ_0, δ_T(θ_0))/dθ_0 is
// MAML's meta-gradient: what graph.Problem.Unrolled and the reverse sweep
// of package unroll compute for this problem. Because g and f depend on
// θ_0 + δ only, ∇xy g = ∇yy g, and the sweep's first adjoint
// a_0 = d f/dδ_0 equals d f/dθ_0: a method may take it instead and skip the
// mixed products.
//
// The inner loss is the support cross-entropy alone: Lambda is ignored
// (MAML adapts from θ_0 without a penalty, as ANIL does from its head).
// Batch normalization is CNN's, in training mode on each image set. x is
// laid out as CNN's outer variables followed by its inner ones (the
// backbone, then W and b), with CNN's initial values; δ has the same
// layout and starts at 0.
type CNNInitModel struct {
	// CNNModel holds CNN's graph and nodes: its Backbone, W and B are here
	// θ_0 (outer), and its Objective is the problem above.
	CNNModel
}

// CNNInit returns the MAML problem of ways-way tasks with the given support
// and query sets; its arguments are CNN's.
func CNNInit(support, query Data, ways int, s CNNSettings) (*CNNInitModel, error) {
	c, err := CNN(support, query, ways, s)
	if err != nil {
		return nil, err
	}
	m := &CNNInitModel{CNNModel: *c}
	err = building("CNN initialization", func() {
		g := c.Graph
		outer := append(append([]*G.Node{}, c.Objective.Outer...), c.Objective.Inner...)
		var inner []*G.Node
		adapted := make([]*G.Node, len(outer))
		for i, v := range outer {
			d := input(g, "d"+v.Name(), make([]float64, v.Shape().TotalSize()), v.Shape()...)
			inner = append(inner, d)
			adapted[i] = G.Must(G.Add(v, d))
		}
		// The adapted network: CNN's backbone and head on θ_0 + δ.
		net := Backbone{Settings: c.Settings}
		for k := range c.Conv {
			net.Conv = append(net.Conv, adapted[3*k])
			net.Scale = append(net.Scale, adapted[3*k+1])
			net.Shift = append(net.Shift, adapted[3*k+2])
		}
		w := adapted[3*len(c.Conv)]
		var b *G.Node
		if c.B != nil {
			b = adapted[3*len(c.Conv)+1]
		}
		lower, upper := headObjectives(net.embed(c.Support), c.SupportY, net.embed(c.Query), c.QueryY, w, b, 0)
		m.Objective = graph.Objective{Upper: upper, Lower: lower, Outer: outer, Inner: inner,
			LowerData: c.Objective.LowerData, UpperData: c.Objective.UpperData}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
