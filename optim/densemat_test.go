package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// denseQuadratic is the quadratic test problem with the dense-matrix
// oracles HessYY and HessXY, which average its per-sample matrices
// directly: ∇yy g = mean A_i and ∇xy g = −mean B_iᵀ.
type denseQuadratic struct{ *quadratic }

// Capabilities declares the dense matrices.
func (p denseQuadratic) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HessYY: p.HessYY, HessXY: p.HessXY}
}

func (p denseQuadratic) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	n := p.dy
	sum := make([]float64, n*n)
	w := each(batch, len(p.as), func(i int) { floats.Add(sum, p.as[i]) })
	for i := range n {
		for j := i; j < n; j++ {
			dst.SetSym(i, j, w*sum[i*n+j])
		}
	}
}

func (p denseQuadratic) HessXY(dst *mat.Dense, x, y []float64, batch []int) {
	sum := make([]float64, p.dy*p.dx) // B is dy × dx
	w := each(batch, len(p.bs), func(i int) { floats.Add(sum, p.bs[i]) })
	for i := range p.dx {
		for j := range p.dy {
			dst.Set(i, j, -w*sum[j*p.dx+i])
		}
	}
}

// TestDenseBallProjections: the Frobenius-ball projection P̄ of paper 000,
// eq. 9a (also Π_C of paper 001 on vectors) and the spectral-norm ball Π̂_C
// of paper 001 land in their balls, are idempotent (1e-15 and 1e-12
// relative), leave points inside unchanged bit for bit, and the spectral one
// thresholds only the singular values above the radius.
func TestDenseBallProjections(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	const r, c = 4, 7
	a := make([]float64, r*c)
	for i := range a {
		a[i] = rnd.NormFloat64()
	}
	norm := floats.Norm(a, 2)
	for _, radius := range []float64{norm / 3, norm / 1.5} {
		p := append([]float64(nil), a...)
		denseClipNorm(p, radius)
		if n := floats.Norm(p, 2); n > radius*(1+1e-15) {
			t.Errorf("Frobenius ball %v: ‖P(a)‖ = %v", radius, n)
		}
		pp := append([]float64(nil), p...)
		denseClipNorm(pp, radius)
		if d := floats.Distance(pp, p, 2); d > 1e-15*radius {
			t.Errorf("Frobenius ball %v: not idempotent: ‖P(P(a)) − P(a)‖ = %.3g", radius, d)
		}
		// P(a) is a positive multiple of a.
		if d := floats.Distance(p, floats.ScaleTo(make([]float64, r*c), radius/norm, a), 2); d > 1e-14 {
			t.Errorf("Frobenius ball %v: P(a) is not a rescaled a (‖Δ‖ = %.3g)", radius, d)
		}
	}
	in := append([]float64(nil), a...)
	denseClipNorm(in, 2*norm)
	denseClipNorm(in, math.Inf(1))
	if !sameBits(in, a) {
		t.Error("Frobenius ball: a point inside was changed")
	}

	var svd mat.SVD
	svd.Factorize(mat.NewDense(r, c, append([]float64(nil), a...)), mat.SVDNone)
	sv := svd.Values(nil)
	bound := (sv[0] + sv[1]) / 2 // clips the largest singular value only
	p := append([]float64(nil), a...)
	if err := denseClipSpectral(p, r, c, bound); err != nil {
		t.Fatal(err)
	}
	svd.Factorize(mat.NewDense(r, c, append([]float64(nil), p...)), mat.SVDNone)
	got := svd.Values(nil)
	want := append([]float64{bound}, sv[1:]...)
	if !floats.EqualApprox(got, want, 1e-12) {
		t.Errorf("spectral ball: singular values %v, want %v", got, want)
	}
	pp := append([]float64(nil), p...)
	if err := denseClipSpectral(pp, r, c, bound*(1+1e-12)); err != nil {
		t.Fatal(err)
	}
	if d := floats.Distance(pp, p, 2); d > 1e-12*floats.Norm(p, 2) {
		t.Errorf("spectral ball: not idempotent: ‖Δ‖ = %.3g", d)
	}
	in = append([]float64(nil), a...)
	if err := denseClipSpectral(in, r, c, sv[0]); err != nil {
		t.Fatal(err)
	}
	if !sameBits(in, a) {
		t.Error("spectral ball: a matrix inside was changed")
	}
}

