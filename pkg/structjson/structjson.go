// Package structjson renders google.protobuf.Struct values as JSON: compact, keys sorted,
// exactly as encoding/json renders the struct's AsMap(), without building that map of
// interfaces and reflecting over it. Tool schemas and arguments are rendered on every turn
// (token counts, provider requests), where the map was most of what rendering cost (issue 15).
package structjson

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
)

// ErrNumber is the error of a struct holding a NaN or infinite number, which JSON cannot
// represent (encoding/json refuses them too).
var ErrNumber = errors.New("structjson: NaN and infinite numbers have no JSON form")

// Marshal returns the JSON of s, as json.Marshal(s.AsMap()) does: "{}" for a nil or empty
// struct, ErrNumber when s holds a NaN or an infinite number.
func Marshal(s *structpb.Struct) ([]byte, error) {
	b, ok := appendStruct(nil, s)
	if !ok {
		return nil, ErrNumber
	}
	return b, nil
}

// appendStruct appends the JSON of s; false when it holds a number JSON cannot represent.
func appendStruct(b []byte, s *structpb.Struct) ([]byte, bool) {
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = appendValue(b, fields[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendValue appends the JSON of v (null for a value without a kind, as AsInterface).
func appendValue(b []byte, v *structpb.Value) ([]byte, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return appendNumber(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue), true
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), true
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	default:
		return append(b, "null"...), true
	}
}

// appendNumber appends f as encoding/json writes a float64.
func appendNumber(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9, as encoding/json
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendString appends s as a JSON string, escaped as encoding/json escapes it (HTML
// characters included). Strings that need no escaping, the most of a schema, are copied.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
