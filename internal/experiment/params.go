package experiment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Params holds numeric settings per method: Params[method][name], for
// example Params["stocbio"]["lr"]. Programs keep a table of defaults and
// let -set override them.
type Params map[string]map[string]float64

// Clone returns a deep copy of p.
func (p Params) Clone() Params {
	c := Params{}
	for m, kv := range p {
		c[m] = map[string]float64{}
		for k, v := range kv {
			c[m][k] = v
		}
	}
	return c
}

// Get returns the setting name of method (0 if unset).
func (p Params) Get(method, name string) float64 { return p[method][name] }

// Set applies a comma-separated list of method.name=value overrides;
// method "all" sets name for every method that has it. Unknown methods and
// names are errors, and so are values that are negative or not finite:
// every setting is a step size, a step count or a floor, and 0 is the
// method's default where it has one.
func (p Params) Set(spec string) error {
	for _, item := range Strings(spec) {
		lhs, val, ok := strings.Cut(item, "=")
		dot := strings.LastIndex(lhs, ".")
		ok2 := dot > 0
		method, name := lhs[:max(dot, 0)], lhs[dot+1:]
		if !ok || !ok2 {
			return fmt.Errorf("-set %q: want method.name=value items, e.g. stocbio.lr=0.1 or all.alpha=0.5", item)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("-set %q: %q is not a number ≥ 0", item, val)
		}
		found := false
		for m, kv := range p {
			if m != method && method != "all" {
				continue
			}
			if _, has := kv[name]; has {
				kv[name] = v
				found = true
			}
		}
		if !found {
			return fmt.Errorf("-set %q: no method %q with a setting %q (%s)", item, method, name, p.Describe())
		}
	}
	return nil
}

// Line returns "name=value ..." for method, names sorted.
func (p Params) Line(method string) string {
	var keys []string
	for k := range p[method] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatFloat(p[method][k], 'g', -1, 64))
	}
	return strings.Join(parts, " ")
}

// Describe lists every method's settings, for -h.
func (p Params) Describe() string {
	var parts []string
	for _, m := range p.methods() {
		parts = append(parts, m+": "+p.Line(m))
	}
	return strings.Join(parts, "; ")
}

// Positive returns an error naming -set if a setting called name of any
// method is 0 (for settings that have no default, such as SGD's step).
func (p Params) Positive(name string) error {
	for _, m := range p.methods() {
		if v, ok := p[m][name]; ok && v == 0 {
			return fmt.Errorf("-set %s.%s=0: give a positive %s (it has no default)", m, name, name)
		}
	}
	return nil
}

// methods returns the methods of p, sorted.
func (p Params) methods() []string {
	ms := make([]string, 0, len(p))
	for m := range p {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}