// TestDenseAssembly: the dense matrices assembled from HVP and mixed
// products (rows by MixedYX when DimX ≤ DimY, columns by MixedXY otherwise)
// and through HessYY and HessXY equal ∇yy g = mean A_i and ∇xy g = −mean B_iᵀ on
// a batch, and each adds 1 to Calls.Dense.
func TestDenseAssembly(t *testing.T) {
	for _, dims := range [][2]int{{3, 5}, {6, 3}} {
		q := newQuadratic(t, dims[0], dims[1], 40, 10, 0.3, 1, 2, 0.5, 4)
		nx, ny := dims[0], dims[1]
		batch := []int{1, 5, 5, 33}
		wantYY := make([]float64, ny*ny)
		wantXY := make([]float64, nx*ny)
		for i := range ny { // columns of ∇yy g and rows of ∇xy g from the oracles
			e := make([]float64, ny)
			e[i] = 1
			col := make([]float64, ny)
			q.HVP(col, nil, nil, e, batch)
			for r := range ny {
				wantYY[r*ny+i] = col[r]
			}
			cx := make([]float64, nx)
			q.MixedXY(cx, nil, nil, e, batch)
			for r := range nx {
				wantXY[r*ny+i] = cx[r]
			}
		}
		for _, p := range []oracle.Problem{q, denseQuadratic{q}} {
			var calls oracle.Calls
			c := newCounter(p, &calls)
			st := NewState(make([]float64, nx), make([]float64, ny), 0)
			st.Calls = calls
			yy, xy := make([]float64, ny*ny), make([]float64, nx*ny)
			x, y := make([]float64, nx), make([]float64, ny)
			hessYYInto(c, st, yy, x, y, batch)
			hessXYInto(c, st, xy, x, y, batch)
			if d := floats.Distance(yy, wantYY, 2); d > 1e-13 {
				t.Errorf("%dx%d %T: ∇yy g off by %.3g", nx, ny, p, d)
			}
			if d := floats.Distance(xy, wantXY, 2); d > 1e-13 {
				t.Errorf("%dx%d %T: ∇xy g off by %.3g", nx, ny, p, d)
			}
			if st.Calls.Dense != 2 {
				t.Errorf("%dx%d %T: Calls.Dense = %d, want 2", nx, ny, p, st.Calls.Dense)
			}
			if p.Capabilities().HessYY == nil {
				// the counter counted into calls (not st.oracle.Calls): ny HVPs, min(nx, ny) mixed products
				want := oracle.Calls{HVP: int64(ny)}
				if nx <= ny {
					want.MixedYX = int64(nx)
				} else {
					want.MixedXY = int64(ny)
				}
				if calls != want {
					t.Errorf("%dx%d assembled: oracle calls %+v, want %+v", nx, ny, calls, want)
				}
			}
		}
	}
}

// denseCase is a run of one of the explicit-matrix methods.
type denseCase struct {
	name  string
	p     oracle.Problem
	m     Method
	s     Settings
	noisy bool // whether the run draws random batches
}

