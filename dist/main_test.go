package dist

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/models"
	"github.com/nats-io/nats.go"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The test binary is also the workers' program: TestMain serves as a
// worker when StartWorkers started it, or runs a coordinator for the
// resume test.

// envDieFile names a file whose appearance makes the next worker to
// receive a call kill itself with SIGKILL before computing it: a crash in
// the middle of a call, at a moment the test chooses.
const envDieFile = "DIST_TEST_DIE_FILE"

func TestMain(m *testing.M) {
	if path := os.Getenv(envDieFile); path != "" && os.Getenv(EnvWorker) != "" {
		testHookCall = func() {
			if os.Remove(path) == nil { // only one worker wins the file
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Hour)
			}
		}
	}
	ServeIfWorker()
	if os.Getenv(envCoordinator) != "" {
		if err := runCoordinator(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testParams are the parameters of the test models.
type testParams struct {
	N, NVal, D, C int
	Seed          uint64
	Bias          bool
}

func (p testParams) bytes() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// whole is the shard holding every sample: the single-process problem.
func (p testParams) whole() Shard {
	return Shard{Count: 1, Lower: Range{0, p.N, p.N}, Upper: Range{0, p.NVal, p.NVal}}
}

// rows returns the samples [r.Start, r.End) of the first n (or, with
// offset, of those after them) of the synthetic data of p.
func (p testParams) rows(ds *data.Dataset, offset int, r Range) models.Data {
	lo, hi := offset+r.Start, offset+r.End
	return models.Data{X: ds.X[lo*p.D : hi*p.D], N: r.Len(), D: p.D, Labels: ds.Labels[lo:hi]}
}

func parseTestParams(b []byte) (testParams, *data.Dataset, error) {
	var p testParams
	if err := json.Unmarshal(b, &p); err != nil {
		return p, nil, err
	}
	ds, _ := data.LogisticData(p.N+p.NVal, p.D, &data.LogisticOptions{Classes: p.C}, p.Seed)
	return p, ds, nil
}

func init() {
	// logistic: models.LogisticRegression on synthetic data.
	Register("logistic", func(params []byte, sh Shard) (graph.Objective, error) {
		p, ds, err := parseTestParams(params)
		if err != nil {
			return graph.Objective{}, err
		}
		m, err := models.LogisticRegression(p.rows(ds, 0, sh.Lower), p.rows(ds, p.N, sh.Upper), p.C, models.LogisticSettings{Bias: p.Bias})
		if err != nil {
			return graph.Objective{}, err
		}
		return m.Objective, nil
	})
	// penalized: an upper objective without per-sample data,
	// f = ½‖W − 0.1‖² + ½‖λ‖², over the logistic lower objective with
	// penalty (1/(c·d)) Σ e^{λ_j} W_jk².
	Register("penalized", func(params []byte, sh Shard) (graph.Objective, error) {
		p, ds, err := parseTestParams(params)
		if err != nil {
			return graph.Objective{}, err
		}
		tr := p.rows(ds, 0, sh.Lower)
		g := G.NewGraph()
		lam, w := testInput(g, "lambda", make([]float64, p.D), p.D), testInput(g, "W", make([]float64, p.D*p.C), p.D, p.C)
		x, y := testInput(g, "X", tr.X, tr.N, p.D), testInput(g, "Y", models.OneHot(nil, tr.Labels, p.C), tr.N, p.C)
		ce := G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Mul(x, w)), y))
		pen := G.Must(G.Mul(G.NewConstant(1/float64(p.C*p.D)), G.Must(G.Mul(G.Must(G.Exp(lam)), G.Must(G.Sum(G.Must(G.Square(w)), 1))))))
		half := G.NewConstant(0.5)
		f := G.Must(G.Add(G.Must(G.Mul(half, G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(w, G.NewConstant(0.1))))))))),
			G.Must(G.Mul(half, G.Must(G.Sum(G.Must(G.Square(lam))))))))
		return graph.Objective{Upper: f, Lower: G.Must(G.Add(ce, pen)), Outer: []*G.Node{lam}, Inner: []*G.Node{w},
			LowerData: []*G.Node{x, y}}, nil
	})
	// batchnorm: the logistic model with batch normalization of the
	// logits, which couples the samples of a batch.
	Register("batchnorm", func(params []byte, sh Shard) (graph.Objective, error) {
		return testVariant(params, sh, func(o *graph.Objective, x, y, xv, yv, w *G.Node, c int) {
			g := w.Graph()
			ones, zeros := make([]float64, c), make([]float64, c)
			for i := range ones {
				ones[i] = 1
			}
			gamma, beta := testInput(g, "gamma", ones, c), testInput(g, "beta", zeros, c)
			o.Constants = append(o.Constants, gamma, beta)
			z := G.Must(graph.BatchNorm(G.Must(G.Mul(x, w)), gamma, beta, 1e-5))
			o.Lower = G.Must(G.Add(G.Must(graph.SoftmaxCrossEntropy(z, y)), o.Lower))
		})
	})
	// crosslevel: an upper objective that also reads the training data.
	Register("crosslevel", func(params []byte, sh Shard) (graph.Objective, error) {
		return testVariant(params, sh, func(o *graph.Objective, x, y, xv, yv, w *G.Node, c int) {
			o.Upper = G.Must(G.Add(o.Upper, G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Mul(x, w)), y))))
		})
	})
}

