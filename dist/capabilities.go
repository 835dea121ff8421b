package dist

import "github.com/gobilevel/bilevel/oracle"

// Capabilities declares p's optional oracles (oracle.Capabilities), the
// same as graph.Problem's: the linearized Hessian operator HVPAt (only v
// travels once the workers hold the point), the dense matrices HessYY and
// HessXY, and the batch-size check CheckBatch; and Err, the *CallError
// that stopped the problem, which a solver stopping at the NaN of a failed
// call returns wrapped in its own error. A *Problem therefore implements
// oracle.Problem, and every solver runs on it unchanged.
func (p *Problem) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HVPAt: p.HVPAt, HessYY: p.HessYY, HessXY: p.HessXY, CheckBatch: p.CheckBatch, Err: p.Err}
}

var _ oracle.Problem = (*Problem)(nil)