// denseCases exercise every part of the State of the methods of papers 000
// and 001: minibatches, shuffled epochs, the STORM memories (previous
// iterate, estimates), default steps (cached curvature), decaying
// schedules, x-projections and the matrix projections.
func denseCases(t testing.TB) []denseCase {
	q := stochasticProblem(t)
	return []denseCase{
		{"STABLE decaying default β μ shuffled projected", q,
			STABLE{Alpha: 0.1, Schedule: STABLEDecaying, K0: 20, CXY: 0.8, LowerBatch: 16, UpperBatch: 8},
			Settings{Seed: 4, Sampling: Shuffled, ProjectX: mustBall([]float64{0, 0, 0}, 0.5)}, true},
		{"STABLE dense oracles τ=0.3", denseQuadratic{q},
			STABLE{Alpha: 0.2, Beta: 0.5, Tau: 0.3, Mu: 1.2, LowerBatch: 10, UpperBatch: 10},
			Settings{Seed: 9}, true},
		{"STABLEMatrixFree", q,
			STABLEMatrixFree{Alpha: 0.2, Beta: 0.5, N: 3, LowerBatch: 16, UpperBatch: 16},
			Settings{Seed: 1}, true},
		{"MGBiO clipped", q,
			MGBiO{Gamma: 0.2, Eta: 0.8, Mu: 1.2, Lg: 1.8, CFy: 0.5, CGxy: 0.3},
			Settings{Seed: 2}, false},
		{"MSGBiO shuffled default λ μ", q,
			MSGBiO{Gamma: 0.3, CFy: 1, LowerBatch: 10, UpperBatch: 10},
			Settings{Seed: 5, Sampling: Shuffled}, true},
		{"VRMSGBiO clipped projected", q,
			VRMSGBiO{Gamma: 0.3, Lambda: 0.25, CGxy: 0.5, Lg: 1.5, LowerBatch: 10, UpperBatch: 10},
			Settings{Seed: 6, ProjectX: mustBall([]float64{0, 0, 0}, 0.5)}, true},
		{"VRMSGBiO sqrt dense oracles", denseQuadratic{q},
			VRMSGBiO{Gamma: 0.3, Lambda: 0.25, Schedule: MSGBiOSqrt, K: 2, C: [5]float64{12, 12, 12, 12, 12}, LowerBatch: 10, UpperBatch: 10},
			Settings{Seed: 8}, true},
	}
}

// TestDenseReproducible: a fixed seed gives the same run twice, bit for
// bit (iterates, V, every named vector, records); for the stochastic runs
// another seed gives another run.
func TestDenseReproducible(t *testing.T) {
	for _, c := range denseCases(t) {
		run := func(seed uint64) (*Result, []Record) {
			s := c.s
			s.MaxIter, s.Seed = 25, seed
			rec := &MemoryRecorder{}
			s.Recorder = rec
			res, err := Solve(c.p, []float64{0.1, 0.2, 0.3}, make([]float64, 5), &s, c.m)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return res, rec.Records
		}
		a, ra := run(c.s.Seed)
		b, rb := run(c.s.Seed)
		if !denseSameState(a.State, b.State) {
			t.Errorf("%s: two runs with seed %d differ: x %v vs %v", c.name, c.s.Seed, a.X, b.X)
		}
		for k := range ra {
			if math.Float64bits(ra[k].HypergradNorm) != math.Float64bits(rb[k].HypergradNorm) || ra[k].Calls != rb[k].Calls {
				t.Errorf("%s: records differ at iteration %d", c.name, k)
				break
			}
		}
		d, _ := run(c.s.Seed + 1)
		switch same := sameBits(a.X, d.X); {
		case c.noisy && same:
			t.Errorf("%s: seeds %d and %d gave the same x", c.name, c.s.Seed, c.s.Seed+1)
		case !c.noisy && !same:
			t.Errorf("%s: a run without random batches depends on the seed", c.name)
		}
	}
}

// denseSameState reports whether two states have bit-identical x, y, v, named
// vectors and scalars, iteration and oracle counts.
func denseSameState(a, b *State) bool {
	if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || !sameBits(a.V, b.V) || a.Iter != b.Iter || a.Calls != b.Calls ||
		len(a.Vecs) != len(b.Vecs) || len(a.Scalars) != len(b.Scalars) {
		return false
	}
	for k, v := range a.Vecs {
		if !sameBits(v, b.Vecs[k]) {
			return false
		}
	}
	for k, v := range a.Scalars {
		if math.Float64bits(v) != math.Float64bits(b.Scalars[k]) {
			return false
		}
	}
	return true
}

