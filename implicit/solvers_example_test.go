package implicit_test

import (
	"errors"
	"fmt"

	"github.com/gobilevel/bilevel/implicit"
)

// ExampleFixedPoint solves A·v = b by AID-FP's stationary iteration, then
// shows that a step size too large for A is reported as divergence, with v
// left at the last iterate that passed the checks.
func ExampleFixedPoint() {
	op := matrix([][]float64{{2, 0}, {0, 1}})
	b := []float64{1, 1}
	v := make([]float64, 2)
	st, err := (&implicit.FixedPoint{Eta: 0.5}).Solve(v, op, b)
	fmt.Printf("v = [%.6f %.6f] after %d steps, converged %t, err %v\n", v[0], v[1], st.Iterations, st.Converged, err)

	v = []float64{0, 0}
	_, err = (&implicit.FixedPoint{Eta: 1.5}).Solve(v, op, b) // η·λmax = 3 > 2
	var de *implicit.DivergenceError
	fmt.Println(errors.As(err, &de), de.Solver, de.Eta)
	// Output:
	// v = [0.500000 1.000000] after 33 steps, converged true, err <nil>
	// true fixed-point 1.5
}

// ExampleDense assembles a small operator column by column and solves by
// Cholesky; an indefinite operator is an error matching
// ErrNotPositiveDefinite.
func ExampleDense() {
	v := make([]float64, 2)
	st, err := (&implicit.Dense{}).Solve(v, matrix([][]float64{{4, 1}, {1, 3}}), []float64{1, 2})
	fmt.Printf("v = [%.6f %.6f], %d operator calls, err %v\n", v[0], v[1], st.HVP, err)
	_, err = (&implicit.Dense{}).Solve(v, matrix([][]float64{{1, 2}, {2, 1}}), []float64{1, 2})
	fmt.Println(errors.Is(err, implicit.ErrNotPositiveDefinite))
	// Output:
	// v = [0.090909 0.636364], 2 operator calls, err <nil>
	// true
}
