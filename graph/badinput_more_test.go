package graph

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestBadInputMore adds to TestBadInput the remaining kinds of bad
// objective: missing pieces, nil nodes, scalar data, inputs without a
// value, and several unsupported operations, all named in one error.
func TestBadInputMore(t *testing.T) {
	cases := []struct {
		name  string
		build func() Objective
		want  []string
	}{
		{"no Lower", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Lower = nil
			return o
		}, []string{"needs both Upper and Lower"}},
		{"no Outer", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Outer = nil
			return o
		}, []string{"at least one Outer and one Inner"}},
		{"nil variable", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.Inner = append(o.Inner, nil)
			return o
		}, []string{"nil node among the inner variable"}},
		{"scalar data", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			s := G.NewScalar(o.Lower.Graph(), G.Float64, G.WithName("s"), G.WithValue(2.0))
			o.Lower = G.Must(G.Add(o.Lower, s))
			o.LowerData = append(o.LowerData, s)
			return o
		}, []string{"data node", "s", "is a scalar"}},
		{"input without a value", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			c := G.NewVector(o.Lower.Graph(), G.Float64, G.WithShape(3), G.WithName("novalue"))
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(c))))
			return o
		}, []string{"novalue", "declared in none of"}},
		{"constant without a value", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			c := G.NewVector(o.Lower.Graph(), G.Float64, G.WithShape(3), G.WithName("novalue"))
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(c))))
			o.Constants = []*G.Node{c}
			return o
		}, []string{"novalue", "has no value"}},
		{"two unsupported operations", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			w := G.Must(G.Reshape(o.Inner[0], tensor.Shape{3}))
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(G.Must(G.Sparsemax(w))))))
			ones := G.NewConstant(tensor.New(tensor.WithShape(1, 3, 1, 1), tensor.WithBacking([]float64{1, 1, 1})))
			gn := G.Must(G.GroupNorm(G.Must(G.Reshape(w, tensor.Shape{1, 3, 1, 1})), ones, ones, 1, 3, 1e-5))
			o.Upper = G.Must(G.Add(o.Upper, G.Must(G.Sum(gn))))
			return o
		}, []string{"sparsemax", "use SoftMax", "GroupNorm", "supported operations"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(c.build())
			if err == nil {
				t.Fatal("Compile accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestProgrammerErrors: wrongly sized vectors and bad batches are
// programmer errors; the oracles panic with a message naming the problem
// (gonum's convention), and nothing is computed.
func TestProgrammerErrors(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	x, y := p.X0(nil), p.Y0(nil)
	for _, c := range []struct {
		name, want string
		call       func()
	}{
		{"short x", "length", func() { p.G(x[:2], y, nil) }},
		{"long destination", "length", func() { p.GradG(nil, make([]float64, 4), x, y, nil) }},
		{"short HVP vector", "length", func() { p.HVP(make([]float64, 3), x, y, []float64{1}, nil) }},
		{"empty batch", "empty batch; pass nil", func() { p.G(x, y, []int{}) }},
		{"batch index out of range", "batch index 4 out of range for 4 samples", func() { p.G(x, y, []int{0, 4}) }},
		{"negative batch index", "batch index -1", func() { p.GradG(nil, make([]float64, 3), x, y, []int{-1}) }},
		{"X0 destination", "length mismatch", func() { p.X0(make([]float64, 5)) }},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("%s: no panic", c.name)
					return
				}
				if msg, _ := r.(string); !strings.Contains(msg, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
				}
			}()
			c.call()
		}()
	}
}
