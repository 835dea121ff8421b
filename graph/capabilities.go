package graph

import "github.com/gobilevel/bilevel/oracle"

// Capabilities declares p's optional oracles (oracle.Capabilities): the
// linearized Hessian operator HVPAt, the dense matrices HessYY and HessXY,
// the batch-size check CheckBatch and the oracles at a fixed outer point
// FixX (FixX with the whole upper level). A *Problem therefore implements
// oracle.Problem.
func (p *Problem) Capabilities() oracle.Capabilities {
	return oracle.Capabilities{HVPAt: p.HVPAt, HessYY: p.HessYY, HessXY: p.HessXY, CheckBatch: p.CheckBatch,
		FixX: func(x []float64, batch []int) oracle.FixedLower { return p.FixX(x, batch, nil) }}
}

var (
	_ oracle.Problem    = (*Problem)(nil)
	_ oracle.FixedLower = (*FixedX)(nil)
)
