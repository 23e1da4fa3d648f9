package jsonrepair

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ExpandNested replaces string values that hold a stringified JSON object or array by the
// parsed value, and returns the new value with one step per replacement naming its JSON
// Pointer (e.g. `parsed the string at /config as a JSON object`). Replaced values are
// expanded again, so doubly stringified JSON unfolds too. v is not modified.
//
// schema is the JSON Schema of v as decoded JSON (a map[string]any), followed through
// "properties", "additionalProperties" and "items". With a schema, only strings where the
// schema's "type" allows an object or an array but not a string are replaced, and they are
// parsed with repair; a string the schema wants stays a string, so a tool that takes JSON
// text keeps it. With a nil schema, every string that is a valid JSON object or array is
// replaced (no repair).
func ExpandNested(v any, schema map[string]any) (any, []string) {
	e := expander{permissive: schema == nil}
	return e.walk(v, schema, ""), e.steps
}

// expander walks a value along its schema.
type expander struct {
	permissive bool
	steps      []string
}

// walk returns v with its stringified JSON expanded; path is v's JSON Pointer.
func (e *expander) walk(v any, schema map[string]any, path string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out[k] = e.walk(x[k], propertySchema(schema, k), path+"/"+escapePointer(k))
		}
		return out
	case []any:
		out := make([]any, len(x))
		items := subSchema(schema, "items")
		for i, item := range x {
			out[i] = e.walk(item, items, path+"/"+strconv.Itoa(i))
		}
		return out
	case string:
		return e.expandString(x, schema, path)
	}
	return v
}

// expandString parses s when the schema (or permissive mode) wants a structured value there.
func (e *expander) expandString(s string, schema map[string]any, path string) any {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return s
	}
	var parsed any
	switch {
	case e.permissive:
		v, err := decode(t)
		if err != nil {
			return s
		}
		parsed = v
	case wantsStructured(schema):
		res, err := Parse(t)
		if err != nil {
			return s
		}
		parsed = res.Value
		if !typeAllows(schema, Kind(parsed)) {
			return s
		}
	default:
		return s
	}
	kind := Kind(parsed)
	if kind != "object" && kind != "array" {
		return s
	}
	where := path
	if where == "" {
		where = "/"
	}
	e.steps = append(e.steps, fmt.Sprintf("parsed the string at %s as a JSON %s", where, kind))
	return e.walk(parsed, schema, path)
}

// wantsStructured reports whether a schema's type allows an object or an array and not a
// string.
func wantsStructured(schema map[string]any) bool {
	return (typeAllows(schema, "object") || typeAllows(schema, "array")) && !typeAllows(schema, "string")
}

// typeAllows reports whether the schema's "type" (a name or a list of names) names kind.
func typeAllows(schema map[string]any, kind string) bool {
	switch t := schema["type"].(type) {
	case string:
		return t == kind
	case []any:
		return slices.Contains(t, any(kind))
	}
	return false
}

// propertySchema is the schema of property k: properties[k], else additionalProperties.
func propertySchema(schema map[string]any, k string) map[string]any {
	if props := subSchema(schema, "properties"); props != nil {
		if s, ok := props[k].(map[string]any); ok {
			return s
		}
	}
	return subSchema(schema, "additionalProperties")
}

// subSchema is schema[key] when it is an object.
func subSchema(schema map[string]any, key string) map[string]any {
	s, _ := schema[key].(map[string]any)
	return s
}

// escapePointer escapes a key for a JSON Pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
