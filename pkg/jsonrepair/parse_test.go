package jsonrepair_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
)

func TestParseObject(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		want  map[string]any
		steps []string
		err   string // substring of the error; "" means success
		kind  string
	}{
		{name: "native", in: `{"a": 1}`, want: map[string]any{"a": 1.0}},
		{name: "repaired", in: `{"a": 1,`, want: map[string]any{"a": 1.0},
			steps: []string{"removed 1 trailing commas", `appended the missing closers "}"`}},
		{name: "object sent as a JSON string", in: `"{\"a\": 1}"`, want: map[string]any{"a": 1.0},
			steps: []string{"decoded an object sent as a JSON string"}},
		{name: "broken object sent as a JSON string", in: `"{\"a\": 1,"`, want: map[string]any{"a": 1.0},
			steps: []string{"decoded an object sent as a JSON string", "removed 1 trailing commas", `appended the missing closers "}"`}},
		{name: "array", in: `[1]`, err: "a JSON array, not an object", kind: "array"},
		{name: "array after repair", in: `[1,`, err: "a JSON array after repair, not an object", kind: "array"},
		{name: "plain string", in: `"hello"`, err: "a JSON string, not an object", kind: "string"},
		{name: "number", in: `42`, err: "a JSON number, not an object", kind: "number"},
		{name: "null", in: `null`, err: "a JSON null, not an object", kind: "null"},
		{name: "boolean", in: `true`, err: "a JSON boolean, not an object", kind: "boolean"},
		{name: "hopeless", in: `call it`, err: "could not be repaired"},
		{name: "still broken after repair", in: `{"a" 1,}`, err: "still not after repair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := jsonrepair.ParseObject(tc.in)
			if tc.err != "" {
				var je *jsonrepair.Error
				if !errors.As(err, &je) || !strings.Contains(err.Error(), tc.err) || je.Kind != tc.kind {
					t.Fatalf("ParseObject(%q) error = %v, want *Error of kind %q containing %q", tc.in, err, tc.kind, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Value, tc.want) || !slices.Equal(res.Steps, tc.steps) || res.Repaired() != (len(tc.steps) > 0) {
				t.Errorf("ParseObject(%q) = %v %q, want %v %q", tc.in, res.Value, res.Steps, tc.want, tc.steps)
			}
		})
	}
}

func TestErrorKeepsBothParseErrors(t *testing.T) {
	_, err := jsonrepair.Parse(`{"a" 1,}`)
	var je *jsonrepair.Error
	if !errors.As(err, &je) || je.Native == nil || je.Repaired == nil || len(je.Steps) == 0 {
		t.Fatalf("error = %#v", err)
	}
}

func TestRepairLeavesValidJSONAlone(t *testing.T) {
	for _, in := range []string{"{\"a\": \"```go\\nx\\n```\"}", `{"a": "it's"}`, `[]`} {
		if out, steps := jsonrepair.Repair(in); out != in || len(steps) != 0 {
			t.Errorf("Repair(%q) = %q %q, want it unchanged", in, out, steps)
		}
	}
}