// TestDenseResumeBitForBit: a run stopped after 7 iterations, its State
// encoded, decoded and resumed to 20 gives, bit for bit, the x, y, v,
// estimates and oracle counts of an uninterrupted 20-iteration run.
func TestDenseResumeBitForBit(t *testing.T) {
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	for _, c := range denseCases(t) {
		full := c.s
		full.MaxIter = 20
		want, err := Solve(c.p, x0, y0, &full, c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		part := c.s
		part.MaxIter = 7
		first, err := Solve(c.p, x0, y0, &part, c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		blob, err := first.State.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := st.UnmarshalBinary(blob); err != nil {
			t.Fatal(err)
		}
		rest := c.s
		rest.MaxIter = 20
		rest.Seed = 999 // ignored by Resume
		got, err := Resume(c.p, &st, &rest, c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !denseSameState(got.State, want.State) {
			t.Errorf("%s: resumed x = %v, uninterrupted x = %v (calls %+v vs %+v)", c.name, got.X, want.X, got.Calls, want.Calls)
		}
	}
}

// TestDenseOracleCounts checks each iteration's oracle calls on the
// stochastic quadratic (DimX = 3, DimY = 5) against the papers:
//
//   - STABLE (paper 000, Algorithm 1): 1 GradG, 1 GradF (the "two
//     samples"), and 2 dense matrices h_xy^0, h_yy^0 at k = 0, then 4 (both
//     at (x^{k−1}, y^{k−1}) and (x^k, y^k)). Assembled, a ∇yy g costs
//     DimY = 5 HVPs and a ∇xy g DimX = 3 MixedYX; through HessYY and HessXY no
//     product is called.
//   - STABLEMatrixFree with N CG steps: 1 GradG, 1 GradF, 1 MixedXY,
//     1 MixedYX and 2N HVPs at k = 0, 2N+2 afterwards (warm starts).
//   - MGBiO and MSGBiO (paper 001, Algorithms 1 and 2): 1 GradF, 1 GradG,
//     2 dense matrices per iteration.
//   - VR-MSGBiO (Algorithm 3): as MSGBiO at k = 0, then every oracle at two
//     iterates: 2 GradF, 2 GradG, 4 dense matrices.
//
// No method calls F or G. Step sizes and μ are set, so Init calls nothing.
func TestDenseOracleCounts(t *testing.T) {
	q := stochasticProblem(t)
	assembled := func(mats int64) oracle.Calls {
		return oracle.Calls{Dense: mats, HVP: 5 * mats / 2, MixedYX: 3 * mats / 2}
	}
	add := func(a, b oracle.Calls) oracle.Calls {
		a.GradF += b.GradF
		a.GradG += b.GradG
		a.MixedXY += b.MixedXY
		a.HVP += b.HVP
		return a
	}
	for _, c := range []struct {
		name string
		p    oracle.Problem
		m    Method
		want func(k int) oracle.Calls
	}{
		{"STABLE assembled", q, STABLE{Alpha: 0.1, Beta: 0.5, Mu: 0.5, LowerBatch: 8, UpperBatch: 8}, func(k int) oracle.Calls {
			return add(assembled(int64(2+2*min(k, 1))), oracle.Calls{GradG: 1, GradF: 1})
		}},
		{"STABLE dense oracles", denseQuadratic{q}, STABLE{Alpha: 0.1, Beta: 0.5, Mu: 0.5, LowerBatch: 8, UpperBatch: 8}, func(k int) oracle.Calls {
			return oracle.Calls{GradG: 1, GradF: 1, Dense: int64(2 + 2*min(k, 1))}
		}},
		{"STABLEMatrixFree N=3", q, STABLEMatrixFree{Alpha: 0.1, Beta: 0.5, N: 3, LowerBatch: 8, UpperBatch: 8}, func(k int) oracle.Calls {
			return oracle.Calls{GradG: 1, GradF: 1, MixedXY: 1, MixedYX: 1, HVP: int64(6 + 2*min(k, 1))}
		}},
		{"MGBiO", q, MGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5}, func(int) oracle.Calls {
			return add(assembled(2), oracle.Calls{GradG: 1, GradF: 1})
		}},
		{"MGBiO dense oracles", denseQuadratic{q}, MGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5}, func(int) oracle.Calls {
			return oracle.Calls{GradG: 1, GradF: 1, Dense: 2}
		}},
		{"MSGBiO", q, MSGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5, LowerBatch: 8, UpperBatch: 8}, func(int) oracle.Calls {
			return add(assembled(2), oracle.Calls{GradG: 1, GradF: 1})
		}},
		{"VRMSGBiO", q, VRMSGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5, LowerBatch: 8, UpperBatch: 8}, func(k int) oracle.Calls {
			n := int64(1 + min(k, 1))
			return add(assembled(2*n), oracle.Calls{GradG: n, GradF: n})
		}},
		{"VRMSGBiO dense oracles", denseQuadratic{q}, VRMSGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5, LowerBatch: 8, UpperBatch: 8}, func(k int) oracle.Calls {
			n := int64(1 + min(k, 1))
			return oracle.Calls{GradG: n, GradF: n, Dense: 2 * n}
		}},
	} {
		rec := &MemoryRecorder{}
		if _, err := Solve(c.p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 6, Recorder: rec, EvalEvery: -1}, c.m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var prev oracle.Calls
		for _, r := range rec.Records {
			if got, want := r.Calls.Sub(prev), c.want(r.Iter); got != want {
				t.Errorf("%s, iteration %d: calls %+v, want %+v", c.name, r.Iter, got, want)
			}
			prev = r.Calls
		}
	}
}

