package structjson_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/structjson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Marshal writes what encoding/json writes for the struct's map: what every caller wrote
// before it stopped going through the map.
func TestMarshalIsEncodingJSON(t *testing.T) {
	for _, m := range []map[string]any{
		{},
		{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string", "description": "e.g. 6*7 <b> & \"quoted\" \\ \n\t\u2028 é 日本"}},
			"required": []any{"expression"}, "additionalProperties": false},
		{"numbers": []any{0.0, math.Copysign(0, -1), 1.0, -2.5, 1e-7, 1e-6, 123456789012345678901.0, 1e21, 3.14159, 1e300, -1e-300, 42.0}},
		{"nested": map[string]any{"b": []any{nil, true, false, map[string]any{}, []any{}}, "a": "z", "A": "Z"}},
		{"ctl": "\x00\x01\x1f\x7f"},
	} {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(s.AsMap())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := structjson.Marshal(s); err != nil || string(got) != string(want) {
			t.Errorf("Marshal(%v)\n got %s, %v\nwant %s", m, got, err, want)
		}
	}
	if got, err := structjson.Marshal(nil); err != nil || string(got) != "{}" {
		t.Errorf("Marshal(nil) = %s, %v; want {}", got, err)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(f)}})}}
		if _, err := structjson.Marshal(s); !errors.Is(err, structjson.ErrNumber) {
			t.Errorf("Marshal(%v) error = %v, want ErrNumber", f, err)
		}
	}
}

// BenchmarkMarshal compares Marshal with json.Marshal of the struct's map on a tool schema.
func BenchmarkMarshal(b *testing.B) {
	s, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{
		"expression": map[string]any{"type": "string", "description": "An arithmetic expression, e.g. 6*7."},
		"precision":  map[string]any{"type": "integer", "minimum": 0, "maximum": 12}},
		"required": []any{"expression"}, "additionalProperties": false})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("impl=structjson", func(b *testing.B) {
		for b.Loop() {
			_, _ = structjson.Marshal(s)
		}
	})
	b.Run("impl=encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(s.AsMap())
		}
	})
}
