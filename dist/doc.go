// Package dist runs the oracles of a bilevel problem on worker processes,
// over NATS, with the samples split between them.
//
// Most objectives are means over samples plus terms that do not depend on
// them: on a batch B of a level,
//
//	f_B(x, y) = (1/|B|) Σ_{i∈B} ℓ_i(x, y) + r(x, y).
//
// Split B between shards by who holds each sample, B = B_1 ∪ … ∪ B_S,
// and f_B = Σ_s (|B_s|/|B|) f_{B_s}: every oracle — value, gradients,
// Hessian-vector and mixed products, dense Hessians — is the
// sample-weighted sum of the shards' oracles on their parts of the batch
// (for the whole data, the weights are the shards' shares n_s/n). A
// Problem computes each part on a worker that holds the shard and adds
// the parts in shard order, so a result depends neither on which worker
// answered nor when: runs are bit-identical to each other, and agree with
// the single-process graph.Problem to rounding (1e-12 relative in the
// tests). An objective that is not of that form — batch statistics such
// as graph.BatchNorm couple the samples of a batch — is refused when the
// workers build it: each compares the value and gradient on a few samples
// with the weighted mean of those on two halves of them.
//
// Graphs are Go code, not data, so a worker is the user's own program in
// worker mode: Register a Constructor (a function building a
// graph.Objective from parameters and a Shard, the ranges of samples to
// hold) under a name, and call ServeIfWorker at the top of main, or Serve.
// dist/cmd/worker is a ready worker for the models of package models.
//
// The coordinator's New finds Settings.Workers workers on a pool (a NATS
// subject prefix), has them build their shards, and returns a *Problem
// with the methods of *graph.Problem that package optim, implicit and
// unroll use: DimX, DimY, NumLower, NumUpper, F, G, GradF, GradG, HVP,
// MixedXY, MixedYX, CheckBatch, HVPAt and Linearize (whose products send
// only the vector once each worker holds the point), HessYY and HessXY.
// So optim.Solve, implicit.Hypergradient and unroll run on it unchanged.
//
// Federated clients. Settings.LowerSizes and UpperSizes split the levels
// into shards of given sizes: the partitions of the clients of a federated
// run, each built by the model's Constructor in one worker and held there
// alone. Problem.Clients returns them as optim.FedClients, so that
// optim.FedEAiPOD, FedE2AiPOD and FedNest run their clients as processes:
// a round sends each participating client its task (the algorithm's steps
// on its own data and state) and gets back what the client sends; the
// worker runs it with optim.FedClient on the shard's problem, so the run
// is that of optim.LocalClients bit for bit. FedTraffic counts the rounds,
// messages and bytes of each level. A client whose worker is lost fails
// the round, naming it (or an optional round of partial participation
// goes on without it); a restarted client that lost its state refuses
// the tasks that read it.
//
// Faults. Every wait has a deadline (Settings). A worker is pinged while
// it owes an answer; a killed one is noticed at the first ping (the server
// reports that nobody listens), and its calls go to another worker
// holding the shard (Settings.Replicas), or to a spare worker, or wait
// for a worker to join (a restarted one) up to Settings.JoinTimeout, and
// then fail with an error naming the shard and the lost worker. Since a
// result does not depend on who computed it, a run with a worker killed
// gives the same bits as one without. A killed coordinator resumes from
// optim's checkpoint with a new Problem: the workers keep what they built.
//
// Errors. The oracles keep the signatures of oracle.Problem, which have no
// error: a call that fails sets Err to a *CallError and returns NaN. The
// problem declares Err among its capabilities (oracle.Capabilities.Err),
// so a solver stops at its non-finite check (with its last finite state
// saved) and returns the *CallError wrapped in its own error, naming the
// iteration and the oracle.
//
// Transport and security. StartServer embeds a NATS server listening on
// 127.0.0.1 only, admitting clients with a random token: nothing to
// install or start on one machine, and StartWorkers starts worker
// processes of the running program on it. Across machines, run
// nats-server and Dial it with an Endpoint: token, user and password,
// nkey or credentials file, TLS. Messages are a versioned binary format
// whose decoder checks every length against the message (fuzzed); a
// malformed or foreign message is refused with an error naming its
// sender, and the largest message is the server's max_payload.
package dist
