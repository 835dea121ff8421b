package models

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	G "gorgonia.org/gorgonia"
)

// QuadraticSettings configures Quadratic. Zero values mean the defaults.
type QuadraticSettings struct {
	// DimX and DimY are the dimensions m of x and n of y (required).
	DimX, DimY int
	// Mu is the smallest eigenvalue μ of A (default 1).
	Mu float64
	// Cond is the condition number L/μ of A (default 10); A's eigenvalues
	// are spaced geometrically from μ to L = μ·Cond.
	Cond float64
	// Rho is the weight ρ ≥ 0 of ½ρ‖x‖² in f (default 0: no term). With
	// ρ = 0, DimX must not exceed DimY, so that Φ has a unique minimizer.
	Rho float64
	// NoShift sets c = 0; otherwise c has N(0, 1) entries.
	NoShift bool
	// LowerSamples is the number of samples of g: 0 (the default) for the
	// deterministic g, else g = mean_i ½ yᵀA_i y − yᵀB_i x + c_iᵀy.
	LowerSamples int
	// UpperSamples is the number of samples of f: 0 for the deterministic
	// f, else f = mean_j ½‖y − b_j‖² + ½ρ‖x‖².
	UpperSamples int
	// Noise sets the size of the per-sample deviations, in (0, 1) (default
	// 0.5): ‖A_i − A‖₂ ≤ Noise·μ, the largest with equality, so every A_i
	// is positive definite; B_i − B, c_i − c and b_j − b have entries of
	// standard deviation about Noise times that of B, c and b. The
	// deviations are centered: their mean over the data set is zero.
	Noise float64
	// Seed seeds the generator (0 is a seed like any other).
	Seed uint64
}

// QuadraticModel is the strongly convex quadratic bilevel problem
//
//	g(x, y) = ½ yᵀAy − yᵀBx + cᵀy,  f(x, y) = ½‖y − b‖² + ½ρ‖x‖²,
//
// or its stochastic version, whose per-sample terms average to A, B, c
// and b. Its closed forms use these full-data means. The exported fields
// are read-only: the closed forms and the graph were built from them.
type QuadraticModel struct {
	Model
	X, Y *G.Node // the variables x ∈ R^m and y ∈ R^n, both starting at 0

	A      *mat.SymDense // n×n, symmetric positive definite: ∇yy g
	B      *mat.Dense    // n×m: ∇xy g = −Bᵀ
	C      []float64     // n
	Target []float64     // b, n
	Rho    float64

	// LowerSamples and UpperSamples are the numbers of samples of g and f
	// (0 for a deterministic level).
	LowerSamples, UpperSamples int

	m, n       int
	sa, sb, sc []float64 // per-sample rows of A_i, B_i (row-major) and c_i
	st         []float64 // per-sample rows of b_j
	chol       mat.Cholesky
	phiConst   float64 // ½ mean_j ‖b_j − b‖²
	xStar      []float64
}

