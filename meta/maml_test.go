package meta

import (
	"math/rand/v2"
	"testing"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/diff/fd"
)

// mamlPoint returns a task of the toy data, the MAML problem on it
// (models.CNNInit) and a point θ_0 near the initial one: filters, γ and β
// perturbed, a random head.
func mamlPoint(t *testing.T, seed uint64) (*data.Task, *graph.Problem, []float64) {
	t.Helper()
	task, err := toyTasks(t, 3, 2, 2, seed).Task(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := compileOn(t, task, tiny, func(sup, q models.Data, ways int, s models.CNNSettings) (compiler, error) {
		return models.CNNInit(sup, q, ways, s)
	})
	rng := rand.New(rand.NewPCG(seed, 9))
	theta := p.X0(nil)
	for i := range theta {
		theta[i] += 0.2 * rng.NormFloat64()
	}
	return task, p, theta
}

// mamlLearner returns a MAML learner at θ_0.
func mamlLearner(t *testing.T, s Settings, theta []float64) *Learner {
	t.Helper()
	s.Gradient, s.Workers = MAML, 1
	l, err := NewLearner(s, tiny, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restore(Snapshot{Params: theta}); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMAMLGradient checks MAML's meta-gradient, the derivative of the
// query loss after T steps on the whole network with respect to its
// initialization θ_0: against the T steps written out in one graph and
// differentiated symbolically (graph.Problem.Unrolled on models.CNNInit),
// against unroll's sweep with the outer point visible (its d f/dx through
// the mixed products, which must equal the first adjoint the learner
// takes), and against central differences of θ_0 ↦ f(θ_0, δ_T(θ_0)).
func TestMAMLGradient(t *testing.T) {
	task, p, theta := mamlPoint(t, 31)
	const alpha = 0.3
	for _, T := range []int{1, 2, 4} {
		l := mamlLearner(t, Settings{Steps: T, Alpha: alpha}, theta)
		got := make([]float64, len(theta))
		if _, err := l.MetaGradient(got, []*data.Task{task}); err != nil {
			t.Fatal(err)
		}
		ref, err := p.Unrolled(T, alpha, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, p.DimX())
		ref.Hypergradient(want, theta, p.Y0(nil))
		if e := relErr(got, want); e > 1e-10 {
			t.Errorf("T = %d: MAML's meta-gradient differs from the in-graph unroll by %.2e", T, e)
		} else {
			t.Logf("T = %d: in-graph unroll, relative difference %.1e", T, e)
		}
		sweep := make([]float64, p.DimX())
		fx := p.FixX(theta, nil, nil)
		u := &unroll.Unroller{Steps: T, Alpha: alpha}
		if _, err := u.Hypergradient(sweep, fixedOracles{fx}, fx.X(), p.Y0(nil), nil); err != nil {
			t.Fatal(err)
		}
		if e := relErr(got, sweep); e > 1e-12 {
			t.Errorf("T = %d: the first adjoint differs from the sweep's d f/dx by %.2e", T, e)
		}
		F := func(th []float64) float64 {
			fx := p.FixX(th, nil, nil)
			d := p.Y0(nil)
			if err := unroll.Descend(fixedOracles{fx}, th, d, T, alpha, nil, nil); err != nil {
				t.Fatal(err)
			}
			return fx.F(d)
		}
		num := fd.Gradient(nil, F, theta, &fd.Settings{Formula: fd.Central, Step: 1e-5})
		if e := relErr(got, num); e > 1e-8 {
			t.Errorf("T = %d: MAML's meta-gradient differs from central differences by %.2e", T, e)
		} else {
			t.Logf("T = %d: central differences, relative difference %.1e", T, e)
		}
	}
}

// TestFOMAML checks first-order MAML against its definition, computed on
// models.CNN (λ = 0) with its own oracles: T steps θ_{t+1} = θ_t −
// α(∇φ g, ∇w g)(θ_t) from θ_0, then the meta-gradient (∇φ f, ∇w f)(θ_T);
// and MAML's and FOMAML's query accuracy and loss, which are those of θ_T.
func TestFOMAML(t *testing.T) {
	task, _, theta := mamlPoint(t, 32)
	s := tiny
	s.Lambda = -1
	pc := taskProblem(t, task, s)
	const T, alpha = 3, 0.3
	nx := pc.DimX()
	th := append([]float64{}, theta...)
	g := make([]float64, len(th))
	for range T {
		pc.GradG(g[:nx], g[nx:], th[:nx], th[nx:], nil)
		for i := range th {
			th[i] -= alpha * g[i]
		}
	}
	want := make([]float64, len(th))
	pc.GradF(want[:nx], want[nx:], th[:nx], th[nx:], nil)
	l := mamlLearner(t, Settings{Steps: T, Alpha: alpha, FirstOrder: true}, theta)
	got := make([]float64, len(th))
	st, err := l.MetaGradient(got, []*data.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(got, want); e > 1e-12 {
		t.Errorf("FOMAML differs from (∇φ f, ∇w f) at θ_T by %.2e", e)
	}
	if loss := pc.F(th[:nx], th[nx:], nil); relErr([]float64{st.Loss}, []float64{loss}) > 1e-12 {
		t.Errorf("FOMAML's query loss %v; f(θ_T) = %v", st.Loss, loss)
	}
	full := mamlLearner(t, Settings{Steps: T, Alpha: alpha}, theta)
	st2, err := full.MetaGradient(got, []*data.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Loss != st.Loss || st2.Accuracy != st.Accuracy {
		t.Errorf("MAML's query loss and accuracy %v, %v; FOMAML's %v, %v (the same θ_T)", st2.Loss, st2.Accuracy, st.Loss, st.Accuracy)
	}
}
