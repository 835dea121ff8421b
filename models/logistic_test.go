package models

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// softmaxRows returns the row-wise softmax of z.
func softmaxRows(z *mat.Dense) *mat.Dense {
	r, c := z.Dims()
	p := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		row := z.RawRowView(i)
		m := floats.Max(row)
		s := 0.0
		for k, v := range row {
			e := math.Exp(v - m)
			p.Set(i, k, e)
			s += e
		}
		floats.Scale(1/s, p.RawRowView(i))
	}
	return p
}

// TestLogisticHVP compares the multinomial model's value, ∇yy g·v and
// ∇xy g·v with the hand formulas, written with gonum: with P = softmax(Z),
// Z = XW + 1bᵀ and the direction (V, v_b), Ż = XV + 1v_bᵀ and
// R = P⊙Ż − P⊙rowsum(P⊙Ż),
//
//	∇WW g·V = XᵀR/n + (2/(cd)) diag(e^λ) V,  ∇bb g·v_b = 1ᵀR/n + (2/(cd)) v_b,
//	∇λ⟨∇W g, V⟩ = (2/(cd)) e^λ ⊙ rowsum(W⊙V).
func TestLogisticHVP(t *testing.T) {
	const tol = 1e-12
	rng := rand.New(rand.NewPCG(5, 6))
	n, d, c := 50, 7, 4
	train, val := randData(rng, n, d, c), randData(rng, 20, d, c)
	for _, bias := range []bool{false, true} {
		m, err := LogisticRegression(train, val, c, LogisticSettings{Bias: bias})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Compile()
		if err != nil {
			t.Fatal(err)
		}
		dimY := d * c
		if bias {
			dimY += c
		}
		if p.DimX() != d || p.DimY() != dimY {
			t.Fatalf("bias %v: dims %d, %d", bias, p.DimX(), p.DimY())
		}
		lambda, y, v := randVec(rng, d, 1), randVec(rng, dimY, 0.5), randVec(rng, dimY, 1)
		x := mat.NewDense(n, d, train.X)
		w, vw := mat.NewDense(d, c, y[:d*c]), mat.NewDense(d, c, v[:d*c])
		var z, zd mat.Dense
		z.Mul(x, w)
		zd.Mul(x, vw)
		if bias {
			for i := 0; i < n; i++ {
				floats.Add(z.RawRowView(i), y[d*c:])
				floats.Add(zd.RawRowView(i), v[d*c:])
			}
		}
		P := softmaxRows(&z)
		k := 2 / float64(c*d)

		// g = CE + (1/(cd)) Σ e^λ_j W_jk² (+ (1/(cd))‖b‖²)
		g := 0.0
		for i := 0; i < n; i++ {
			g -= math.Log(P.At(i, train.Labels[i])) / float64(n)
		}
		for j := 0; j < d; j++ {
			for l := 0; l < c; l++ {
				g += k / 2 * math.Exp(lambda[j]) * w.At(j, l) * w.At(j, l)
			}
		}
		if bias {
			g += k / 2 * floats.Dot(y[d*c:], y[d*c:])
		}
		near(t, "g", []float64{p.G(lambda, y, nil)}, []float64{g}, tol)

		R := mat.NewDense(n, c, nil)
		R.MulElem(P, &zd)
		for i := 0; i < n; i++ {
			row := R.RawRowView(i)
			s := floats.Sum(row)
			for l := range row {
				row[l] -= P.At(i, l) * s
			}
		}
		var hw mat.Dense
		hw.Mul(x.T(), R)
		hw.Scale(1/float64(n), &hw)
		for j := 0; j < d; j++ {
			for l := 0; l < c; l++ {
				hw.Set(j, l, hw.At(j, l)+k*math.Exp(lambda[j])*vw.At(j, l))
			}
		}
		want := append([]float64{}, hw.RawMatrix().Data...)
		if bias {
			hb := make([]float64, c)
			for i := 0; i < n; i++ {
				floats.AddScaled(hb, 1/float64(n), R.RawRowView(i))
			}
			floats.AddScaled(hb, k, v[d*c:])
			want = append(want, hb...)
		}
		got := make([]float64, dimY)
		p.HVP(got, lambda, y, v, nil)
		near(t, "∇yy g·v", got, want, tol)
		p.Linearize(lambda, y, nil).HVP(got, v)
		near(t, "linearized ∇yy g·v", got, want, tol)

		mix := make([]float64, d)
		for j := 0; j < d; j++ {
			mix[j] = k * math.Exp(lambda[j]) * floats.Dot(w.RawRowView(j), vw.RawRowView(j))
		}
		gotX := make([]float64, d)
		p.MixedXY(gotX, lambda, y, v, nil)
		near(t, "∇xy g·v", gotX, mix, tol)
	}
}

// TestBinaryLogistic compares the binary model's value and ∇yy g·v with
// the hand formulas: with m_i = s_i x_iᵀw and σ_i = σ(m_i),
// g = mean ψ(m_i) + ½ Σ e^λ_j w_j², ∇ww g·v = Xᵀ diag(σ_i(1 − σ_i)) X v / n
// + e^λ ⊙ v; and that labels 0/1 and −1/+1 give the same model.
func TestBinaryLogistic(t *testing.T) {
	const tol = 1e-12
	rng := rand.New(rand.NewPCG(7, 8))
	n, d := 40, 5
	train, val := binary(randData(rng, n, d, 2)), binary(randData(rng, 15, d, 2))
	m, err := BinaryLogisticRegression(train, val, BinarySettings{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Compile()
	if err != nil {
		t.Fatal(err)
	}
	pm := train
	pm.Labels = make([]int, n)
	for i, l := range train.Labels {
		pm.Labels[i] = 2*l - 1
	}
	m2, err := BinaryLogisticRegression(pm, val, BinarySettings{})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Compile()
	if err != nil {
		t.Fatal(err)
	}
	lambda, w, v := randVec(rng, d, 1), randVec(rng, d, 1), randVec(rng, d, 1)
	g := 0.0
	hv := make([]float64, d)
	for i := 0; i < n; i++ {
		xi := train.X[i*d : (i+1)*d]
		s := float64(2*train.Labels[i] - 1)
		mi := s * floats.Dot(xi, w)
		g += math.Log1p(math.Exp(-mi)) / float64(n)
		sg := 1 / (1 + math.Exp(-mi))
		floats.AddScaled(hv, sg*(1-sg)*floats.Dot(xi, v)/float64(n), xi)
	}
	for j := range w {
		g += math.Exp(lambda[j]) * w[j] * w[j] / 2
		hv[j] += math.Exp(lambda[j]) * v[j]
	}
	near(t, "g", []float64{p.G(lambda, w, nil)}, []float64{g}, tol)
	near(t, "g with ±1 labels", []float64{p2.G(lambda, w, nil)}, []float64{g}, tol)
	got := make([]float64, d)
	p.HVP(got, lambda, w, v, nil)
	near(t, "∇ww g·v", got, hv, tol)

	lin, err := BinaryLogisticRegression(train, val, BinarySettings{Penalty: LinearPenalty})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := lin.Compile()
	if err != nil {
		t.Fatal(err)
	}
	// Σ λ_j w_j² at λ = ½ equals ½ Σ e^0 w_j².
	if x0 := pl.X0(nil); x0[0] != 0.5 {
		t.Errorf("linear penalty starts at λ = %v; want ½", x0[0])
	}
	near(t, "linear penalty at its start", []float64{pl.G(pl.X0(nil), w, nil)}, []float64{p.G(make([]float64, d), w, nil)}, tol)
}