// Quadratic returns a random quadratic problem drawn from s: A = QΛQᵀ with
// Q the orthogonal factor of the QR decomposition of a Gaussian matrix and
// Λ the eigenvalues; B with N(0, 1/m) entries; c and b with N(0, 1)
// entries.
func Quadratic(s QuadraticSettings) (*QuadraticModel, error) {
	m, n := s.DimX, s.DimY
	switch {
	case m <= 0 || n <= 0:
		return nil, fmt.Errorf("models: Quadratic needs DimX and DimY ≥ 1, got %d and %d", m, n)
	case s.Mu < 0 || math.IsNaN(s.Mu):
		return nil, fmt.Errorf("models: Quadratic: Mu = %v; want μ > 0", s.Mu)
	case s.Cond != 0 && !(s.Cond >= 1):
		return nil, fmt.Errorf("models: Quadratic: Cond = %v; want L/μ ≥ 1", s.Cond)
	case s.Noise < 0 || s.Noise >= 1 || math.IsNaN(s.Noise):
		return nil, fmt.Errorf("models: Quadratic: Noise = %v; want it in (0, 1)", s.Noise)
	case s.LowerSamples < 0 || s.UpperSamples < 0:
		return nil, fmt.Errorf("models: Quadratic: negative sample counts %d and %d", s.LowerSamples, s.UpperSamples)
	}
	mu, cond, noise := s.Mu, s.Cond, s.Noise
	if mu == 0 {
		mu = 1
	}
	if cond == 0 {
		cond = 10
	}
	if noise == 0 {
		noise = 0.5
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x9a1d))
	gauss := func(k int, sd float64) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = sd * rng.NormFloat64()
		}
		return v
	}

	var qr mat.QR
	qr.Factorize(mat.NewDense(n, n, gauss(n*n, 1)))
	var q mat.Dense
	qr.QTo(&q)
	eig := make([]float64, n)
	for i := range eig {
		t := 0.0
		if n > 1 {
			t = float64(i) / float64(n-1)
		}
		eig[i] = mu * math.Pow(cond, t)
	}
	var qd mat.Dense
	qd.Mul(&q, mat.NewDiagDense(n, eig))
	var full mat.Dense
	full.Mul(&qd, q.T())
	a := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			a.SetSym(i, j, (full.At(i, j)+full.At(j, i))/2)
		}
	}
	b := mat.NewDense(n, m, gauss(n*m, 1/math.Sqrt(float64(m))))
	var c []float64
	if !s.NoShift {
		c = gauss(n, 1)
	}
	target := gauss(n, 1)

	qm := &QuadraticModel{A: a, B: b, C: c, Target: target, Rho: s.Rho, m: m, n: n,
		LowerSamples: s.LowerSamples, UpperSamples: s.UpperSamples}
	if err := qm.checkRho(); err != nil {
		return nil, err
	}
	if N := s.LowerSamples; N > 0 {
		qm.sa = make([]float64, N*n*n)
		ea := make([]*mat.SymDense, N)
		for i := range ea {
			r := gauss(n*n, 1)
			ea[i] = mat.NewSymDense(n, nil)
			for j := 0; j < n; j++ {
				for k := j; k < n; k++ {
					ea[i].SetSym(j, k, (r[j*n+k]+r[k*n+j])/2)
				}
			}
		}
		center := mat.NewSymDense(n, nil)
		for _, e := range ea {
			center.AddSym(center, e)
		}
		center.ScaleSym(-1/float64(N), center)
		largest := 0.0
		var es mat.EigenSym
		for _, e := range ea {
			e.AddSym(e, center)
			if N == 1 {
				break // a single deviation is centered to zero
			}
			if !es.Factorize(e, false) {
				return nil, fmt.Errorf("models: Quadratic: eigenvalues of a noise matrix did not converge")
			}
			v := es.Values(nil)
			largest = math.Max(largest, math.Max(math.Abs(v[0]), math.Abs(v[n-1])))
		}
		k := 0.0
		if largest > 0 {
			k = noise * mu / largest
		}
		for i, e := range ea {
			row := qm.sa[i*n*n : (i+1)*n*n]
			for j := 0; j < n; j++ {
				for l := 0; l < n; l++ {
					row[j*n+l] = a.At(j, l) + k*e.At(j, l)
				}
			}
		}
		qm.sb = centeredRows(gauss(N*n*m, noise/math.Sqrt(float64(m))), N, b.RawMatrix().Data)
		if c != nil {
			qm.sc = centeredRows(gauss(N*n, noise), N, c)
		}
	}
	if M := s.UpperSamples; M > 0 {
		qm.st = centeredRows(gauss(M*n, noise), M, target)
		for j := 0; j < M; j++ {
			d := make([]float64, n)
			floats.SubTo(d, qm.st[j*n:(j+1)*n], target)
			qm.phiConst += floats.Dot(d, d) / (2 * float64(M))
		}
	}
	if err := qm.finish(); err != nil {
		return nil, err
	}
	return qm, nil
}

