// The code of docs/tutorial.md, from the package clause on: edit the two
// together (TestTutorialInSync compares them).

package tutorial_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobilevel/bilevel"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/optim"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// regression is a data set: N samples of D features (row-major) and their
// targets.
type regression struct {
	X    []float64
	T    []float64
	N, D int
}

// makeData draws t = x·wTrue + noise in 8 features of which only the first
// 3 matter: 300 training samples, a tenth of them with a gross error of +20
// in the target, and 150 clean validation samples.
func makeData() (train, val regression, wTrue []float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	const d = 8
	wTrue = []float64{2, -1, 0.5, 0, 0, 0, 0, 0}
	draw := func(n int, outliers float64) regression {
		r := regression{X: make([]float64, n*d), T: make([]float64, n), N: n, D: d}
		for i := range n {
			row := r.X[i*d : (i+1)*d]
			for j := range row {
				row[j] = rng.NormFloat64()
			}
			r.T[i] = floats.Dot(row, wTrue) + 0.3*rng.NormFloat64()
			if rng.Float64() < outliers {
				r.T[i] += 20
			}
		}
		return r
	}
	return draw(300, 0.1), draw(150, 0), wTrue
}

// pseudoHuber returns mean_i δ²(√(1 + (r_i/δ)²) − 1): about r²/2 for small
// residuals, about δ|r| for large ones, and smooth, so that its Hessian
// exists everywhere.
func pseudoHuber(r *G.Node, delta float64) *G.Node {
	s := G.Must(G.Square(G.Must(G.Mul(G.NewConstant(1/delta), r))))
	root := G.Must(G.Sqrt(G.Must(G.Add(G.NewConstant(1.0), s))))
	mean := G.Must(G.Mean(G.Must(G.Sub(root, G.NewConstant(1.0)))))
	return G.Must(G.Mul(G.NewConstant(delta*delta), mean))
}

// huberObjective writes the bilevel problem
//
//	g(λ, w) = mean_train ρ(x_iᵀw − t_i) + ½ Σ_j e^{λ_j} w_j²   (ρ: pseudo-Huber, δ = 1)
//	f(λ, w) = mean_val ½ (x_iᵀw − t_i)²
//
// with x = λ, one log-penalty per feature, starting at λ = −3, and y = w,
// starting at 0.
func huberObjective(train, val regression) graph.Objective {
	g := G.NewGraph()
	data := func(name string, v []float64, shape ...int) *G.Node {
		t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
		return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	X, T := data("X", train.X, train.N, train.D), data("t", train.T, train.N)
	Xv, Tv := data("Xval", val.X, val.N, val.D), data("tval", val.T, val.N)
	w := G.NewVector(g, G.Float64, G.WithShape(train.D), G.WithName("w"), G.WithInit(G.Zeroes()))
	lambda := G.NewVector(g, G.Float64, G.WithShape(train.D), G.WithName("lambda"), G.WithInit(G.ValuesOf(-3.0)))

	residual := func(X, T *G.Node) *G.Node { return G.Must(G.Sub(G.Must(G.Mul(X, w)), T)) }
	penalty := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Exp(lambda)), G.Must(G.Square(w))))))
	lower := G.Must(G.Add(pseudoHuber(residual(X, T), 1), G.Must(G.Mul(G.NewConstant(0.5), penalty))))
	upper := G.Must(G.Mul(G.NewConstant(0.5), G.Must(G.Mean(G.Must(G.Square(residual(Xv, Tv)))))))
	return graph.Objective{
		Upper: upper, Lower: lower,
		Outer: []*G.Node{lambda}, Inner: []*G.Node{w},
		LowerData: []*G.Node{X, T}, UpperData: []*G.Node{Xv, Tv},
	}
}

