// Package graph turns bilevel objectives written as gorgonia expressions
// into verified first- and second-order oracles.
//
// A bilevel problem is min over x of Φ(x) = f(x, y*(x)) with
// y*(x) = argmin over y of g(x, y). Every gradient method for it needs the
// gradients ∇x f, ∇y f, ∇y g (and ∇x g), the Hessian-vector product
// ∇yy g·v and the mixed products ∇xy g·v = ∇x⟨∇y g, v⟩ and
// ∇yx g·u = ∇y⟨∇x g, u⟩: reverse-mode differentiation applied twice
// (reverse over reverse) to the scalar ⟨∇y g, v⟩.
//
// Compile reads the user's gorgonia graph once, checks every declaration
// (each input node an objective reads is a variable, data or a declared
// constant; data are finite and not empty) and every operation against
// its table of operations (Supported; a refused operation's error says
// what to write instead), all before anything runs, and translates the
// graph into its own intermediate representation, each operation defined
// once in that table with its shape rule, kernel and derivative. It then
// proves the translation: it evaluates each objective with gorgonia's own
// forward machine on a copy of its graph (at the declared values, on the
// first samples of large data) and compares the value of every node with
// its own; a difference beyond rounding is an error naming the node.
//
// Derivatives are built by a pure pass over the intermediate
// representation: it keeps the adjoints in a map of its own and returns
// new expressions, so a derivative of a derivative is simply another pass.
// gorgonia's own Grad is not used, because its per-node derivative cache
// makes a second Grad silently wrong. The oracles are compiled once per
// batch size into programs whose buffers are allocated at compile time,
// and run from the caller's goroutine with the caller's vectors bound in
// place (large operations split their rows across cores). Linearize fixes
// (x, y) and a batch so that many Hessian-vector products reuse the
// forward and first backward passes.
//
// gorgonia's Dropout and random nodes are drawn as a deterministic
// function of Objective.RandomSeed, the node and the batch's samples, so
// that all oracles of one batch see the same numbers; SetTraining(false)
// evaluates without them, as gorgonia's EvalMode does.
//
// Graphs are written in float64, and the programs compute in float64 by
// default. Objective.Float32Data holds the data in float32 instead: the
// products that read them stream half the bytes, and the arithmetic stays
// float64, so the oracles are those of the problem whose data are the
// rounded values, to the last few bits. Objective.Float32 computes in
// float32 end to end — values, adjoints and second-order products by
// float32 kernels (long sums accumulated in float64) — while the
// Problem's vectors stay float64; Compile checks every node's float32
// value against gorgonia's forward pass, and Check compares every float32
// oracle with the same objective computed in float64.
//
// Check compares every oracle with central finite differences and every
// node with gorgonia's forward pass; the tests of this package run it over
// every supported operation.
package graph
