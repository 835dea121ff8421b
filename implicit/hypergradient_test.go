package implicit

import (
	"errors"
	"math"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
)

func TestHypergradientSolversOnQuadratic(t *testing.T) {
	p := newQuadratic(t, 4, linspace(0.5, 8, 12), 18)
	x := []float64{0.5, -1, 1.5, 0.2}
	y := p.yStar(x)
	want := p.gradPhi(x)
	for _, tc := range []struct {
		name   string
		solver Solver
		tol    float64
	}{
		{"default (nil solver)", nil, 1e-9},
		{"CG", &CG{Tol: 1e-13}, 1e-11},
		{"Dense", &Dense{}, 1e-12},
		{"Neumann", &Neumann{Terms: 600}, 1e-10}, // rate 1 − 0.5/8 per term
		{"FixedPoint", &FixedPoint{Tol: 1e-13}, 1e-11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := make([]float64, 4)
			res, err := Hypergradient(g, p, x, y, &Settings{Solver: tc.solver})
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(g, want); e > tc.tol {
				t.Errorf("relative error %.3g > %.0e (stats %+v)", e, tc.tol, res.Stats)
			}
			if e := relErr(res.V, p.solveA(func() []float64 {
				gy := make([]float64, 12)
				p.GradF(nil, gy, x, y, nil)
				return gy
			}())); e > tc.tol*10 {
				t.Errorf("v relative error %.3g", e)
			}
		})
	}
}

// TestHypergradientRidgeFiniteDifferences compares AID-CG on ridge
// regression with central differences of Φ(λ) = f(λ, w*(λ)).
func TestHypergradientRidgeFiniteDifferences(t *testing.T) {
	r := newRidge(80, 40, 6, 19)
	lam := []float64{-1, -2, 0, -3, -1.5, -0.5}
	w := r.wStar(lam)
	g := make([]float64, 6)
	if _, err := Hypergradient(g, r, lam, w, &Settings{Solver: &CG{Tol: 1e-14}}); err != nil {
		t.Fatal(err)
	}
	phi := func(l []float64) float64 { return r.F(l, r.wStar(l), nil) }
	num := fd.Gradient(nil, phi, lam, &fd.Settings{Formula: fd.Central, Step: 1e-5})
	if e := relErr(g, num); e > 1e-7 {
		t.Errorf("AID %v, central differences %v: relative error %.3g", g, num, e)
	}
	if e := relErr(g, r.gradPhi(lam)); e > 1e-12 {
		t.Errorf("closed form error %.3g", e)
	}
}

func TestHypergradientBatches(t *testing.T) {
	r := newRidge(30, 20, 5, 20)
	lam := []float64{-1, -1, -2, -0.5, -1}
	w := r.wStar(lam)
	all := func(n int) []int {
		b := make([]int, n)
		for i := range b {
			b[i] = i
		}
		return b
	}
	full := make([]float64, 5)
	if _, err := Hypergradient(full, r, lam, w, &Settings{Solver: &Dense{}}); err != nil {
		t.Fatal(err)
	}
	explicit := make([]float64, 5)
	s := Settings{Solver: &Dense{}, UpperBatch: all(20), HessianBatch: all(30), MixedBatch: all(30)}
	if _, err := Hypergradient(explicit, r, lam, w, &s); err != nil {
		t.Fatal(err)
	}
	if e := relErr(explicit, full); e > 1e-14 {
		t.Errorf("batches listing every sample differ from nil by %.3g", e)
	}

	// Sub-batches: v solves the batch system H_B·v = ∇y f(w; D_F).
	fb, hb := []int{0, 3, 5, 7, 11}, []int{1, 2, 4, 8, 9, 10, 20, 25}
	s = Settings{Solver: &Dense{}, UpperBatch: fb, HessianBatch: hb}
	res, err := Hypergradient(make([]float64, 5), r, lam, w, &s)
	if err != nil {
		t.Fatal(err)
	}
	gy, hv := make([]float64, 5), make([]float64, 5)
	r.GradF(nil, gy, lam, w, fb)
	r.HVP(hv, lam, w, res.V, hb)
	if e := relErr(hv, gy); e > 1e-12 {
		t.Errorf("batch system residual %.3g", e)
	}
}

