// Package tutorial holds the code of docs/tutorial.md, which writes a new
// bilevel model — pseudo-Huber regression with a learned penalty per
// feature — checks its oracles, computes its hypergradient by AID and ITD
// in one call (bilevel.Hypergradient), writes the solution back into the
// gorgonia nodes, and trains it with two solvers.
//
// The code lives in tutorial_test.go as runnable examples whose // Output:
// comments are checked by go test, and TestTutorialInSync requires the Go
// blocks of docs/tutorial.md, put end to end, to be that file line for line
// (blank lines aside), so the tutorial and the code it shows cannot drift
// apart: change one and the test fails until the other follows.
package tutorial
