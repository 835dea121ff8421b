package dist

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/graph"
	"github.com/gobilevel/bilevel/optim"
	"github.com/gobilevel/bilevel/oracle"
)

// fedParams are the data of the federated tests: 4 clients holding
// partitions of unequal sizes of the logistic test problem.
var (
	fedParams = testParams{N: 160, NVal: 80, D: 5, C: 3, Seed: 7, Bias: true}
	fedLower  = []int{30, 40, 50, 40}
	fedUpper  = []int{20, 15, 25, 20}
)

func fedSettings(workers int) Settings {
	return Settings{Model: "logistic", Params: fedParams.bytes(), LowerSizes: fedLower, UpperSizes: fedUpper, Workers: workers,
		Threads: runtime.GOMAXPROCS(0), ProbeInterval: 50 * time.Millisecond}
}

// fedLocal builds each client's problem in this process, with the
// constructor the workers run: optim.LocalClients of them is the
// in-process twin of the client processes.
func fedLocal(t testing.TB) optim.FedClients {
	t.Helper()
	var ps []oracle.Problem
	for m := range fedLower {
		ps = append(ps, fedClientProblem(t, m))
	}
	return optim.LocalClients(ps)
}

// fedClientProblem compiles client m's problem.
func fedClientProblem(t testing.TB, m int) *graph.Problem {
	t.Helper()
	lo, up := 0, 0
	for k := range m {
		lo, up = lo+fedLower[k], up+fedUpper[k]
	}
	sh := Shard{Index: m, Count: len(fedLower), Lower: Range{lo, lo + fedLower[m], fedParams.N}, Upper: Range{up, up + fedUpper[m], fedParams.NVal}}
	build, err := lookup("logistic")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := build(fedParams.bytes(), sh)
	if err != nil {
		t.Fatal(err)
	}
	p, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fedMethods are the federated methods on clients c: minibatches, coins,
// the random Neumann term, local steps, a warm medium level and partial
// participation.
func fedMethods(c optim.FedClients) []optim.Method {
	return []optim.Method{
		optim.FedEAiPOD{EAiPOD: optim.EAiPOD{Alpha: 0.2, Beta: 0.5, S: 4, N: 4, Eta: 0.5, P: 0.5, T: 2, InnerBatch: 10, HessianBatch: 10, UpperBatch: 8}, Clients: c},
		optim.FedE2AiPOD{E2AiPOD: optim.E2AiPOD{Alpha: 0.2, Beta: 0.5, S: 3, P: 0.5, Rho: 0.5, Q: 0.5, N: 3, T: 2, WarmStart: true, InnerBatch: 10, HessianBatch: 10, UpperBatch: 8}, Clients: c},
		optim.FedNest{Alpha: 0.1, Beta: 0.5, T: 2, InnerSteps: 3, OuterSteps: 2, N: 4, Eta: 0.5, Fraction: 0.5, InnerBatch: 10, HessianBatch: 10, UpperBatch: 8, Clients: c},
	}
}

// TestFedClients runs every federated method with its 4 clients in 2
// worker processes (3 iterations, then resumed to 5 on the same clients)
// and with the same client problems in this process (optim.LocalClients):
// the runs are the same bit for bit (x, y, oracle calls, rounds), and the
// rounds counted by the algorithm are the rounds of messages the processes
// exchanged — each a request to every participating client and its reply.
func TestFedClients(t *testing.T) {
	c := newCluster(t, 2)
	p := c.problem(t, fedSettings(2))
	if got := p.Clients().Clients(); got != 4 {
		t.Fatalf("%d clients, want 4", got)
	}
	const iters = 5
	procs, local := fedMethods(p.Clients()), fedMethods(fedLocal(t))
	for i := range procs {
		s := &optim.Settings{MaxIter: iters, Seed: uint64(40 + i), EvalEvery: -1}
		before := p.FedTraffic()
		// On the processes in two parts: 3 iterations, then a Resume on
		// the same clients, which still hold the run's state.
		first, err := optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: 3, Seed: s.Seed, EvalEvery: -1}, procs[i])
		if err != nil {
			t.Fatalf("%T on processes: %v", procs[i], err)
		}
		a, err := optim.Resume(p, first.State, s, procs[i])
		if err != nil {
			t.Fatalf("%T on processes, resumed: %v", procs[i], err)
		}
		after := p.FedTraffic()
		b, err := optim.Solve(p, p.X0(nil), p.Y0(nil), s, local[i])
		if err != nil {
			t.Fatalf("%T in process: %v", local[i], err)
		}
		sameBits(t, "x", a.X, b.X)
		sameBits(t, "y", a.Y, b.Y)
		if a.Calls != b.Calls || optim.RoundsOf(a.State) != optim.RoundsOf(b.State) {
			t.Errorf("%T: calls %+v rounds %+v on processes, %+v %+v in process", procs[i], a.Calls, optim.RoundsOf(a.State), b.Calls, optim.RoundsOf(b.State))
		}
		// Messages per round: every client, or FedNest's Fraction ½ of them.
		per := int64(4)
		if _, ok := procs[i].(optim.FedNest); ok {
			per = 2
		}
		r := optim.RoundsOf(a.State)
		for _, l := range []struct {
			level  optim.FedLevel
			rounds int64
			per    int64
		}{
			{optim.FedLower, r.Lower, per}, {optim.FedImplicit, r.Implicit, per}, {optim.FedUpper, r.Upper, per},
			{optim.FedMonitor, map[bool]int64{true: 0, false: iters}[per == 2], 4},
		} {
			d := after[l.level]
			d.Rounds -= before[l.level].Rounds
			d.Requests -= before[l.level].Requests
			d.Replies -= before[l.level].Replies
			if d.Rounds != l.rounds || d.Requests != l.rounds*l.per || d.Replies != l.rounds*l.per {
				t.Errorf("%T, %v: %d rounds, %d requests, %d replies; the algorithm counted %d rounds of %d clients",
					procs[i], l.level, d.Rounds, d.Requests, d.Replies, l.rounds, l.per)
			}
		}
		t.Logf("%T: bit-identical on processes and in process; rounds %+v", procs[i], r)
	}
	tr := p.FedTraffic()
	for l, x := range tr {
		if x.Rounds > 0 {
			t.Logf("%v: %d rounds, %d requests (%d bytes, %d of payload), %d replies (%d bytes, %d of payload)",
				optim.FedLevel(l), x.Rounds, x.Requests, x.BytesOut, x.PayloadOut, x.Replies, x.BytesIn, x.Payload)
		}
	}
}

