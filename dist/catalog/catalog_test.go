package catalog

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/graph"
)

func TestMain(m *testing.M) {
	dist.ServeIfWorker() // the workers of the tests and the example
	os.Exit(m.Run())
}

// TestModels checks every catalog model on two worker processes against the
// same model in this process: values and gradients of both levels agree to
// 1e-12 relative.
func TestModels(t *testing.T) {
	srv, err := dist.StartServer(dist.ServerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ws, err := dist.StartWorkers(2, srv.Endpoint(), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	nc, err := dist.Dial(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, tc := range []struct {
		model string
		p     Params
	}{
		{"logistic", Params{Train: 60, Val: 30, Features: 5, Classes: 3, Seed: 1, Bias: true}},
		{"binary-logistic", Params{Train: 60, Val: 30, Features: 5, Seed: 2}},
		{"ridge", Params{Train: 60, Val: 30, Features: 5, Seed: 3}},
		{"mlp", Params{Train: 60, Val: 30, Features: 5, Classes: 3, Seed: 4, Hidden: 4, Bias: true}},
		{"logistic", Params{Data: "fashion-embedded", Train: 60, Val: 20, Float32: true}},
	} {
		t.Run(tc.model+"/"+tc.p.Data, func(t *testing.T) {
			s, err := Settings(tc.model, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			s.Workers, s.Pool, s.JoinTimeout = 2, "catalog", 30*time.Second
			p, err := dist.New(nc, s)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			obj, err := Objective(tc.model, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := graph.Compile(obj)
			if err != nil {
				t.Fatal(err)
			}
			x, y := ref.X0(nil), ref.Y0(nil)
			for i := range y {
				y[i] = 0.1 * math.Sin(float64(i))
			}
			for i := range x {
				x[i] += 0.1 * math.Cos(float64(i))
			}
			near := func(what string, got, want []float64) {
				t.Helper()
				var d, n float64
				for i := range want {
					d, n = math.Max(d, math.Abs(got[i]-want[i])), math.Max(n, math.Abs(want[i]))
				}
				if !(d <= 1e-12*n) {
					t.Errorf("%s: max difference %.3g, max |value| %.3g", what, d, n)
				}
			}
			batch := []int{0, 59, 31, 7, 31}
			near("F", []float64{p.F(x, y, nil)}, []float64{ref.F(x, y, nil)})
			near("G", []float64{p.G(x, y, batch)}, []float64{ref.G(x, y, batch)})
			for _, lv := range []struct {
				name string
				grad func(dx, dy, x, y []float64, b []int)
				ref  func(dx, dy, x, y []float64, b []int)
				b    []int
			}{{"GradF", p.GradF, ref.GradF, nil}, {"GradG", p.GradG, ref.GradG, batch}} {
				gx, gy, rx, ry := make([]float64, len(x)), make([]float64, len(y)), make([]float64, len(x)), make([]float64, len(y))
				lv.grad(gx, gy, x, y, lv.b)
				lv.ref(rx, ry, x, y, lv.b)
				near(lv.name+" x", gx, rx)
				near(lv.name+" y", gy, ry)
			}
			if p.Err() != nil {
				t.Fatal(p.Err())
			}
		})
	}
}

// TestSettingsRefuses checks the errors of Settings.
func TestSettingsRefuses(t *testing.T) {
	for _, tc := range []struct {
		model string
		p     Params
	}{
		{"svm", Params{Train: 1, Val: 1}},
		{"logistic", Params{Train: 0, Val: 1}},
		{"ridge", Params{Data: "fashion-mnist", Train: 1, Val: 1}},
		{"binary-logistic", Params{Train: 1, Val: 1, Classes: 3}},
		{"logistic", Params{Data: "cifar", Train: 1, Val: 1}},
	} {
		if _, err := Settings(tc.model, tc.p); err == nil {
			t.Errorf("Settings(%q, %+v): no error", tc.model, tc.p)
		}
	}
}
