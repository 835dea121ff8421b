package experiment

import (
	"math"
	"reflect"
	"time"

	"github.com/gobilevel/bilevel/internal/report"
)

// WriteJSON writes v to path like report.WriteJSON, with every NaN or
// infinite float replaced by null (encoding/json rejects them, and a
// precision with nothing flagged or a run that stopped early has them).
func WriteJSON(path string, v any) error {
	return report.WriteJSON(path, jsonSafe(reflect.ValueOf(v)))
}

func jsonSafe(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonSafe(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonSafe(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		it := v.MapRange()
		for it.Next() {
			out[reflect.ValueOf(it.Key().Interface()).String()] = jsonSafe(it.Value())
		}
		return out
	case reflect.Struct:
		if d, ok := v.Interface().(time.Duration); ok {
			return d.String()
		}
		out := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			out[f.Name] = jsonSafe(v.Field(i))
		}
		return out
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	return v.Interface()
}
