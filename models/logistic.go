package models

import (
	"fmt"

	"github.com/gobilevel/bilevel/graph"
	G "gorgonia.org/gorgonia"
)

// LogisticSettings configures LogisticRegression. The zero value is the
// paper's model, without intercept.
type LogisticSettings struct {
	// Bias adds an intercept b ∈ R^c to the logits, an inner variable with
	// the fixed penalty (1/(c·d))‖b‖² (that of a feature with λ = 0):
	// softmax is invariant to a common shift of the logits, so an
	// unpenalized b would leave g without a unique minimizer.
	Bias bool
}

// LogisticModel is multinomial logistic regression with one learned L2
// penalty per feature, as in paper 003 (Ji, Yang, Liang 2021), App. B, on
// 20 Newsgroups (shared/papers/003_1679196860c98ae9.txt, L483):
//
//	g(λ, W) = CE(XW, Y) + (1/(c·d)) Σ_{j<d, k<c} e^{λ_j} W_jk²,
//	f(λ, W) = CE(X'W, Y'),
//
// with W ∈ R^{d×c}, λ ∈ R^d, Y the one-hot training labels and (X', Y')
// the validation data. The paper declares w ∈ R^{p×c} but sums
// exp(λ_j) w_ij² with i over the c classes and j over the p features; we
// read it, as the digest does, as one strength λ_j per feature (row j of
// W), scaled by 1/(c·d). λ starts at 0, W and b at 0.
type LogisticModel struct {
	Model
	Lambda *G.Node // λ, d
	W      *G.Node // W, d×c
	B      *G.Node // b, 1×c (nil without Settings.Bias)
	// Classes is the number c of classes.
	Classes int
}

