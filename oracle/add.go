package oracle

// Add returns c + o, field by field: the counts of two pieces of work
// that one report sums (bilevel.Hypergradient adds an unrolled sweep's
// counts to its inner solve's).
func (c Calls) Add(o Calls) Calls {
	return Calls{
		F: c.F + o.F, G: c.G + o.G,
		GradF: c.GradF + o.GradF, GradG: c.GradG + o.GradG,
		HVP: c.HVP + o.HVP, MixedXY: c.MixedXY + o.MixedXY, MixedYX: c.MixedYX + o.MixedYX,
		Dense: c.Dense + o.Dense,
	}
}
