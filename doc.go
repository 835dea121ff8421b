// Package bilevel is the one call from a compiled bilevel problem to its
// hypergradient: Hypergradient(p, x, nil) solves the lower level at x to a
// stated tolerance and differentiates through it.
//
// For
//
//	min_x Φ(x) = f(x, y*(x)),   y*(x) = argmin_y g(x, y),
//
// with g strongly convex in y, the implicit function theorem gives
//
//	∇Φ(x) = ∇x f(x, y*) − ∇xy g(x, y*)·v,   ∇yy g(x, y*)·v = ∇y f(x, y*).
//
// Hypergradient finds y* with ‖∇y g(x, y*)‖₂ ≤ Settings.Tol by
// gonum/optimize's Minimize — Newton-CG on the problem's Hessian-vector
// products by default, or L-BFGS — and then computes ∇Φ(x) by AID
// (implicit.Estimate with CG to a relative residual Settings.LinearTol)
// or by ITD (unroll.Unroller through the gradient-descent iterations from
// Settings.Y0 that reach the same tolerance, with the step 1/λ̂ from a
// Lanczos estimate λ̂ of the largest eigenvalue of ∇yy g). SolveLower is
// the inner solve alone, and Curvature that estimate of the curvature of g,
// for the fixed inner steps of optim's solvers.
//
// The problem is any oracle.Problem; a *graph.Problem, compiled from
// gorgonia graphs, is one, and (*graph.Problem).WriteBack puts x and
// y*(x) back into the user's gorgonia nodes. The solvers of package optim
// run whole bilevel optimizations; this package computes one
// hypergradient at one x, exactly as far as its tolerances say.
//
// Nothing fails silently. Invalid input is an error before any oracle
// call; a solve that stops above its tolerance is a *ToleranceError
// saying which solve, after how many iterations, and how far from the
// tolerance it stopped; and the typed errors of the hypergradient core
// (*implicit.CurvatureError when ∇yy g is not positive definite at y*,
// *unroll.NonFiniteError) are kept, for errors.As to find.
package bilevel
