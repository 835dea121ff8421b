package catalog_test

import (
	"fmt"
	"log"

	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/dist/catalog"
	"github.com/gobilevel/bilevel/optim"
)

// A bilevel problem on two worker processes of this program, on one
// machine: an embedded NATS server, workers started from the running
// program (whose main, here TestMain, calls dist.ServeIfWorker), and
// AID-BiO running on the distributed problem as on a graph.Problem.
func Example() {
	srv, err := dist.StartServer(dist.ServerSettings{}) // 127.0.0.1, a random port and token
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	workers, err := dist.StartWorkers(2, srv.Endpoint(), "example")
	if err != nil {
		log.Fatal(err)
	}
	defer workers.Close()
	nc, err := srv.Dial() // in process, no socket
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	s, err := catalog.Settings("logistic", catalog.Params{Train: 400, Val: 100, Features: 10, Classes: 3, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	s.Workers, s.Pool = 2, "example" // one shard of 200 training and 50 validation samples each
	p, err := dist.New(nc, s)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	res, err := optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: 20, EvalEvery: -1},
		optim.AIDBiO{Alpha: 0.5, D: 20, N: 10, Outer: optim.SGD{LR: 1}})
	if err != nil {
		log.Fatal(err, p.Err())
	}
	fmt.Printf("f: %.4f → %.4f after %d iterations on %d workers\n", p.F(p.X0(nil), p.Y0(nil), nil), p.F(res.X, res.Y, nil), res.Iter, s.Workers)
	// Output:
	// f: 1.0986 → 0.6136 after 20 iterations on 2 workers
}