// centeredRows returns the N rows mean + (dev_i − mean_k dev_k) of the
// deviations dev (N rows of len(mean) values).
func centeredRows(dev []float64, N int, mean []float64) []float64 {
	k := len(mean)
	avg := make([]float64, k)
	for i := 0; i < N; i++ {
		floats.Add(avg, dev[i*k:(i+1)*k])
	}
	floats.Scale(1/float64(N), avg)
	for i := 0; i < N; i++ {
		row := dev[i*k : (i+1)*k]
		floats.Sub(row, avg)
		floats.Add(row, mean)
	}
	return dev
}

// QuadraticOf returns the deterministic quadratic problem with the given
// A (n×n, positive definite), B (n×m), c (nil for 0) and b, and ρ ≥ 0. The
// model copies them.
func QuadraticOf(a *mat.SymDense, b *mat.Dense, c, target []float64, rho float64) (*QuadraticModel, error) {
	if a == nil || b == nil {
		return nil, fmt.Errorf("models: QuadraticOf needs A and B")
	}
	n := a.SymmetricDim()
	r, m := b.Dims()
	switch {
	case n == 0 || m == 0:
		return nil, fmt.Errorf("models: QuadraticOf: empty A or B")
	case r != n:
		return nil, fmt.Errorf("models: QuadraticOf: B has %d rows; want n = %d, the size of A", r, n)
	case c != nil && len(c) != n:
		return nil, fmt.Errorf("models: QuadraticOf: c has length %d; want n = %d", len(c), n)
	case len(target) != n:
		return nil, fmt.Errorf("models: QuadraticOf: b has length %d; want n = %d", len(target), n)
	}
	qm := &QuadraticModel{A: mat.NewSymDense(n, nil), B: mat.DenseCopyOf(b), Target: append([]float64{}, target...), Rho: rho, m: m, n: n}
	qm.A.CopySym(a)
	if c != nil {
		qm.C = append([]float64{}, c...)
	}
	if err := qm.checkRho(); err != nil {
		return nil, err
	}
	if err := qm.finish(); err != nil {
		return nil, err
	}
	return qm, nil
}

func (q *QuadraticModel) checkRho() error {
	switch {
	case q.Rho < 0 || math.IsNaN(q.Rho):
		return fmt.Errorf("models: quadratic: ρ = %v; want ρ ≥ 0", q.Rho)
	case q.Rho == 0 && q.m > q.n:
		return fmt.Errorf("models: quadratic: with ρ = 0 and DimX = %d > DimY = %d, Φ has no unique minimizer", q.m, q.n)
	}
	return nil
}

// finish factorizes A, solves for x* and writes the graph.
func (q *QuadraticModel) finish() error {
	if !q.chol.Factorize(q.A) {
		return fmt.Errorf("models: quadratic: A is not positive definite")
	}
	// Φ(x) = ½‖Mx − r‖² + ½ρ‖x‖² + const with M = A⁻¹B, r = A⁻¹c + b.
	var mm mat.Dense
	if err := q.chol.SolveTo(&mm, q.B); err != nil {
		return fmt.Errorf("models: quadratic: solving with A: %v", err)
	}
	r := mat.NewVecDense(q.n, append([]float64{}, q.Target...))
	if q.C != nil {
		var ac mat.VecDense
		if err := q.chol.SolveVecTo(&ac, mat.NewVecDense(q.n, append([]float64{}, q.C...))); err != nil {
			return fmt.Errorf("models: quadratic: solving with A: %v", err)
		}
		r.AddVec(r, &ac)
	}
	normal := mat.NewSymDense(q.m, nil)
	normal.SymOuterK(1, mm.T())
	for i := 0; i < q.m; i++ {
		normal.SetSym(i, i, normal.At(i, i)+q.Rho)
	}
	var nc mat.Cholesky
	if !nc.Factorize(normal) {
		return fmt.Errorf("models: quadratic: MᵀM + ρI is singular (M = A⁻¹B); Φ has no unique minimizer")
	}
	var rhs, xs mat.VecDense
	rhs.MulVec(mm.T(), r)
	if err := nc.SolveVecTo(&xs, &rhs); err != nil {
		return fmt.Errorf("models: quadratic: solving for x*: %v", err)
	}
	q.xStar = append([]float64{}, xs.RawVector().Data...)
	return building("quadratic", q.build)
}