// TestFedClientKilled kills the process of client 2 between two
// iterations. FedEAiPOD, whose rounds need every client, stops with an
// error naming the client's shard and worker after Settings.JoinTimeout,
// when no worker joins; or, when the process is restarted, because the
// new process holds none of the client's state. FedNest goes on without
// the client, as its partial participation allows, and finishes.
func TestFedClientKilled(t *testing.T) {
	eaipod := optim.EAiPOD{Alpha: 0.2, Beta: 0.5, S: 3, N: 3, Eta: 0.5, P: 0.5, InnerBatch: 10, HessianBatch: 10, UpperBatch: 8}
	for _, tc := range []struct {
		name    string
		restart bool
		nest    bool
		want    []string
	}{
		{"FedEAiPOD client stays away", false, false, []string{"shard 2", "was lost", "JoinTimeout"}},
		{"FedEAiPOD client restarted", true, false, []string{"client 2: the client holds no state of this run"}},
		{"FedNest", false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 4)
			s := fedSettings(4)
			s.JoinTimeout = 30 * time.Second
			p := c.problem(t, s)
			p.s.JoinTimeout = 500 * time.Millisecond // for the lost client, after New
			var m optim.Method = optim.FedEAiPOD{EAiPOD: eaipod, Clients: p.Clients()}
			if tc.nest {
				m = optim.FedNest{Alpha: 0.1, Beta: 0.5, InnerSteps: 2, N: 3, Eta: 0.5, InnerBatch: 10, HessianBatch: 10, UpperBatch: 8, Clients: p.Clients()}
			}
			start := time.Now()
			res, err := optim.Solve(p, p.X0(nil), p.Y0(nil), &optim.Settings{MaxIter: 6, Seed: 5, EvalEvery: -1, Recorder: onIter(func(k int) {
				if k != 1 {
					return
				}
				w := slices.Index(c.ws.Names(), p.shards[2].holders[0].name)
				if err := c.ws.Kill(w); err != nil {
					t.Error(err)
				}
				if tc.restart {
					if err := c.ws.Restart(w); err != nil {
						t.Error(err)
					}
				}
			})}, m)
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the run took %v", d)
			}
			if tc.nest {
				if err != nil || res.Iter != 6 {
					t.Fatalf("FedNest with client 2 killed: %v after %d iterations", err, res.Iter)
				}
				for _, v := range res.X {
					if math.IsNaN(v) {
						t.Fatalf("x = %v", res.X)
					}
				}
				if p.Stats().Skipped == 0 {
					t.Error("no client was left out")
				}
				t.Logf("FedNest finished without client 2: %d parts skipped", p.Stats().Skipped)
				return
			}
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Solve: %v; want a *CallError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Solve: %v; want it to say %q", err, w)
				}
			}
			t.Logf("%v", err)
		})
	}
}

// FuzzDecodeTask: a client's task decodes completely or is an error, never
// a panic, and what decodes encodes to the same bytes; running a decoded
// task on a client is an error or a reply, never a panic.
func FuzzDecodeTask(f *testing.F) {
	for _, t := range []optim.FedTask{
		{Client: 2, State: "fedeaipod", Fresh: true, Steps: []optim.FedStep{{Op: 1, Name: "y", Vec: []float64{1, 2}}, {Op: 3, Name: "y"}}},
		{Client: 0, State: "fednest", Steps: []optim.FedStep{{Op: 18, Batch: []int{0, 3, 3}, A: 0.5, B: -1}}},
		{Client: 1, State: "x", Steps: []optim.FedStep{{Op: 4, Batch: []int{}}}},
	} {
		f.Add(encodeTask(nil, &t))
	}
	p := fedClientProblem(f, 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := decodeTask(data)
		if err != nil {
			return
		}
		if b := encodeTask(nil, task); string(b) != string(data) {
			t.Fatalf("decode then encode changed %x into %x", data, b)
		}
		_, _, _ = optim.NewFedClient(p).Run(task)
	})
}
