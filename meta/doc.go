// Package meta trains a shared embedding for few-shot classification as a
// bilevel problem, with the meta-gradients of paper 003 (Ji, Yang, Liang
// 2021, §5 and App. A): ITD-BiO, AID-BiO with constant or increasing inner
// steps, and the ANIL and MAML baselines (MAML also first-order, FOMAML),
// plus the training and evaluation loops around them.
//
// Each task i has a support set S_i and a query set Q_i of N-way K-shot
// classification. The outer variable φ is the backbone of models.CNN, the
// inner variable w = (W, b) a linear head per task:
//
//	min over φ of Φ(φ) = (1/B) Σ_i f_i(φ, w_i*(φ)),   w_i*(φ) = argmin_w g_i(φ, w),
//	g_i = CE on S_i + (λ/2)‖w‖²,   f_i = CE on Q_i,
//
// averaged over a batch of B tasks per meta-iteration and optimized by
// Adam. The meta-gradient of one task, with y_t the head after t steps
// y_{t+1} = y_t − α∇w g_i(φ, y_t) from y_0 = 0:
//
//   - ITD-BiO differentiates f_i(φ, y_T(φ)) through the T steps by a
//     reverse sweep over the stored heads: a_T = ∇w f,
//     d = ∇φ f − α Σ_t ∇φ∇w g(y_t)·a_{t+1}, a_t = a_{t+1} − α∇ww g(y_t)·a_{t+1}
//     (paper 003, Prop. 2);
//   - AID-BiO solves ∇ww g(y_D)·v = ∇w f(y_D) by N steps of CG and returns
//     ∇φ f − ∇φ∇w g(y_D)·v (eq. 3), with D constant or, for the increasing
//     variant, D_k = ⌈c(k+1)^{1/4}⌉ at meta-iteration k;
//   - ANIL (Raghu et al. 2020) learns the head's initialization w_0 as well:
//     the head is adapted by T steps of gradient descent on the support
//     cross-entropy alone (λ = 0) from w_0, and the meta-gradient flows
//     through the steps. Full ANIL (the default) is the ITD sweep above,
//     whose last adjoint a_0 is the gradient for w_0; first-order ANIL
//     (Settings.FirstOrder) takes ∇φ f and ∇w f at y_T;
//   - MAML (Finn et al. 2017) learns the initialization θ_0 = (φ, w_0) of
//     the whole network and adapts all of it: T steps
//     θ_{t+1} = θ_t − α∇L_S(θ_t) on the support cross-entropy, and the
//     meta-gradient d L_Q(θ_T)/dθ_0 through the steps, second order in
//     the whole CNN. Its problem is models.CNNInit: x = θ_0, y = δ, the
//     network evaluated at θ_0 + δ, so that the inner loop runs δ from 0
//     and ∇xy g = ∇yy g. The meta-gradient is then the sweep's first
//     adjoint a_0 (Backward's dy0), and the sweep, which sees an empty
//     outer point, computes no mixed products: T HVPs through the whole
//     network instead of T HVPs and T equal mixed products. FOMAML
//     (Settings.FirstOrder) takes ∇L_Q(θ_T).
//
// AID-BiO's meta-gradient is that of the inner solution y*(φ) evaluated at
// y_D: it is right only while the inner loop converges, and ‖y_D − y*‖ is
// at most ‖∇w g(y_D)‖/λ. Gradient descent of step α on the head converges
// while α < 2/L, L the head loss's largest curvature, which grows with the
// features' scale as φ trains; past it y_D is far from y* and AID's
// meta-gradient points the wrong way, while ITD's stays the gradient of the
// loop it ran. StepStats.InnerRatio (the worst task's ‖∇w g(y_T)‖ over
// ‖∇w g(y_0)‖) and StepStats.CGResidual watch for both conditions; an
// AID-BiO run at 5-way 5-shot collapsed after its ratio reached 1
// (docs/metalearning.md).
//
// Settings.Gradient selects the meta-gradient. The package writes none of
// these formulas itself: the sweep is unroll.Unroller (its Backward returns
// a_0 for ANIL and MAML), AID's estimate is implicit.Estimate with
// implicit.CG, and the inner loops are unroll.Descend, all on the task's
// oracles at a fixed outer point (graph.FixedX).
//
// The second-order products involve only the head, but ∇φ∇w g·v and ∇φ f
// back-propagate through the whole CNN. Two computations are offered
// (Settings.Backprop): Direct evaluates the oracles of models.CNN at a
// fixed φ (graph.Problem.FixX), so the backbone's forward pass is computed
// once per task and each mixed product back-propagates through the CNN;
// Features (the default) applies the chain rule at the features
// F = h_φ(X): the sweeps run on models.CNNHead with F as the outer
// variable, and the resulting adjoint of F is pulled back through the
// backbone once per image set by models.CNNEmbedding. Both give the same
// meta-gradient to rounding (see the tests); Features runs the backbone
// once forward and once backward per set whatever T, as reverse-mode
// frameworks do by accumulating the features' adjoint, while Direct pays
// one backward pass per inner step for ITD and ANIL. MAML has no fixed
// features — its inner steps change the backbone — and always
// differentiates through the whole CNN: per task, T forward and backward
// passes of the support set, T HVPs through the network, one forward and
// backward pass of the query set.
//
// Batch normalization is in training mode on each image set (support,
// query), at meta-training and at meta-test time alike. Evaluation adapts
// to each test task by the method's own inner loop (a head by T steps from
// 0, or from w_0 for ANIL; the whole network from θ_0 for MAML) and
// reports the query accuracy, averaged over tasks, with a 95% confidence
// interval 1.96·sd/√n.
//
// Pretrainer trains the backbone by plain classification of the rotated
// meta-train classes, the reference baseline with a head fit per test
// task on top of it; the random-backbone baseline evaluates φ at
// initialization.
//
// Tasks are drawn by Tasks, which regenerates task i from (Seed, i) alone:
// a run resumed from a checkpoint at iteration k draws the same tasks as
// an uninterrupted one. Learner and Pretrainer keep their state (iteration,
// parameters, Adam moments) in a Snapshot, which WriteCheckpoint saves
// atomically with a checksum.
package meta
