package experiment

import (
	"fmt"
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
// names are errors.
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
		if err != nil {
			return fmt.Errorf("-set %q: %q is not a number", item, val)
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
	var ms []string
	for m := range p {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	var parts []string
	for _, m := range ms {
		parts = append(parts, m+": "+p.Line(m))
	}
	return strings.Join(parts, "; ")
}
