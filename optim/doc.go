// Package optim runs gradient-based bilevel solvers.
//
// The problem is
//
//	min_x Φ(x) = f(x, y*(x)),   y*(x) = argmin_y g(x, y),
//
// with g strongly convex in y. By the implicit function theorem
// (paper 003, Proposition 1) the hypergradient is
//
//	∇Φ(x) = ∇x f(x, y*) − ∇xy g(x, y*) v*,   where   ∇yy g(x, y*) v* = ∇y f(x, y*).
//
// Every solver here approximates the three ingredients of that formula: an
// inner iterate y ≈ y*(x), a linear-system variable v ≈ v*, and the
// hypergradient estimate built from them, which moves x by an outer
// optimizer (SGD or Adam) followed by an optional projection.
//
// A solver is a Method: a value holding only settings, whose zero value is a
// documented default, with Init and Iterate acting on an explicit State. The
// State holds everything that carries over from one outer iteration to the
// next (x, y, v, named buffers, optimizer moments, sampler positions, the
// random stream and the oracle counters) and encodes to bytes with
// MarshalBinary, so a run stopped after k iterations and resumed from the
// decoded State with Resume gives bit for bit the same iterates as an
// uninterrupted run.
//
// Solve and Resume drive a Method: they count every oracle call through a
// wrapper of the Problem (the counts are in State.Calls and in each Record),
// check after every iteration that oracle outputs and x, y, v are finite,
// stop on an iteration, time, hypergradient-norm or objective-change limit,
// and pass one Record per iteration to a Recorder (MemoryRecorder,
// CSVRecorder).
//
// The methods, each citing its paper, algorithm and equations
// (docs/solvers.md has the table of oracle counts):
//   - paper 003 (Ji, Yang, Liang 2021): AIDBiO, ITDBiO, StocBiO;
//   - paper 000 (Chen, Sun, Xiao, Yin 2022): STABLE, and the labelled
//     approximation STABLEMatrixFree for large d_y;
//   - paper 001 (Huang 2023): MGBiO, MSGBiO, VRMSGBiO;
//   - paper 002 (Dong, Yang, Yao, Zhang 2025): NBOGD, NSBOSGD;
//   - paper 004 (Xiao, Shen, Yin, Chen): AiPOD, EAiPOD, E2AiPOD with
//     equality constraints on both levels, and the federated FedEAiPOD,
//     FedE2AiPOD with their baseline FedNest (Tarzanagh et al. 2022),
//     written against FedClients: clients simulated on the problem's
//     data (Federation), in this process (LocalClients) or in processes
//     of their own (package dist);
//   - baselines: SOBA, AmIGO, BSA, TTSA, and the fully first-order F2SA
//     (Kwon et al. 2023) and BOME (Liu et al. 2022), which need only ∇f
//     and ∇g.
//
// Every AID- or ITD-based method is a composition: an inner loop on y
// (unroll.Descend), a hypergradient estimate — implicit.Estimate, whose
// parts draw the method's batches and whose solve is one of package
// implicit's solvers (CG, Neumann with per-step batches or randomized
// truncation, FixedPoint, Spectral for dense estimates), or unroll's
// reverse sweep — and an outer optimizer (SGD, Adam) on x. No method
// writes the formula ∇x f − ∇xy g·v itself. F2SA and BOME replace the
// implicit term by the value-function gap g(x, y) − min_z g(x, z), whose
// gradient in x is ∇x g at the two points (Danskin): their inner loops are
// unroll.Descend on g (and, for F2SA, on the penalty f + λg), and their
// default steps come from gradient differences, so they call no HVP.
//
// Problems are oracle.Problem values. Optional oracles are declared in
// oracle.Capabilities: methods that need explicit matrices (STABLE, the
// MGBiO family) use the problem's HessYY and HessXY when it declares them
// and assemble them from products otherwise; CG uses the linearized HVPAt
// where it is declared; every method checks its batch sizes with
// CheckBatch. See Method for how to add another method.
//
// Conventions follow gonum: vectors are flat []float64, the destination comes
// first, a wrongly sized destination is a programmer error and panics, and
// problems with the data or the numbers are returned as errors.
package optim
