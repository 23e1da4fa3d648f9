package jsonrepair_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
)

// decoded parses JSON test text.
func decoded(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

func TestExpandNested(t *testing.T) {
	const schema = `{"type": "object", "properties": {
		"config": {"type": "object"},
		"tags": {"type": ["array", "null"]},
		"code": {"type": "string"},
		"either": {"type": ["object", "string"]},
		"items": {"type": "array", "items": {"type": "object", "properties": {"meta": {"type": "object"}}}},
		"untyped": {}
	}}`
	for _, tc := range []struct {
		name   string
		in     string
		schema string // "" means nil
		want   string
		steps  []string
	}{
		{
			name: "object and array fields the schema wants", schema: schema,
			in:    `{"config": "{\"depth\": 2}", "tags": "[\"a\", \"b\"]"}`,
			want:  `{"config": {"depth": 2}, "tags": ["a", "b"]}`,
			steps: []string{"parsed the string at /config as a JSON object", "parsed the string at /tags as a JSON array"},
		},
		{
			name: "strings the schema wants stay strings", schema: schema,
			in:   `{"code": "{\"x\": 1}", "either": "{\"x\": 1}", "untyped": "[1]"}`,
			want: `{"code": "{\"x\": 1}", "either": "{\"x\": 1}", "untyped": "[1]"}`,
		},
		{
			name: "broken nested JSON is repaired when the schema wants an object", schema: schema,
			in:    `{"config": "{depth: 2,"}`,
			want:  `{"config": {"depth": 2}}`,
			steps: []string{"parsed the string at /config as a JSON object"},
		},
		{
			name: "kind must match the schema", schema: schema,
			in:   `{"config": "[1, 2]"}`,
			want: `{"config": "[1, 2]"}`,
		},
		{
			name: "inside array items", schema: schema,
			in:    `{"items": [{"meta": "{\"k\": \"v\"}"}, "{\"meta\": {}}"]}`,
			want:  `{"items": [{"meta": {"k": "v"}}, {"meta": {}}]}`,
			steps: []string{"parsed the string at /items/0/meta as a JSON object", "parsed the string at /items/1 as a JSON object"},
		},
		{
			name: "doubly stringified", schema: schema,
			in:    `{"items": "[{\"meta\": \"{\\\"k\\\": 1}\"}]"}`,
			want:  `{"items": [{"meta": {"k": 1}}]}`,
			steps: []string{"parsed the string at /items as a JSON array", "parsed the string at /items/0/meta as a JSON object"},
		},
		{
			name:  "nil schema expands every valid object or array string",
			in:    `{"a": "{\"b\": \"[1]\"}", "c": "plain", "d": "{broken", "e/f": "[]"}`,
			want:  `{"a": {"b": [1]}, "c": "plain", "d": "{broken", "e/f": []}`,
			steps: []string{"parsed the string at /a as a JSON object", "parsed the string at /a/b as a JSON array", "parsed the string at /e~1f as a JSON array"},
		},
		{
			name:  "the root itself",
			in:    `"{\"a\": 1}"`,
			want:  `{"a": 1}`,
			steps: []string{"parsed the string at / as a JSON object"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s map[string]any
			if tc.schema != "" {
				s = decoded(t, tc.schema).(map[string]any)
			}
			in := decoded(t, tc.in)
			before := decoded(t, tc.in)
			got, steps := jsonrepair.ExpandNested(in, s)
			if want := decoded(t, tc.want); !reflect.DeepEqual(got, want) || !slices.Equal(steps, tc.steps) {
				t.Errorf("ExpandNested = %v %q\nwant %v %q", got, steps, want, tc.steps)
			}
			if !reflect.DeepEqual(in, before) {
				t.Errorf("the input was modified: %v", in)
			}
		})
	}
}
