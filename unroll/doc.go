// Package unroll computes hypergradients of bilevel problems by iterative
// differentiation (ITD): it differentiates the upper objective through a
// fixed number of steps of the inner optimizer.
//
// For min_x Φ(x) = f(x, y*(x)), ITD replaces y*(x) by the output y_T(x) of
// T inner steps from a fixed y_0 and returns d f(x, y_T(x))/dx, computed in
// reverse mode from the stored iterates y_0, …, y_T with one Hessian-vector
// product ∇yy g·a and one mixed product ∇x∇y g·a = ∇x⟨∇y g, a⟩ per step, so
// the memory is (T+1)·d_y floats and no computation graph grows with T.
//
// The inner optimizer is heavy-ball momentum, with gradient descent as the
// case β = 0:
//
//	y_{t+1} = y_t − α·∇y g(x, y_t) + β·(y_t − y_{t−1}),   y_{−1} = y_0.
//
// Adjoint recursion. Let a_t = ∂f(x, y_T)/∂y_t be the total derivative with
// respect to the iterate y_t, all later iterates being functions of it. The
// iterate y_t enters y_{t+1} through (1+β)I − α∇yy g(x, y_t) and y_{t+2}
// through −βI, and nothing else, so with a_T = ∇y f(x, y_T) and a_{T+1} = 0
//
//	a_t = (1+β)·a_{t+1} − α·∇yy g(x, y_t)·a_{t+1} − β·a_{t+2},   t = T−1, …, 1.
//
// The parameter x enters step t only through −α∇y g(x, y_t), whose
// transposed Jacobian with respect to x is −α∇x∇y g(x, y_t), hence
//
//	d f(x, y_T)/dx = ∇x f(x, y_T) − α·Σ_{t=0}^{T−1} ∇x∇y g(x, y_t)·a_{t+1}.
//
// y_0 does not depend on x, so a_0 is formed only on request (Backward's
// dy0: the gradient with respect to the initial iterate, which ANIL learns,
// at one more HVP; with y_{−1} = y_0 it is a_0 = (I − α∇yy g)·a_1 − β·a_2):
// the sweep costs T mixed products and T−1 HVPs. With β = 0 the recursion is a_t = (I − α∇yy g)a_{t+1}
// and the sum is Proposition 2 of Ji, Yang and Liang (ICML 2021),
// ∇x f − α·Σ_t ∇x∇y g(y_t)·Π_{j=t+1}^{T−1}(I − α∇yy g(y_j))·∇y f(y_T).
//
// Truncated back-propagation (Shaban et al., 2019) keeps only the last K
// terms of the sum (t ≥ T−K), treating y_{T−K} as independent of x; it
// needs only the last K+1 iterates, which is all the Unroller stores. For
// strongly convex g with α ≤ 1/L the ITD error with respect to ∇Φ decays
// like (1 − αμ)^T, μ the strong convexity constant of g.
//
// Shared representation. When part of g depends on x and the data but not
// on y (a representation layer h(x) under a head y), every mixed product
// goes back through it: ∇x∇y g(x, y_t)·a = J_h(x)ᵀ·∂_h⟨∇y g(h, y_t), a⟩.
// The sum over the steps of one batch is therefore J_hᵀ applied once to
// the sum of the adjoints at h. A problem that declares oracles at a fixed
// outer point (oracle.Capabilities.FixX, which graph.Problem declares)
// gets that: Forward evaluates a run of steps on one batch at fixed x, so
// h(x) is computed once, and Backward adds the run's mixed products at h
// and pulls them back once; the result equals the per-step sum up to
// rounding. Steps whose batch differs from both neighbours' take the
// per-step oracles.
//
// Descend is the same inner loop without storage, in place: the inner loop
// of the AID methods (packages optim and meta), which need only y_T. The
// oracles are package oracle's interfaces (LowerGradient for the forward
// pass, Unrolled for the sweep).
package unroll
