package optim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gobilevel/bilevel/oracle"
)

// clientProblems returns the quadratic restricted to each client's shards
// of f, as problems of their own: the samples of client m in shard order,
// so that their whole-data oracles add the samples in the order the
// Federation's views do.
func clientProblems(p *quadratic, f *Federation) []oracle.Problem {
	pick := func(v [][]float64, idx []int) [][]float64 {
		out := make([][]float64, len(idx))
		for k, i := range idx {
			out[k] = v[i]
		}
		return out
	}
	ps := make([]oracle.Problem, f.Clients())
	for m := range ps {
		q := *p
		q.as, q.bs, q.cs = pick(p.as, f.Lower[m]), pick(p.bs, f.Lower[m]), pick(p.cs, f.Upper[m])
		ps[m] = &q
	}
	return ps
}

// fedCases are runs of every federated method that exercise minibatches,
// coins, both Neumann estimators, warm and cold medium levels, local steps
// and partial participation; with clients set by the caller.
func fedCases(c FedClients) []Method {
	return []Method{
		FedEAiPOD{EAiPOD: EAiPOD{Alpha: 0.05, Beta: 0.4, S: 3, N: 5, Eta: 0.4, P: 0.3, T: 2, Delta: 1.5, InnerBatch: 8, HessianBatch: 8, UpperBatch: 6}, Clients: c},
		FedE2AiPOD{E2AiPOD: E2AiPOD{Alpha: 0.05, Beta: 0.4, S: 3, P: 0.3, Rho: 0.4, Q: 0.5, N: 5, T: 2, InnerBatch: 8, HessianBatch: 8, UpperBatch: 6}, Clients: c},
		FedE2AiPOD{E2AiPOD: E2AiPOD{Alpha: 0.05, Beta: 0.4, S: 3, P: 0.5, Rho: 0.4, Q: 0.5, N: 4, T: 3, WarmStart: true}, Clients: c},
		FedNest{Alpha: 0.02, Beta: 0.4, T: 2, InnerSteps: 3, OuterSteps: 2, N: 5, Eta: 0.4, Series: NeumannPartialSum, Fraction: 0.5, InnerBatch: 8, HessianBatch: 8, UpperBatch: 6, Clients: c},
	}
}

