// Package implicit computes hypergradients of bilevel problems by implicit
// differentiation (AID).
//
// For min_x Φ(x) = f(x, y*(x)) with y*(x) = argmin_y g(x, y) and g strongly
// convex in y, the implicit function theorem applied to ∇y g(x, y*(x)) = 0
// gives dy*/dx = −[∇yy g]⁻¹ ∇yx g, hence
//
//	∇Φ(x) = ∇x f(x, y*) − ∇x∇y g(x, y*)·v*,   ∇yy g(x, y*)·v* = ∇y f(x, y*)
//
// (Proposition 1 of Ji, Yang and Liang, ICML 2021). AID evaluates this at an
// approximate y ≈ y*(x) and solves the linear system approximately, using
// only Hessian-vector products ∇yy g·v (an Operator) and one mixed product
// ∇x∇y g·v = ∇x⟨∇y g, v⟩, so the Hessian is never formed.
//
// The linear solvers are values behind the Solver interface: CG (AID-CG, the
// AID-BiO default, with warm start and negative-curvature detection), Neumann
// (the truncated series η·Σ_{i=0}^{Q} (I − ηA)^i of stocBiO's Algorithm 3,
// or its randomized truncation, with a Lanczos check of η), FixedPoint
// (AID-FP, v ← v − η((A + ρI)v − b)) and Dense (assembly plus Cholesky, for
// small d_y); Spectral solves with a given dense estimate whose
// eigenvalues it clips. Neumann and FixedPoint are StepSolvers: SolveSteps
// takes a per-step operator source (Operators), so each step can apply an
// independent stochastic estimate of A, a Hessian-vector product on a
// fresh mini-batch, as stocBiO, BSA, AmIGO and the AiPOD family do.
//
// This package is the one place that forms the AID estimate ∇x f − C·v:
// Estimate computes it from a System of three parts (the gradients, the
// solve, the cross term C·v), which a bilevel method supplies with its own
// batches, sources and estimates; Hypergradient is Estimate for an
// oracle.Implicit problem at (x, y) with fixed batches. Lanczos (and
// LargestEigenvalue) is the one estimator of the curvature λmax behind
// default step sizes.
//
// Numerical trouble is an error value: *CurvatureError (pᵀAp ≤ 0 in CG),
// *StepSizeError (η·λmax too large for Neumann), *DivergenceError (growing
// residuals), *BreakdownError (NaN or infinity); errors.Is(err,
// ErrNotPositiveDefinite) matches every error that proves the operator is
// not positive definite. Wrong slice lengths are programmer errors and panic.
// After an error the destination holds the last iterate that passed every
// check, never NaN.
package implicit