func Example_check() {
	train, val, _ := makeData()
	p, err := graph.Compile(huberObjective(train, val))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("λ ∈ R^%d, w ∈ R^%d, %d training and %d validation samples\n",
		p.DimX(), p.DimY(), p.NumLower(), p.NumUpper())

	// Check away from the starting point, where nothing is zero.
	x, y := p.X0(nil), p.Y0(nil)
	for i := range x {
		x[i], y[i] = -0.2*float64(i), 0.1*float64(i+1)
	}
	r := graph.Check(p, x, y, nil)
	fmt.Println("all oracles within 1e-6 of finite differences:", r.Max() < 1e-6)
	r = graph.Check(p, x, y, &graph.CheckSettings{LowerBatch: []int{0, 5, 7}, UpperBatch: []int{1, 2}})
	fmt.Println("on minibatches too:", r.Max() < 1e-6)

	// A mistake: the penalty forgot λ, so neither objective depends on it.
	obj := huberObjective(train, val)
	obj.Lower = G.Must(G.Add(obj.Lower, G.Must(G.Sum(G.Must(G.Square(obj.Inner[0]))))))
	obj.Outer = append(obj.Outer, G.NewScalar(obj.Lower.Graph(), G.Float64, G.WithName("forgotten"), G.WithValue(1.0)))
	_, err = graph.Compile(obj)
	fmt.Println(err)
	// Output:
	// λ ∈ R^8, w ∈ R^8, 300 training and 150 validation samples
	// all oracles within 1e-6 of finite differences: true
	// on minibatches too: true
	// graph: neither objective depends on outer variable "forgotten"
}

// compile builds and compiles the tutorial's problem; it also returns
// the objective, whose nodes WriteBack fills.
func compile() (*graph.Problem, graph.Objective) {
	train, val, _ := makeData()
	obj := huberObjective(train, val)
	p, err := graph.Compile(obj)
	if err != nil {
		panic(err)
	}
	return p, obj
}

