package optim

import (
	"fmt"
	"math"
)

// Optimizer is an update rule for a variable given a gradient estimate, such
// as x ← x − β ĥ∇Φ(x). It holds only settings; its memory (moments, step
// count) lives in an OptState inside the State so that it is saved with it.
type Optimizer interface {
	// Step overwrites x with its update along −grad, reading and advancing
	// the memory s. grad must not be modified.
	Step(s *OptState, x, grad []float64)
	// Validate reports settings that cannot work, saying what to change.
	Validate() error
}

// OptState is the memory of an Optimizer.
type OptState struct {
	T int64     // number of steps taken
	M []float64 // first moment (SGD: velocity), allocated on the first step
	S []float64 // second moment, allocated on the first step
}

func (s OptState) copyInto(dst *OptState) {
	dst.T = s.T
	dst.M = copyOrNil(dst.M, s.M)
	dst.S = copyOrNil(dst.S, s.S)
}

func copyOrNil(dst, src []float64) []float64 {
	if src == nil {
		return nil
	}
	return append(dst[:0], src...)
}

// SGD is (stochastic) gradient descent, optionally with heavy-ball momentum:
//
//	m ← μ m + grad,   x ← x − LR · m     (μ = Momentum; μ = 0 gives x ← x − LR · grad).
type SGD struct {
	// LR is the step size β. It has no default: 0 is an error, because no
	// value suits every problem (paper 003 searched 10^i, i = −3..3).
	LR float64
	// Momentum is μ in [0, 1); 0 means plain SGD.
	Momentum float64
}

var _ Optimizer = SGD{}

// Step implements Optimizer.
func (o SGD) Step(s *OptState, x, grad []float64) {
	sameLen(x, grad)
	s.T++
	if o.Momentum == 0 {
		for i, g := range grad {
			x[i] -= o.LR * g
		}
		return
	}
	if s.M == nil {
		s.M = make([]float64, len(x))
	}
	for i, g := range grad {
		s.M[i] = o.Momentum*s.M[i] + g
		x[i] -= o.LR * s.M[i]
	}
}

// Validate implements Optimizer.
func (o SGD) Validate() error {
	if !(o.LR > 0) || math.IsInf(o.LR, 1) {
		return fmt.Errorf("SGD.LR = %v: set the outer step size to a finite value > 0", o.LR)
	}
	if !(o.Momentum >= 0 && o.Momentum < 1) {
		return fmt.Errorf("SGD.Momentum = %v: set it in [0, 1) (0 disables momentum)", o.Momentum)
	}
	return nil
}

// Adam is the method of Kingma and Ba (2015):
//
//	m ← β1 m + (1−β1) g,  s ← β2 s + (1−β2) g²,  x ← x − LR · m̂ / (√ŝ + ε)
//
// with m̂ = m/(1−β1ᵗ), ŝ = s/(1−β2ᵗ). Zero fields take the usual defaults:
// LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8.
type Adam struct {
	LR, Beta1, Beta2, Eps float64
}

var _ Optimizer = Adam{}

func (o Adam) withDefaults() Adam {
	if o.LR == 0 {
		o.LR = 1e-3
	}
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	return o
}

// Step implements Optimizer.
func (o Adam) Step(s *OptState, x, grad []float64) {
	sameLen(x, grad)
	o = o.withDefaults()
	if s.M == nil {
		s.M = make([]float64, len(x))
		s.S = make([]float64, len(x))
	}
	s.T++
	c1 := 1 - math.Pow(o.Beta1, float64(s.T))
	c2 := 1 - math.Pow(o.Beta2, float64(s.T))
	for i, g := range grad {
		s.M[i] = o.Beta1*s.M[i] + (1-o.Beta1)*g
		s.S[i] = o.Beta2*s.S[i] + (1-o.Beta2)*g*g
		x[i] -= o.LR * (s.M[i] / c1) / (math.Sqrt(s.S[i]/c2) + o.Eps)
	}
}

// Validate implements Optimizer.
func (o Adam) Validate() error {
	o = o.withDefaults()
	switch {
	case !(o.LR > 0) || math.IsInf(o.LR, 1):
		return fmt.Errorf("Adam.LR = %v: set a finite step size > 0 (0 means 1e-3)", o.LR)
	case !(o.Beta1 > 0 && o.Beta1 < 1):
		return fmt.Errorf("Adam.Beta1 = %v: set it in (0, 1) (0 means 0.9)", o.Beta1)
	case !(o.Beta2 > 0 && o.Beta2 < 1):
		return fmt.Errorf("Adam.Beta2 = %v: set it in (0, 1) (0 means 0.999)", o.Beta2)
	case !(o.Eps > 0) || math.IsInf(o.Eps, 1):
		return fmt.Errorf("Adam.Eps = %v: set a finite value > 0 (0 means 1e-8)", o.Eps)
	}
	return nil
}

// orDefault returns o, or Adam{} (LR 1e-3) when o is nil: the outer
// optimizer of a method whose Outer field is left unset.
func orDefault(o Optimizer) Optimizer {
	if o == nil {
		return Adam{}
	}
	return o
}

func sameLen(x, grad []float64) {
	if len(x) != len(grad) {
		panic(fmt.Sprintf("optim: optimizer step with len(x) = %d, len(grad) = %d", len(x), len(grad)))
	}
}
