package meta

import (
	"math"
	"testing"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/implicit"
	"github.com/gobilevel/bilevel/unroll"
	"gonum.org/v1/gonum/floats"
)

// TestInnerDiagnostics checks StepStats.InnerRatio against
// ‖∇y g(y_D)‖ / ‖∇y g(y_0)‖ computed on the task's problem, and
// CGResidual against the true relative residual of N CG steps on
// ∇yy g(y_D)·v = ∇y f(y_D); that a stable inner step gives a ratio below
// 1 and one too large for the head's curvature a ratio above 1; and that
// ITD-BiO reports no CG residual.
func TestInnerDiagnostics(t *testing.T) {
	task, p, x := toyTaskPoint(t, 7, 2, 3)
	const D, N = 5, 3
	fx := p.FixX(x, nil, nil)
	for _, c := range []struct {
		alpha      float64
		below1     bool
		wantAbove1 bool
	}{{0.05, true, false}, {60, false, true}} {
		y0 := p.Y0(nil)
		yD := append([]float64(nil), y0...)
		if err := unroll.Descend(fixedOracles{fx}, x, yD, D, c.alpha, nil, nil); err != nil {
			t.Fatal(err)
		}
		g := make([]float64, len(yD))
		fx.GradG(nil, g, yD)
		num := floats.Norm(g, 2)
		fx.GradG(nil, g, y0)
		want := num / floats.Norm(g, 2)

		b := make([]float64, len(yD))
		fx.GradF(nil, b, yD)
		v := make([]float64, len(yD))
		if _, err := (&implicit.CG{MaxIter: N, Tol: 1e-300}).Solve(v, implicit.HVPOperator(fixedOracles{fx}, x, yD, nil), b); err != nil {
			t.Fatal(err)
		}
		av := make([]float64, len(yD))
		fx.HVP(av, yD, v)
		floats.Sub(av, b)
		wantCG := floats.Norm(av, 2) / floats.Norm(b, 2)

		for _, m := range []Gradient{AID, ITD} {
			l, err := NewLearner(Settings{Gradient: m, Steps: D, Alpha: c.alpha, CGSteps: N, Workers: 1}, tiny, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Restore(Snapshot{Params: x}); err != nil {
				t.Fatal(err)
			}
			st, err := l.MetaGradient(make([]float64, len(x)), []*data.Task{task})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.InnerRatio-want) > 1e-9*want {
				t.Errorf("%v, α = %v: InnerRatio %v, want %v", m, c.alpha, st.InnerRatio, want)
			}
			if c.below1 && !(st.InnerRatio < 1) || c.wantAbove1 && !(st.InnerRatio > 1) {
				t.Errorf("%v, α = %v: InnerRatio %v on the wrong side of 1", m, c.alpha, st.InnerRatio)
			}
			switch m {
			case AID:
				if math.Abs(st.CGResidual-wantCG) > 1e-8*wantCG+1e-14 {
					t.Errorf("α = %v: CGResidual %v, want %v", c.alpha, st.CGResidual, wantCG)
				}
			default:
				if st.CGResidual != 0 {
					t.Errorf("%v: CGResidual %v, want 0", m, st.CGResidual)
				}
			}
			t.Logf("%v α = %v: InnerRatio %.4g CGResidual %.3g", m, c.alpha, st.InnerRatio, st.CGResidual)
		}
	}
}