// LogisticRegression returns the multinomial logistic model with classes
// classes on train (lower level) and val (upper level), which need Labels.
func LogisticRegression(train, val Data, classes int, s LogisticSettings) (*LogisticModel, error) {
	if err := checkClasses(classes); err != nil {
		return nil, err
	}
	if err := train.checkLabels("training data", classes); err != nil {
		return nil, err
	}
	if err := val.checkLabels("validation data", classes); err != nil {
		return nil, err
	}
	if err := checkPair(train, val); err != nil {
		return nil, err
	}
	m := &LogisticModel{Classes: classes}
	err := building("logistic regression", func() {
		d, c := train.D, classes
		g := G.NewGraph()
		lambda := input(g, "lambda", make([]float64, d), d)
		w := input(g, "W", make([]float64, d*c), d, c)
		x := input(g, "X", train.X, train.N, d)
		y := input(g, "Y", oneHot(train.Labels, c), train.N, c)
		xv := input(g, "Xval", val.X, val.N, d)
		yv := input(g, "Yval", oneHot(val.Labels, c), val.N, c)
		inner := []*G.Node{w}
		var b *G.Node
		if s.Bias {
			b = input(g, "b", make([]float64, c), 1, c)
			inner = append(inner, b)
		}
		logits := func(x *G.Node) *G.Node {
			z := G.Must(G.Mul(x, w))
			if b != nil {
				z = G.Must(G.BroadcastAdd(z, b, nil, []byte{0}))
			}
			return z
		}
		// (1/(c·d)) Σ_j e^{λ_j} Σ_k W_jk²
		rows := G.Must(G.Sum(G.Must(G.Square(w)), 1))
		penalty := G.Must(G.Mul(G.Must(G.Exp(lambda)), rows))
		if b != nil {
			penalty = G.Must(G.Add(penalty, sumSquares(b)))
		}
		penalty = scale(1/float64(c*d), penalty)
		lower := G.Must(G.Add(G.Must(graph.SoftmaxCrossEntropy(logits(x), y)), penalty))
		upper := G.Must(graph.SoftmaxCrossEntropy(logits(xv), yv))
		m.Objective = graph.Objective{Upper: upper, Lower: lower,
			Outer: []*G.Node{lambda}, Inner: inner,
			UpperData: []*G.Node{xv, yv}, LowerData: []*G.Node{x, y}}
		m.Graph, m.Lambda, m.W, m.B = g, lambda, w, b
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Penalty selects the regularizer of BinaryLogisticRegression.
type Penalty int

const (
	// ExpPenalty is ½ Σ_j e^{λ_j} w_j², paper 002 (NBO), §4.1 eq. for g
	// (shared/papers/002_c6d05c6ad678f1f0.txt, L356) and §4.2 on IJCNN1
	// (L381). λ starts at 0.
	ExpPenalty Penalty = iota
	// LinearPenalty is Σ_j λ_j w_j², paper 000 (STABLE), §4 eq. (32)
	// (shared/papers/000_5c614c3f79800768.txt, L414-417). g is strongly
	// convex only while every λ_j > 0, which the paper does not enforce.
	// λ starts at ½, the same penalty as ExpPenalty's start.
	LinearPenalty
)

// BinarySettings configures BinaryLogisticRegression. The zero value is
// paper 002's model.
type BinarySettings struct {
	// Penalty is the regularizer (default ExpPenalty).
	Penalty Penalty
	// Bias adds an unpenalized intercept b to the margins, an inner
	// variable (the logistic loss alone is strictly convex in b).
	Bias bool
}

// BinaryLogisticModel is binary logistic regression with one learned
// penalty per feature:
//
//	g(λ, w) = mean_i ψ(s_i x_iᵀw) + ½ Σ_j e^{λ_j} w_j²,  f(λ, w) = mean_val ψ(s_i x_iᵀw),
//
// with ψ(t) = log(1 + e^{−t}), labels s_i = ±1, or the linear penalty
// Σ_j λ_j w_j² (see Penalty). w and b start at 0.
type BinaryLogisticModel struct {
	Model
	Lambda *G.Node // λ, d
	W      *G.Node // w, d
	B      *G.Node // b, scalar (nil without Settings.Bias)
}

// signs maps labels 0/1 or −1/+1 to ±1.
func signs(d Data, what string) ([]float64, error) {
	if err := d.checkX(what); err != nil {
		return nil, err
	}
	if len(d.Labels) != d.N {
		return nil, fmt.Errorf("models: %s has %d labels for N = %d samples", what, len(d.Labels), d.N)
	}
	s := make([]float64, d.N)
	zero, minus := -1, -1
	for i, l := range d.Labels {
		switch l {
		case 0:
			if zero < 0 {
				zero = i
			}
			s[i] = -1
		case -1:
			if minus < 0 {
				minus = i
			}
			s[i] = -1
		case 1:
			s[i] = 1
		default:
			return nil, fmt.Errorf("models: %s: label %d of sample %d is not 0/1 or −1/+1", what, l, i)
		}
	}
	if zero >= 0 && minus >= 0 {
		return nil, fmt.Errorf("models: %s mixes label 0 (sample %d) and label −1 (sample %d)", what, zero, minus)
	}
	return s, nil
}

// BinaryLogisticRegression returns the binary logistic model on train
// (lower level) and val (upper level), whose Labels are 0/1 or −1/+1.
func BinaryLogisticRegression(train, val Data, s BinarySettings) (*BinaryLogisticModel, error) {
	st, err := signs(train, "training data")
	if err != nil {
		return nil, err
	}
	sv, err := signs(val, "validation data")
	if err != nil {
		return nil, err
	}
	if err := checkPair(train, val); err != nil {
		return nil, err
	}
	if s.Penalty != ExpPenalty && s.Penalty != LinearPenalty {
		return nil, fmt.Errorf("models: unknown Penalty %d", s.Penalty)
	}
	m := &BinaryLogisticModel{}
	err = building("binary logistic regression", func() {
		d := train.D
		g := G.NewGraph()
		l0 := make([]float64, d)
		if s.Penalty == LinearPenalty {
			for j := range l0 {
				l0[j] = 0.5
			}
		}
		lambda := input(g, "lambda", l0, d)
		w := input(g, "w", make([]float64, d), d)
		x := input(g, "X", train.X, train.N, d)
		sg := input(g, "s", st, train.N)
		xv := input(g, "Xval", val.X, val.N, d)
		svn := input(g, "sval", sv, val.N)
		inner := []*G.Node{w}
		var b *G.Node
		if s.Bias {
			b = input(g, "b", []float64{0})
			inner = append(inner, b)
		}
		// mean_i ψ(s_i (x_iᵀw + b)) with ψ(t) = softplus(−t)
		loss := func(x, s *G.Node) *G.Node {
			z := G.Must(G.Mul(x, w))
			if b != nil {
				z = G.Must(G.Add(z, b))
			}
			margin := G.Must(G.HadamardProd(s, z))
			return G.Must(G.Mean(G.Must(G.Softplus(G.Must(G.Neg(margin))))))
		}
		var penalty *G.Node
		if s.Penalty == LinearPenalty {
			penalty = G.Must(G.Mul(lambda, G.Must(G.Square(w))))
		} else {
			penalty = scale(0.5, G.Must(G.Mul(G.Must(G.Exp(lambda)), G.Must(G.Square(w)))))
		}
		m.Objective = graph.Objective{Upper: loss(xv, svn), Lower: G.Must(G.Add(loss(x, sg), penalty)),
			Outer: []*G.Node{lambda}, Inner: inner,
			UpperData: []*G.Node{xv, svn}, LowerData: []*G.Node{x, sg}}
		m.Graph, m.Lambda, m.W, m.B = g, lambda, w, b
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
