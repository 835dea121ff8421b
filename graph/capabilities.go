package graph

import "github.com/gobilevel/bilevel/oracle"

// Capabilities declares p's optional oracles (oracle.Capabilities): the
// linearized Hessian operator HVPAt, the dense matrices HessYY and HessXY,
// and the batch-size check CheckBatch. A *Problem therefore implements
// oracle.Problem.
func (p *Problem) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HVPAt: p.HVPAt, HessYY: p.HessYY, HessXY: p.HessXY, CheckBatch: p.CheckBatch}
}

var _ oracle.Problem = (*Problem)(nil)
