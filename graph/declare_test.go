package graph

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestDeclarationMistakes: every declaration mistake of the issue is an
// error at Compile naming the user's node (and element), never a silent
// constant, a panic or an error about an internal node later.
func TestDeclarationMistakes(t *testing.T) {
	cases := []struct {
		name  string
		build func() Objective
		want  []string
	}{
		{"variable left out of Inner", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			v := vecNode(o.Lower.Graph(), "forgotten", []float64{1, 2})
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(G.Must(G.Square(v))))))
			return o
		}, []string{`"forgotten"`, "read by the lower objective g", "Outer, Inner", "LowerData", "Objective.Constants"}},
		{"data left out of LowerData", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			o.LowerData = o.LowerData[:1]
			return o
		}, []string{`"t" with shape (4, 1)`, "read by the lower objective g", "declared in none of"}},
		{"input read by both objectives", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			v := vecNode(o.Lower.Graph(), "shared", []float64{1})
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(v))))
			o.Upper = G.Must(G.Add(o.Upper, G.Must(G.Sum(v))))
			return o
		}, []string{`"shared"`, "read by the lower objective g and the upper objective f"}},
		{"NaN in the data", func() Objective {
			a := append([]float64{}, ridgeA...)
			a[5] = math.NaN()
			return ridge(a, ridgeT, 4, 3)
		}, []string{`"A"`, "NaN", "A[1,2]"}},
		{"Inf in a variable", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			lam := o.Outer[0]
			if err := G.Let(lam, tensor.New(tensor.WithShape(3, 1), tensor.WithBacking([]float64{0, math.Inf(-1), 0}))); err != nil {
				panic(err)
			}
			return o
		}, []string{`"lambda"`, "-Inf", "lambda[1,0]"}},
		{"data with no samples", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			e := G.NewMatrix(o.Lower.Graph(), G.Float64, G.WithShape(0, 4), G.WithName("empty"),
				G.WithValue(tensor.New(tensor.WithShape(0, 4), tensor.WithBacking([]float64{}))))
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(e))))
			o.LowerData = []*G.Node{e}
			return o
		}, []string{`"empty"`, "no elements"}},
		{"variable with no elements", func() Objective {
			o := ridge(ridgeA, ridgeT, 4, 3)
			e := G.NewMatrix(o.Lower.Graph(), G.Float64, G.WithShape(3, 0), G.WithName("none"),
				G.WithValue(tensor.New(tensor.WithShape(3, 0), tensor.WithBacking([]float64{}))))
			o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Sum(e))))
			o.Inner = append(o.Inner, e)
			return o
		}, []string{`"none"`, "no elements"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			_, err := Compile(c.build())
			if err == nil {
				t.Fatal("Compile accepted it")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestDeliberateConstant: an input node listed in Constants keeps the
// value it had at Compile, and the objective is the same as with the value
// written into the graph as a gorgonia constant.
func TestDeliberateConstant(t *testing.T) {
	build := func(asInput bool) (*Problem, *G.Node) {
		o := ridge(ridgeA, ridgeT, 4, 3)
		var c *G.Node
		if asInput {
			c = vecNode(o.Lower.Graph(), "c", []float64{1, -2, 3})
			o.Constants = []*G.Node{c}
		} else {
			c = G.NewConstant(tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, -2, 3})))
		}
		w := G.Must(G.Reshape(o.Inner[0], tensor.Shape{3}))
		o.Lower = G.Must(G.Add(o.Lower, G.Must(G.Mul(c, w))))
		p, err := Compile(o)
		if err != nil {
			t.Fatal(err)
		}
		return p, c
	}
	p, c := build(true)
	q, _ := build(false)
	x, y := []float64{0.1, 0.2, 0.3}, []float64{1, 2, 3}
	if err := G.Let(c, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{5, 5, 5}))); err != nil {
		t.Fatal(err)
	}
	if a, b := p.G(x, y, nil), q.G(x, y, nil); a != b {
		t.Errorf("g with the constant declared: %v, written as a gorgonia constant: %v", a, b)
	}
}

// TestSetDataNonFinite: SetData refuses non-finite values, naming the node
// and the element, and keeps the old ones.
func TestSetDataNonFinite(t *testing.T) {
	o := ridge(ridgeA, ridgeT, 4, 3)
	p, err := Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	x, y := p.X0(nil), []float64{1, 1, 1}
	before := p.G(x, y, nil)
	err = p.SetData(o.LowerData[1], []float64{1, 2, math.Inf(1), 4})
	if err == nil || !strings.Contains(err.Error(), "t[2,0]") || !strings.Contains(err.Error(), "+Inf") {
		t.Errorf("SetData with +Inf: %v", err)
	}
	if after := p.G(x, y, nil); after != before {
		t.Errorf("g changed from %v to %v after a refused SetData", before, after)
	}
}

// TestUnrolledSettings: T steps of size α with momentum β are refused
// unless T ≥ 0, 0 < α < ∞ and 0 ≤ β < 1, NaN included.
func TestUnrolledSettings(t *testing.T) {
	p, err := Compile(ridge(ridgeA, ridgeT, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		T           int
		alpha, beta float64
	}{{5, nan, 0}, {5, inf, 0}, {5, -1, 0}, {5, 0, 0}, {5, 0.1, nan}, {5, 0.1, 1}, {5, 0.1, -0.5}, {-1, 0.1, 0}} {
		if _, err := p.Unrolled(c.T, c.alpha, c.beta); err == nil {
			t.Errorf("Unrolled(%d, %v, %v) accepted", c.T, c.alpha, c.beta)
		}
	}
}