func Example_hypergradient() {
	p, obj := compile()
	x := p.X0(nil) // λ = −3: every penalty weight e^λ_j is 0.05

	// AID: w* to ‖∇w g‖ ≤ 1e-8, then CG for v.
	aid, err := bilevel.Hypergradient(p, x, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("AID: ∇Φ = %.4f\n", aid.Grad)
	fmt.Printf("     %d Newton-CG iterations to ‖∇w g‖ ≤ 1e-8, %d CG iterations for v, %d HVPs in all\n",
		aid.InnerIterations, aid.Linear.Iterations, aid.Calls.HVP)

	// ITD through the gradient steps that reach each tolerance.
	for _, tol := range []float64{1e-2, 1e-4, 1e-8} {
		itd, err := bilevel.Hypergradient(p, x, &bilevel.Settings{Method: bilevel.ITD, Tol: tol})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("ITD to ‖∇w g‖ ≤ %.0e: %3d steps of 1/%.2f, relative distance to AID %.0e\n",
			tol, itd.InnerIterations, itd.Curvature, floats.Distance(itd.Grad, aid.Grad, 2)/floats.Norm(aid.Grad, 2))
	}

	// A budget too small for the tolerance is an error, not a number.
	_, err = bilevel.Hypergradient(p, x, &bilevel.Settings{Method: bilevel.ITD, MaxInner: 5})
	fmt.Println(err)

	// w* goes back into the gorgonia node w, for whatever you do next
	// with gorgonia.
	if err := p.WriteBack(x, aid.Y); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("w = %.2f\n", obj.Inner[0].Value().Data())
	// Output:
	// AID: ∇Φ = [0.0134 0.0049 0.0001 -0.0000 0.0000 -0.0001 -0.0001 -0.0001]
	//      6 Newton-CG iterations to ‖∇w g‖ ≤ 1e-8, 8 CG iterations for v, 17 HVPs in all
	// ITD to ‖∇w g‖ ≤ 1e-02:   6 steps of 1/1.01, relative distance to AID 5e-02
	// ITD to ‖∇w g‖ ≤ 1e-04:   9 steps of 1/1.01, relative distance to AID 6e-04
	// ITD to ‖∇w g‖ ≤ 1e-08:  16 steps of 1/1.01, relative distance to AID 4e-08
	// bilevel: the lower level stopped at ‖∇y g‖ = 0.0237 after 5 gradient descent iterations, 2.37e+06 times the tolerance 1e-08: the step limit 5 (ITD stores an iterate of y per step: raise Settings.MaxInner, or Tol)
	// w = [1.87 -0.96 0.48 -0.00 -0.00 0.04 0.03 0.01]
}

func Example_solve() {
	_, _, wTrue := makeData()
	p, _ := compile()
	// The plots and checkpoints go to out/tutorial, which stays there for
	// you to look at.
	dir := filepath.Join("out", "tutorial")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Println(err)
		return
	}

	// Keep λ in a box.
	lo, hi := make([]float64, p.DimX()), make([]float64, p.DimX())
	for i := range lo {
		lo[i], hi[i] = -6, 2
	}
	box, err := optim.NewBox(lo, hi)
	if err != nil {
		fmt.Println(err)
		return
	}
	// One inner step α for the whole run: g is most curved where the
	// penalty e^λ is largest, at the top of the box, so α = 1/L with L
	// estimated there, at w*.
	top, err := bilevel.SolveLower(p, hi, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	L, err := bilevel.Curvature(p, hi, top.Y)
	if err != nil {
		fmt.Println(err)
		return
	}
	alpha := 1 / L

	for _, m := range []optim.Method{
		optim.AIDBiO{Alpha: alpha, D: 20, N: 10, Outer: optim.Adam{LR: 0.1}},
		optim.ITDBiO{Alpha: alpha, D: 40, Outer: optim.Adam{LR: 0.1}},
	} {
		name := strings.TrimPrefix(fmt.Sprintf("%T", m), "optim.") // AIDBiO, ITDBiO: a file each
		rec := &optim.MemoryRecorder{}
		s := &optim.Settings{
			MaxIter:  150,
			ProjectX: box,
			Recorder: rec,
			Metrics: func(x, y []float64) map[string]float64 {
				return map[string]float64{"w error": floats.Distance(y, wTrue, 2)}
			},
			Checkpoint: optim.CheckpointSettings{Path: filepath.Join(dir, name+".ckpt"), Every: 50},
		}
		res, err := optim.Solve(p, p.X0(nil), p.Y0(nil), s, m)
		if err != nil {
			fmt.Println(err)
			return
		}
		first, last := rec.Records[0], rec.Records[len(rec.Records)-1]
		fmt.Printf("%T: %v after %d iterations, %d HVPs, %d mixed products\n",
			m, res.Status, res.Iter, res.Calls.HVP, res.Calls.MixedXY)
		fmt.Printf("  validation loss %.4f → %.4f, ‖w − wTrue‖ %.3f → %.3f\n",
			first.Upper, last.Upper, first.Metrics["w error"], last.Metrics["w error"])
		fmt.Printf("  λ = %.1f\n", res.X)

		// The plot: validation loss against iteration.
		pl := plot.New()
		pl.Title.Text = fmt.Sprintf("%T on pseudo-Huber regression", m)
		pl.X.Label.Text = "iteration"
		pl.Y.Label.Text = "validation loss f(λ, w)"
		pts := make(plotter.XYs, len(rec.Records))
		for i, r := range rec.Records {
			pts[i] = plotter.XY{X: float64(r.Iter), Y: r.Upper}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			fmt.Println(err)
			return
		}
		pl.Add(line)
		if err := pl.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, name+".png")); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// optim.AIDBiO: IterationLimit after 150 iterations, 1649 HVPs, 150 mixed products
	//   validation loss 0.4142 → 0.0498, ‖w − wTrue‖ 0.832 → 0.044
	//   λ = [-5.1 -5.1 -3.9 2.0 2.0 0.8 2.0 2.0]
	// optim.ITDBiO: IterationLimit after 150 iterations, 5850 HVPs, 6000 mixed products
	//   validation loss 0.0809 → 0.0493, ‖w − wTrue‖ 0.235 → 0.037
	//   λ = [-6.0 -6.0 -4.1 2.0 2.0 0.7 2.0 2.0]
}