func (q *QuadraticModel) build() {
	m, n := q.m, q.n
	g := G.NewGraph()
	x := input(g, "x", make([]float64, m), m)
	y := input(g, "y", make([]float64, n), n)
	obj := &q.Objective
	obj.Outer, obj.Inner = []*G.Node{x}, []*G.Node{y}

	// g(x, y) = ½ yᵀAy − yᵀBx + cᵀy, or the mean of its samples: with the
	// rows of A_i and B_i flattened, yᵀA_i y = ⟨A_i, y yᵀ⟩ and
	// yᵀB_i x = ⟨B_i, y xᵀ⟩, so one matrix–vector product per term covers
	// all samples of a batch.
	var lower *G.Node
	if N := q.LowerSamples; N == 0 {
		a := input(g, "A", symData(q.A), n, n)
		b := input(g, "B", q.B.RawMatrix().Data, n, m)
		quad := G.Must(G.Mul(y, G.Must(G.Mul(a, y))))
		lower = G.Must(G.Sub(scale(0.5, quad), G.Must(G.Mul(y, G.Must(G.Mul(b, x))))))
		obj.Constants = []*G.Node{a, b}
		if q.C != nil {
			c := input(g, "c", q.C, n)
			lower = G.Must(G.Add(lower, G.Must(G.Mul(c, y))))
			obj.Constants = append(obj.Constants, c)
		}
	} else {
		a := input(g, "A_i", q.sa, N, n*n)
		b := input(g, "B_i", q.sb, N, n*m)
		yy := G.Must(G.Reshape(G.Must(G.OuterProd(y, y)), []int{n * n}))
		yx := G.Must(G.Reshape(G.Must(G.OuterProd(y, x)), []int{n * m}))
		per := G.Must(G.Sub(scale(0.5, G.Must(G.Mul(a, yy))), G.Must(G.Mul(b, yx))))
		obj.LowerData = []*G.Node{a, b}
		if q.C != nil {
			c := input(g, "c_i", q.sc, N, n)
			per = G.Must(G.Add(per, G.Must(G.Mul(c, y))))
			obj.LowerData = append(obj.LowerData, c)
		}
		lower = G.Must(G.Mean(per))
	}

	// f(x, y) = ½‖y − b‖² + ½ρ‖x‖², or with samples
	// ½ mean_j ‖y − b_j‖² = ½‖y‖² − mean_j b_jᵀy + ½ mean_j ‖b_j‖².
	var upper *G.Node
	if M := q.UpperSamples; M == 0 {
		b := input(g, "b", q.Target, n)
		upper = scale(0.5, sumSquares(G.Must(G.Sub(y, b))))
		obj.Constants = append(obj.Constants, b)
	} else {
		b := input(g, "b_j", q.st, M, n)
		upper = G.Must(G.Sub(scale(0.5, sumSquares(y)), G.Must(G.Mean(G.Must(G.Mul(b, y))))))
		norms := G.Must(G.Sum(G.Must(G.Square(b)), 1))
		upper = G.Must(G.Add(upper, scale(0.5, G.Must(G.Mean(norms)))))
		obj.UpperData = []*G.Node{b}
	}
	if q.Rho != 0 {
		upper = G.Must(G.Add(upper, scale(0.5*q.Rho, sumSquares(x))))
	}
	obj.Lower, obj.Upper = lower, upper
	q.Graph, q.X, q.Y = g, x, y
}

// symData returns the n×n row-major values of a.
func symData(a *mat.SymDense) []float64 {
	n := a.SymmetricDim()
	d := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			d[i*n+j] = a.At(i, j)
		}
	}
	return d
}