// poisonedDense returns NaN from HessYY from its third call on.
type poisonedDense struct {
	denseQuadratic
	calls int
}

func (p *poisonedDense) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HessYY: p.HessYY, HessXY: p.HessXY}
}

func (p *poisonedDense) HessYY(dst *mat.SymDense, x, y []float64, batch []int) {
	p.denseQuadratic.HessYY(dst, x, y, batch)
	if p.calls++; p.calls >= 3 {
		dst.SetSym(0, 1, math.NaN())
	}
}

// TestDenseNaN: a NaN from a declared dense-matrix oracle is reported as that
// oracle by Solve's finite guard, with the last finite state.
func TestDenseNaN(t *testing.T) {
	for _, m := range []Method{
		STABLE{Alpha: 0.1, Beta: 0.5, Mu: 0.5},
		MGBiO{Gamma: 0.1, Lambda: 0.25, Mu: 0.5},
	} {
		p := &poisonedDense{denseQuadratic: denseQuadratic{stochasticProblem(t)}}
		res, err := Solve(p, make([]float64, 3), make([]float64, 5), &Settings{MaxIter: 10}, m)
		var nf *NonFiniteError
		if !errors.As(err, &nf) || nf.Oracle != "HessYY" {
			t.Fatalf("%T: error %v, want a *NonFiniteError naming HessYY", m, err)
		}
		if res == nil || res.Status != Failure {
			t.Fatalf("%T: result %+v, want Failure", m, res)
		}
		if name, _, _ := res.State.nonFinite(); name != "" {
			t.Errorf("%T: Result.State has non-finite %s", m, name)
		}
		t.Log(err)
	}
}

// TestDenseSettingsErrors: bad settings fail in Init with a message naming
// the field.
func TestDenseSettingsErrors(t *testing.T) {
	q := stochasticProblem(t)
	for _, c := range []struct {
		m    Method
		s    Settings
		want string
	}{
		{STABLE{}, Settings{}, "STABLE.Alpha = 0"},
		{STABLE{Alpha: 0.1, Tau: 1.5}, Settings{}, "STABLE.Tau"},
		{STABLE{Alpha: 0.1, Mu: -1}, Settings{}, "STABLE.Mu"},
		{STABLE{Alpha: 0.1, Schedule: 7}, Settings{}, "STABLE.Schedule"},
		{STABLE{Alpha: 0.1}, Settings{ProjectY: mustBall(make([]float64, 5), 1)}, "ProjectY"},
		{STABLEMatrixFree{Alpha: 0.1, N: -1}, Settings{}, "STABLEMatrixFree.N"},
		{STABLEMatrixFree{Alpha: 0.1, LowerBatch: 1000}, Settings{}, "STABLEMatrixFree.LowerBatch"},
		{MGBiO{}, Settings{}, "MGBiO.Gamma = 0"},
		{MGBiO{Gamma: 0.1, Eta: 2}, Settings{}, "MGBiO.Eta"},
		{MGBiO{Gamma: 0.1, Mu: 2, Lg: 1}, Settings{}, "MGBiO.Lg"},
		{MSGBiO{Gamma: 0.1, M: 1}, Settings{}, "increase M"},
		{MSGBiO{Gamma: 0.1, C: [5]float64{0, -1}}, Settings{}, "MSGBiO.C[1]"},
		{VRMSGBiO{Gamma: 0.1, Schedule: 9}, Settings{}, "VRMSGBiO.Schedule"},
		{VRMSGBiO{Gamma: 0.1, UpperBatch: -2}, Settings{}, "VRMSGBiO.UpperBatch"},
	} {
		s := c.s
		_, err := Solve(q, make([]float64, 3), make([]float64, 5), &s, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c.m, err, c.want)
		}
	}
}