// testVariant builds g = ½‖W‖²·10⁻², f = CE(X'W, Y') with data declared
// on both levels, and lets edit change them.
func testVariant(params []byte, sh Shard, edit func(o *graph.Objective, x, y, xv, yv, w *G.Node, c int)) (graph.Objective, error) {
	p, ds, err := parseTestParams(params)
	if err != nil {
		return graph.Objective{}, err
	}
	tr, va := p.rows(ds, 0, sh.Lower), p.rows(ds, p.N, sh.Upper)
	g := G.NewGraph()
	lam, w := testInput(g, "lambda", make([]float64, p.D), p.D), testInput(g, "W", make([]float64, p.D*p.C), p.D, p.C)
	x, y := testInput(g, "X", tr.X, tr.N, p.D), testInput(g, "Y", models.OneHot(nil, tr.Labels, p.C), tr.N, p.C)
	xv, yv := testInput(g, "Xval", va.X, va.N, p.D), testInput(g, "Yval", models.OneHot(nil, va.Labels, p.C), va.N, p.C)
	pen := G.Must(G.Mul(G.NewConstant(0.01), G.Must(G.Mul(G.Must(G.Exp(lam)), G.Must(G.Sum(G.Must(G.Square(w)), 1))))))
	o := graph.Objective{Lower: pen, Upper: G.Must(graph.SoftmaxCrossEntropy(G.Must(G.Mul(xv, w)), yv)),
		Outer: []*G.Node{lam}, Inner: []*G.Node{w}, LowerData: []*G.Node{x, y}, UpperData: []*G.Node{xv, yv}}
	edit(&o, x, y, xv, yv, w, p.C)
	return o, nil
}

func testInput(g *G.ExprGraph, name string, v []float64, shape ...int) *G.Node {
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64{}, v...)))
	return G.NewTensor(g, G.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
}

// cluster is an embedded server with worker processes of the test binary.
type cluster struct {
	srv  *Server
	ws   *Workers
	nc   *nats.Conn
	pool string
}

// newCluster starts a server and n workers on pool (the test's name),
// with env in the workers' environment; t.Cleanup stops them.
func newCluster(t testing.TB, n int, env ...string) *cluster {
	t.Helper()
	srv, err := StartServer(ServerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	pool := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	ws, err := StartWorkers(n, srv.Endpoint(), pool, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	nc, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &cluster{srv: srv, ws: ws, nc: nc, pool: pool}
}

// problem makes a Problem on the cluster's pool; t.Cleanup closes it.
func (c *cluster) problem(t testing.TB, s Settings) *Problem {
	t.Helper()
	s.Pool = c.pool
	if s.JoinTimeout == 0 {
		s.JoinTimeout = 30 * time.Second
	}
	p, err := New(c.nc, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// envCoordinator makes TestMain run runCoordinator (the resume test).
const envCoordinator = "DIST_TEST_COORDINATOR"