// Sample returns the terms of lower-level sample i of a stochastic model:
// A_i, B_i and c_i (nil when c = 0).
func (q *QuadraticModel) Sample(i int) (a *mat.SymDense, b *mat.Dense, c []float64) {
	if i < 0 || i >= q.LowerSamples {
		panic(fmt.Sprintf("models: quadratic sample %d out of range for %d lower samples", i, q.LowerSamples))
	}
	n, m := q.n, q.m
	a = mat.NewSymDense(n, append([]float64{}, q.sa[i*n*n:(i+1)*n*n]...))
	b = mat.NewDense(n, m, append([]float64{}, q.sb[i*n*m:(i+1)*n*m]...))
	if q.sc != nil {
		c = append([]float64{}, q.sc[i*n:(i+1)*n]...)
	}
	return a, b, c
}

// UpperSample returns the target b_j of upper-level sample j.
func (q *QuadraticModel) UpperSample(j int) []float64 {
	if j < 0 || j >= q.UpperSamples {
		panic(fmt.Sprintf("models: quadratic sample %d out of range for %d upper samples", j, q.UpperSamples))
	}
	return append([]float64{}, q.st[j*q.n:(j+1)*q.n]...)
}

func vecOrAlloc(dst []float64, n int, what string) []float64 {
	if dst == nil {
		return make([]float64, n)
	}
	if len(dst) != n {
		panic(fmt.Sprintf("models: %s destination has length %d, want %d", what, len(dst), n))
	}
	return dst
}

func checkVec(v []float64, n int, what string) {
	if len(v) != n {
		panic(fmt.Sprintf("models: %s has length %d, want %d", what, len(v), n))
	}
}

// YStar computes y*(x) = A⁻¹(Bx − c) into dst (allocated when nil) and
// returns it.
func (q *QuadraticModel) YStar(dst, x []float64) []float64 {
	checkVec(x, q.m, "x")
	dst = vecOrAlloc(dst, q.n, "YStar")
	rhs := mat.NewVecDense(q.n, nil)
	rhs.MulVec(q.B, mat.NewVecDense(q.m, append([]float64{}, x...)))
	if q.C != nil {
		rhs.SubVec(rhs, mat.NewVecDense(q.n, q.C))
	}
	if err := q.chol.SolveVecTo(mat.NewVecDense(q.n, dst), rhs); err != nil {
		panic(fmt.Sprintf("models: quadratic: solving with A: %v", err))
	}
	return dst
}

// Phi returns Φ(x) = f(x, y*(x)) on the full data.
func (q *QuadraticModel) Phi(x []float64) float64 {
	y := q.YStar(nil, x)
	floats.Sub(y, q.Target)
	return floats.Dot(y, y)/2 + q.Rho*floats.Dot(x, x)/2 + q.phiConst
}

// HyperGrad computes ∇Φ(x) = BᵀA⁻¹(y*(x) − b) + ρx into dst (allocated
// when nil) and returns it.
func (q *QuadraticModel) HyperGrad(dst, x []float64) []float64 {
	dst = vecOrAlloc(dst, q.m, "HyperGrad")
	y := q.YStar(nil, x)
	floats.Sub(y, q.Target)
	var u mat.VecDense
	if err := q.chol.SolveVecTo(&u, mat.NewVecDense(q.n, y)); err != nil {
		panic(fmt.Sprintf("models: quadratic: solving with A: %v", err))
	}
	d := mat.NewVecDense(q.m, dst)
	d.MulVec(q.B.T(), &u)
	floats.AddScaled(dst, q.Rho, x)
	return dst
}

// XStar copies the minimizer x* of Φ into dst (allocated when nil) and
// returns it.
func (q *QuadraticModel) XStar(dst []float64) []float64 {
	dst = vecOrAlloc(dst, q.m, "XStar")
	copy(dst, q.xStar)
	return dst
}
