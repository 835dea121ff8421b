package models

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Model is the part every model shares: the graph its objectives are
// written on and the objective itself. The values the variables hold are
// the starting point (graph.Problem's X0 and Y0).
type Model struct {
	Graph     *G.ExprGraph
	Objective graph.Objective
}

// Compile compiles the model's objective; it is graph.Compile(m.Objective).
func (m *Model) Compile() (*graph.Problem, error) { return graph.Compile(m.Objective) }

// Data is a data set of N samples of D features as plain arrays. A
// classification model reads Labels, a regression model Targets; the other
// may be nil.
type Data struct {
	X       []float64 // N×D features, row-major
	N, D    int
	Labels  []int     // class of each sample, 0 ≤ label < classes (binary models: 0/1 or −1/+1)
	Targets []float64 // target of each sample
}

// checkX validates the shape of d's features; what names d in errors.
func (d Data) checkX(what string) error {
	switch {
	case d.N <= 0:
		return fmt.Errorf("models: %s has N = %d samples; want at least one", what, d.N)
	case d.D <= 0:
		return fmt.Errorf("models: %s has D = %d features; want at least one", what, d.D)
	case len(d.X) != d.N*d.D:
		return fmt.Errorf("models: %s has %d feature values; want N·D = %d·%d = %d", what, len(d.X), d.N, d.D, d.N*d.D)
	}
	return nil
}

// checkLabels validates d's features and its labels against classes.
func (d Data) checkLabels(what string, classes int) error {
	if err := d.checkX(what); err != nil {
		return err
	}
	if len(d.Labels) != d.N {
		return fmt.Errorf("models: %s has %d labels for N = %d samples", what, len(d.Labels), d.N)
	}
	for i, l := range d.Labels {
		if l < 0 || l >= classes {
			return fmt.Errorf("models: %s: label %d of sample %d is outside [0, %d)", what, l, i, classes)
		}
	}
	return nil
}

// checkTargets validates d's features and its targets.
func (d Data) checkTargets(what string) error {
	if err := d.checkX(what); err != nil {
		return err
	}
	if len(d.Targets) != d.N {
		return fmt.Errorf("models: %s has %d targets for N = %d samples", what, len(d.Targets), d.N)
	}
	return nil
}

// checkPair validates that train and val have the same features.
func checkPair(train, val Data) error {
	if train.D != val.D {
		return fmt.Errorf("models: training data have D = %d features, validation data D = %d", train.D, val.D)
	}
	return nil
}

func checkClasses(classes int) error {
	if classes < 2 {
		return fmt.Errorf("models: %d classes; want at least 2", classes)
	}
	return nil
}

// oneHot returns the n×classes one-hot rows of labels.
func oneHot(labels []int, classes int) []float64 {
	y := make([]float64, len(labels)*classes)
	for i, l := range labels {
		y[i*classes+l] = 1
	}
	return y
}

// input returns an input node named name of the given shape holding data
// (not copied): a scalar for no shape, else a tensor.
func input(g *G.ExprGraph, name string, data []float64, shape ...int) *G.Node {
	if len(shape) == 0 {
		return G.NewScalar(g, G.Float64, G.WithName(name), G.WithValue(data[0]))
	}
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
}

// scale returns k·n.
func scale(k float64, n *G.Node) *G.Node { return G.Must(G.Mul(G.NewConstant(k), n)) }

// sumSquares returns Σ n².
func sumSquares(n *G.Node) *G.Node { return G.Must(G.Sum(G.Must(G.Square(n)))) }

// building runs build, turning a panic of gorgonia.Must (a gorgonia error
// while writing the graph) into an error.
func building(name string, build func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("models: building the %s graph: %v", name, r)
		}
	}()
	build()
	return nil
}

func (m *Model) model() *Model { return m }
