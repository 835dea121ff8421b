// Package models builds the objectives of standard bilevel problems as
// gorgonia expression graphs: each constructor writes the upper objective
// f(x, y) and the lower objective g(x, y) on a new graph and returns them as
// a graph.Objective, ready for graph.Compile, which derives the oracles. A
// model is an objective, not a training loop; where y*(x), Φ(x) = f(x, y*(x))
// and ∇Φ(x) have closed forms, the model also provides them, for tests and
// for measuring solvers. Data are plain arrays (see Data); a model keeps
// references to its caller's feature and target arrays, which must not be
// modified while the model is in use.
//
// Every objective averages over its samples with gorgonia.Mean, so an oracle
// evaluated on a minibatch of the lower (upper) data is an unbiased estimate
// of the full-data one. CE(Z, Y) below is the mean over rows of the softmax
// cross-entropy of logits Z with one-hot labels Y, ψ(t) = log(1 + e^{−t}) is
// the logistic loss and σ the sigmoid.
//
// Quadratic: x ∈ R^m, y ∈ R^n,
//
//	g(x, y) = ½ yᵀAy − yᵀBx + cᵀy,  f(x, y) = ½‖y − b‖² + ½ρ‖x‖²,
//
// A symmetric positive definite with eigenvalues in [μ, L]. Then
// y*(x) = A⁻¹(Bx − c), ∇Φ(x) = BᵀA⁻¹(y*(x) − b) + ρx, and x* solves
// (MᵀM + ρI) x = Mᵀ(A⁻¹c + b) with M = A⁻¹B. The stochastic version
// averages per-sample terms, g = mean_i ½ yᵀA_i y − yᵀB_i x + c_iᵀy and
// f = mean_j ½‖y − b_j‖² + ½ρ‖x‖², whose means are A, B, c and b.
//
// RidgeRegression: x = λ ∈ R^d, y = w ∈ R^d,
//
//	g(λ, w) = ½ mean_i (x_iᵀw − t_i)² + ½ Σ_j e^{λ_j} w_j²,
//	f(λ, w) = ½ mean_val (x_iᵀw − t_i)²,
//
// so w*(λ) = H⁻¹Xᵀt/n with H = XᵀX/n + diag(e^λ), and
// ∇Φ(λ) = −e^λ ⊙ w* ⊙ H⁻¹∇_w f(w*).
//
// LogisticRegression (paper 003, App. B): x = λ ∈ R^d, y = W ∈ R^{d×c},
//
//	g(λ, W) = CE(XW, Y) + (1/(c·d)) Σ_jk e^{λ_j} W_jk²,  f(λ, W) = CE(X'W, Y').
//
// BinaryLogisticRegression (paper 002, §4.1): x = λ ∈ R^d, y = w ∈ R^d,
// labels s_i = ±1,
//
//	g(λ, w) = mean_i ψ(s_i x_iᵀw) + ½ Σ_j e^{λ_j} w_j²,  f(λ, w) = mean_val ψ(s_i x_iᵀw),
//
// or, with LinearPenalty, the penalty Σ_j λ_j w_j² of paper 000, eq. (32).
//
// HyperCleaning (paper 003, App. B): x = λ ∈ R^n (a weight per training
// sample), y = W ∈ R^{d×c},
//
//	g(λ, W) = mean_i σ(λ_i) CE(x_iᵀW, y_i) + C_r ‖W‖²,  f(λ, W) = CE(X'W, Y').
//
// MLP, a hyper-representation problem: x = (W1, b1) the first layer,
// y = (W2, b2) the last, h(X) = a(XW1 + b1) with a = tanh or ReLU,
//
//	g = CE(h(X)W2 + b2, Y) + ½μ(‖W2‖² + ‖b2‖²),  f = CE(h(X')W2 + b2, Y').
package models

import (
	// gorgonia.org/tensor imports this package; importing it here too
	// keeps the module's requirement on its newest version, the first that
	// does not refuse to start on Go releases newer than it knows.
	_ "go4.org/unsafe/assume-no-moving-gc"
)