func TestHypergradientWarmStart(t *testing.T) {
	p := newQuadratic(t, 2, linspace(0.2, 20, 30), 21)
	x := []float64{1, 2}
	y := p.yStar(x)
	v := make([]float64, 30)
	s := Settings{Solver: &CG{Tol: 1e-8}, V: v}
	g := make([]float64, 2)
	cold, err := Hypergradient(g, p, x, y, &s)
	if err != nil {
		t.Fatal(err)
	}
	if &cold.V[0] != &v[0] {
		t.Error("Result.V does not alias Settings.V")
	}
	// A nearby outer iterate: warm start from the previous v.
	x2 := []float64{1.001, 1.999}
	y2 := p.yStar(x2)
	warm, err := Hypergradient(g, p, x2, y2, &s)
	if err != nil {
		t.Fatal(err)
	}
	coldAgain, err := Hypergradient(make([]float64, 2), p, x2, y2, &Settings{Solver: &CG{Tol: 1e-8}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CG iterations: cold %d, warm-started at a nearby x %d", coldAgain.Iterations, warm.Iterations)
	if warm.HVP >= coldAgain.HVP {
		t.Errorf("warm start did not save iterations: %d vs %d", warm.Iterations, coldAgain.Iterations)
	}
	if e := relErr(g, p.gradPhi(x2)); e > 1e-7 {
		t.Errorf("warm-started hypergradient error %.3g", e)
	}
}

func TestHypergradientSolveFailure(t *testing.T) {
	p := newQuadratic(t, 2, []float64{-1, 0.5, 2, 3}, 22) // indefinite Hessian
	x := []float64{1, -1}
	y := []float64{0.1, 0.2, 0.3, 0.4}
	g := make([]float64, 2)
	res, err := Hypergradient(g, p, x, y, nil)
	if !errors.Is(err, ErrNotPositiveDefinite) {
		t.Fatalf("want ErrNotPositiveDefinite, got %v", err)
	}
	gx := make([]float64, 2)
	p.GradF(gx, nil, x, y, nil)
	if !floats.Equal(g, gx) || floats.HasNaN(res.V) {
		t.Errorf("dst %v, want ∇x f = %v; V %v", g, gx, res.V)
	}
}

func TestHypergradientPanicsOnWrongLength(t *testing.T) {
	p := newQuadratic(t, 2, []float64{1, 2}, 23)
	defer func() {
		if recover() == nil {
			t.Error("no panic for a wrongly sized dst")
		}
	}()
	Hypergradient(make([]float64, 3), p, []float64{1, 2}, []float64{0, 0}, nil)
}

func TestSolversHandleSizeOne(t *testing.T) {
	for _, s := range []Solver{&CG{}, &Neumann{Terms: 60}, &FixedPoint{}, &Dense{}} {
		v := []float64{0}
		if _, err := s.Solve(v, diagOp([]float64{4}), []float64{2}); err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		if math.Abs(v[0]-0.5) > 1e-12 {
			t.Errorf("%T: v = %v, want 0.5", s, v)
		}
	}
}

// linToy is g(x, y) = ½ yᵀAy − xᵀy, f(x, y) = ½‖y‖² with A = [2 1; 1 2],
// so ∇Φ(x) = A⁻¹y* at y* = A⁻¹x, with a linearized operator that counts its
// uses.
type linToy struct{ made, used *int }

func (linToy) GradF(dx, dy, _, y []float64, _ []int) {
	clear(dx)
	copy(dy, y)
}

func (linToy) HVP(dst, _, _, v []float64, _ []int) {
	dst[0], dst[1] = 2*v[0]+v[1], v[0]+2*v[1]
}

func (linToy) MixedXY(dst, _, _, v []float64, _ []int) {
	dst[0], dst[1] = -v[0], -v[1]
}

// Capabilities declares the linearized operator.
func (p linToy) Capabilities() oracle.Capabilities { return oracle.Capabilities{HVPAt: p.HVPAt} }

func (p linToy) HVPAt(x, y []float64, batch []int) func(dst, v []float64) {
	*p.made++
	return func(dst, v []float64) {
		*p.used++
		p.HVP(dst, x, y, v, batch)
	}
}

// TestHVPOperatorLinearized checks that HVPOperator, and so Hypergradient,
// takes a declared HVPAt operator once per call and every product from it.
func TestHVPOperatorLinearized(t *testing.T) {
	var made, used int
	p := linToy{&made, &used}
	grad := make([]float64, 2)
	res, err := Hypergradient(grad, p, []float64{3, 0}, []float64{2, -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 || used != res.HVP || used == 0 {
		t.Errorf("operator made %d times, used %d times for %d products; want 1 and all", made, used, res.HVP)
	}
	if math.Abs(grad[0]-5.0/3) > 1e-12 || math.Abs(grad[1]+4.0/3) > 1e-12 {
		t.Errorf("hypergradient %v, want (5/3, −4/3)", grad)
	}
}
