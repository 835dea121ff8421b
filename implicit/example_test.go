package implicit_test

import (
	"errors"
	"fmt"

	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/oracle"
)

// matrix returns the operator of a small dense symmetric matrix.
func matrix(a [][]float64) implicit.Operator {
	return func(dst, v []float64) {
		for i, row := range a {
			dst[i] = 0
			for j, aij := range row {
				dst[i] += aij * v[j]
			}
		}
	}
}

func ExampleCG() {
	op := matrix([][]float64{
		{4, 1, 0},
		{1, 3, 1},
		{0, 1, 2},
	})
	b := []float64{1, 2, 3}
	v := make([]float64, 3) // zero: a cold start
	var cg implicit.CG      // zero value: relative tolerance 1e-10, at most 2n steps
	st, err := cg.Solve(v, op, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("v = [%.6f %.6f %.6f]\n", v[0], v[1], v[2])
	fmt.Printf("iterations %d, operator calls %d, converged %t\n", st.Iterations, st.HVP, st.Converged)

	// An indefinite operator is reported, not silently solved.
	_, err = cg.Solve(make([]float64, 2), matrix([][]float64{{1, 0}, {0, -1}}), []float64{1, 2})
	var ce *implicit.CurvatureError
	fmt.Println(errors.As(err, &ce), ce.Iter, ce.Curvature)
	// Output:
	// v = [0.222222 0.111111 1.444444]
	// iterations 3, operator calls 3, converged true
	// true 1 -3
}

// toy is the bilevel problem g(x, y) = ½ yᵀAy − xᵀy, f(x, y) = ½‖y − c‖²,
// so y*(x) = A⁻¹x and ∇Φ(x) = A⁻¹(y* − c).
type toy struct {
	a [][]float64
	c []float64
}

func (p toy) GradF(dx, dy, x, y []float64, _ []int) {
	if dx != nil {
		clear(dx)
	}
	if dy != nil {
		for i := range dy {
			dy[i] = y[i] - p.c[i]
		}
	}
}

func (p toy) HVP(dst, _, _, v []float64, _ []int) { matrix(p.a)(dst, v) }

// Capabilities declares no optional oracle: no linearized HVP, no dense
// matrices, no batch-size check.
func (p toy) Capabilities() oracle.Capabilities { return oracle.Capabilities{} }

// MixedXY is ∇x⟨∇y g, v⟩ = ∇x⟨Ay − x, v⟩ = −v.
func (p toy) MixedXY(dst, _, _, v []float64, _ []int) {
	for i := range dst {
		dst[i] = -v[i]
	}
}

func ExampleHypergradient() {
	p := toy{a: [][]float64{{2, 1}, {1, 2}}, c: []float64{0, 0}}
	x := []float64{3, 0}
	y := []float64{2, -1} // y*(x) = A⁻¹x; ∇Φ(x) = A⁻¹y* = (5/3, −4/3)
	grad := make([]float64, 2)
	for _, s := range []implicit.Solver{&implicit.CG{}, &implicit.Dense{}, &implicit.Neumann{Terms: 60}} {
		res, err := implicit.Hypergradient(grad, p, x, y, &implicit.Settings{Solver: s})
		if err != nil {
			fmt.Println(err)
			return
		}
		// Neumann's HVP count includes the power iteration that picks η.
		fmt.Printf("%-18T ∇Φ = [%.6f %.6f], v = [%.6f %.6f], HVPs %d\n", s, grad[0], grad[1], res.V[0], res.V[1], res.HVP)
	}
	// Output:
	// *implicit.CG       ∇Φ = [1.666667 -1.333333], v = [1.666667 -1.333333], HVPs 2
	// *implicit.Dense    ∇Φ = [1.666667 -1.333333], v = [1.666667 -1.333333], HVPs 2
	// *implicit.Neumann  ∇Φ = [1.666667 -1.333333], v = [1.666667 -1.333333], HVPs 62
}

func ExampleNeumann() {
	op := matrix([][]float64{{10, 0}, {0, 1}})
	b := []float64{1, 1}
	v := make([]float64, 2)
	// η = 0.5 with λmax = 10: the series would diverge, and Solve says so.
	_, err := (&implicit.Neumann{Eta: 0.5}).Solve(v, op, b)
	fmt.Println(err)
	// η = 0.1 = 1/λmax converges at the rate 1 − η·λmin = 0.9 per term.
	st, err := (&implicit.Neumann{Eta: 0.1, Terms: 200, LambdaMax: 10}).Solve(v, op, b)
	fmt.Printf("v = [%.6f %.6f], terms %d, ‖r_0‖ = %.1e, err %v\n", v[0], v[1], st.Iterations, st.Residual, err)
	// Output:
	// implicit: neumann step η = 0.5 with λmax ≈ 10 (estimated by Lanczos steps) gives η·λmax = 5 > 1, so the Neumann series cannot be trusted to converge; use η ≤ 0.1, or leave Eta zero to get η = 1/λmax
	// v = [0.100000 1.000000], terms 200, ‖r_0‖ = 7.1e-10, err <nil>
}

func ExampleLargestEigenvalue() {
	op := matrix([][]float64{{3, 0, 0}, {0, 7, 0}, {0, 0, 1}})
	lambda, err := implicit.LargestEigenvalue(op, 3, 200, 1)
	fmt.Printf("%.8f %v\n", lambda, err)
	// Output:
	// 7.00000000 <nil>
}