// TestLocalClientsAreFederation: the clients as problems of their own that
// keep their own state (LocalClients, the in-process twin of client
// processes) give the runs of the simulated Federation bit for bit: x, y,
// the oracle calls and the rounds, for every federated method — also when
// the run stops after 7 iterations and resumes on the same clients, which
// still hold its state. Once the clients have served another run, resuming
// the first fails with ErrFedStale (FedNest's clients keep nothing
// between calls, so its run resumes).
func TestLocalClientsAreFederation(t *testing.T) {
	p := stochasticProblem(t)
	f := nonIID(t, p)
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	sim, local := fedCases(f), fedCases(LocalClients(clientProblems(p, f)))
	for i := range sim {
		s := &Settings{MaxIter: 12, Seed: uint64(30 + i), EvalEvery: -1}
		a, err := Solve(p, x0, y0, s, sim[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := Solve(p, x0, y0, &Settings{MaxIter: 7, Seed: s.Seed, EvalEvery: -1}, local[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Resume(p, b.State, s, local[i]); err != nil {
			t.Fatalf("%T: Resume on the same LocalClients: %v", local[i], err)
		}
		if c := b.State; !sameBits(a.X, c.X) || !sameBits(a.Y, c.Y) || a.Calls != c.Calls || RoundsOf(a.State) != RoundsOf(c) {
			t.Errorf("%T: Federation x = %v, y = %v, calls %+v, rounds %+v; LocalClients %v, %v, %+v, %+v",
				sim[i], a.X, a.Y, a.Calls, RoundsOf(a.State), c.X, c.Y, c.Calls, RoundsOf(c))
		}
		old := b.State.Clone()
		if _, err := Solve(p, x0, y0, &Settings{MaxIter: 2, Seed: 99, EvalEvery: -1}, local[i]); err != nil {
			t.Fatal(err)
		}
		_, err = Resume(p, old, &Settings{MaxIter: 14, EvalEvery: -1}, local[i])
		if _, stateless := local[i].(FedNest); stateless != (err == nil) || err != nil && !errors.Is(err, ErrFedStale) {
			t.Errorf("%T: Resume after another run on the clients: %v; want ErrFedStale unless the clients keep nothing between calls (FedNest)", local[i], err)
		}
	}
}

// absent are clients of which some never answer: Round fails naming the
// first of them, or, in an optional round, leaves them out.
type absent struct {
	FedClients
	away map[int]bool
	seen int
}

func (a *absent) Round(r *FedRound) error {
	var asked []FedTask
	var where []int
	for j, t := range r.Tasks {
		if a.away[t.Client] {
			if !r.Optional {
				return fmt.Errorf("client %d did not answer", t.Client)
			}
			a.seen++
			continue
		}
		asked, where = append(asked, t), append(where, j)
	}
	sub := &FedRound{Level: r.Level, Tasks: asked, p: r.p, st: r.st}
	if err := a.FedClients.Round(sub); err != nil {
		return err
	}
	r.Replies, r.Calls = make([][]float64, len(r.Tasks)), sub.Calls
	for k, j := range where {
		r.Replies[j] = sub.Replies[k]
	}
	return nil
}

// TestFedClientAway: a client that never answers stops FedEAiPOD and
// FedE2AiPOD (whose rounds need every client) with an error naming it, and
// FedNest goes on without it, as its averages over the participants
// allow: its run (whole data, every client asked) equals FedNest on the
// other clients alone, bit for bit; when no participant answers, it stops
// with an error.
func TestFedClientAway(t *testing.T) {
	p := stochasticProblem(t)
	f := nonIID(t, p)
	ps := clientProblems(p, f)
	x0, y0 := []float64{0.1, 0.2, 0.3}, []float64{1, 0, -1, 0, 1}
	s := &Settings{MaxIter: 5, Seed: 3, EvalEvery: -1}
	for _, m := range fedCases(&absent{FedClients: LocalClients(ps), away: map[int]bool{2: true}})[:3] {
		_, err := Solve(p, x0, y0, s, m)
		if err == nil || !strings.Contains(err.Error(), "client 2") {
			t.Errorf("%T with client 2 away: %v, want an error naming client 2", m, err)
		}
	}
	away := &absent{FedClients: LocalClients(ps), away: map[int]bool{2: true}}
	fn := FedNest{Alpha: 0.02, Beta: 0.4, InnerSteps: 3, OuterSteps: 2, N: 5, Eta: 0.4, Series: NeumannPartialSum, Clients: away}
	a, err := Solve(p, x0, y0, s, fn)
	if err != nil {
		t.Fatalf("FedNest with client 2 away: %v", err)
	}
	if away.seen == 0 {
		t.Error("FedNest never asked client 2")
	}
	three := &Federation{Lower: [][]int{f.Lower[0], f.Lower[1], f.Lower[3]}, Upper: [][]int{f.Upper[0], f.Upper[1], f.Upper[3]}}
	fn.Clients = LocalClients(clientProblems(p, three))
	b, err := Solve(p, x0, y0, s, fn)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(a.X, b.X) || !sameBits(a.Y, b.Y) || RoundsOf(a.State) != RoundsOf(b.State) {
		t.Errorf("FedNest with client 2 away: x = %v, y = %v, rounds %+v; on the three others: %v, %v, %+v", a.X, a.Y, RoundsOf(a.State), b.X, b.Y, RoundsOf(b.State))
	}
	fn.Clients = &absent{FedClients: LocalClients(ps), away: map[int]bool{0: true, 1: true, 2: true, 3: true}}
	if _, err := Solve(p, x0, y0, s, fn); err == nil || !strings.Contains(err.Error(), "no client answered") {
		t.Errorf("FedNest with every client away: %v, want an error", err)
	}
}

// TestFedClientRefuses: a task that does not fit the client is an error
// naming the client and the step, never a panic.
func TestFedClientRefuses(t *testing.T) {
	p := stochasticProblem(t)
	c := NewFedClient(p)
	for _, task := range []FedTask{
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: 0}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedOps}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedGradGY, Batch: []int{200}}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedGradF, Batch: []int{-1}}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedGradGY, Batch: []int{}}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedSet, Name: "y", Vec: []float64{1}}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedSet, Name: "r", Vec: make([]float64, 5)}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedSend, Name: "nothing"}}},
		{Client: 1, Fresh: true, Steps: []FedStep{send("y"), {Op: fedHVP, Vec: make([]float64, 4)}}},
		{Client: 1, Fresh: true, Steps: []FedStep{{Op: fedMediumHat, Name: "x"}}},
	} {
		_, _, err := c.Run(&task)
		if err == nil || !strings.Contains(err.Error(), "client 1, step") {
			t.Errorf("%+v: %v, want an error naming client 1 and the step", task.Steps, err)
		}
	}
	// A task that reads state the client does not hold is ErrFedStale.
	if _, _, err := NewFedClient(p).Run(&FedTask{Client: 1, Run: 7, Steps: []FedStep{send("y")}}); !errors.Is(err, ErrFedStale) {
		t.Errorf("a task of a run the client never saw: %v, want ErrFedStale", err)
	}
	// A panic of an oracle is an error too.
	c = NewFedClient(panicky{p})
	if _, _, err := c.Run(&FedTask{Client: 3, Fresh: true, Steps: []FedStep{{Op: fedGradGY}}}); err == nil || !strings.Contains(err.Error(), "client 3") {
		t.Errorf("a panicking oracle: %v", err)
	}
}

type panicky struct{ *quadratic }

func (panicky) GradG(_, _, _, _ []float64, _ []int) { panic("kernel fault") }
