package experiment

import (
	"math"
	"strings"
	"testing"
)

// FuzzParamsSet feeds arbitrary -set specifications to Params.Set: it must
// return an error naming -set or change only settings the specification
// names to the finite numbers ≥ 0 it gives, never panic or add methods or
// names.
func FuzzParamsSet(f *testing.F) {
	for _, s := range []string{"a.lr=0.5", "all.lr=2,b.lr=1e-3", "a.eta=x", "lr=1", ".lr=1", "a.=1", "a.lr", ",,", "a.b.lr=1", "all.eta=NaN", "a.lr=-1", "b.lr=+Inf", " a.lr = 3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p := Params{"a": {"lr": 1, "eta": 2}, "b": {"lr": 3}}
		before := p.Clone()
		err := p.Set(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "-set ") {
				t.Fatalf("Set(%q): error %q does not name -set", spec, err)
			}
			return
		}
		if len(p) != len(before) {
			t.Fatalf("Set(%q) changed the methods: %v", spec, p)
		}
		for m, kv := range p {
			if len(kv) != len(before[m]) {
				t.Fatalf("Set(%q) changed the names of %s: %v", spec, m, kv)
			}
			for k, v := range kv {
				if v != before[m][k] && !strings.Contains(spec, k) {
					t.Fatalf("Set(%q) changed %s.%s, which it does not name", spec, m, k)
				}
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("Set(%q) set %s.%s to %v", spec, m, k, v)
				}
			}
		}
	})
}
