package generation

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestRepairJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		out   string
		steps []string
	}{
		{`{"a": 1,}`, `{"a": 1}`, []string{"removed 1 trailing commas"}},
		{`{"a": [1, 2,], }`, `{"a": [1, 2]}`, []string{"removed 2 trailing commas"}},
		{"```json\n{\"a\": 1}\n```", `{"a": 1}`, []string{"stripped a ``` code fence"}},
		{"```{\"a\": 1}```", `{"a": 1}`, []string{"stripped a ``` code fence"}},
		{`{"a": "x`, `{"a": "x"}`, []string{"closed an unterminated string", `appended the missing closers "}"`}},
		{`{"a": "x\`, `{"a": "x"}`, []string{"closed an unterminated string", `appended the missing closers "}"`}},
		{`{"a": {"b": [1`, `{"a": {"b": [1]}}`, []string{`appended the missing closers "]}}"`}},
		{`{"a":`, `{"a":null}`, []string{`appended the missing closers "}"`}},
		{`{"a": 1, `, `{"a": 1}`, []string{"removed 1 trailing commas", `appended the missing closers "}"`}},
		{`{"a": 1}}`, `{"a": 1}`, []string{"trimmed 1 bytes of trailing text after the JSON object"}},
		{`{"a": [1}`, `{"a": [1]}`, []string{"closed 1 brackets left open inside another"}},
		{`{"a": "}{"} tail`, `{"a": "}{"}`, []string{"trimmed 4 bytes of trailing text after the JSON object"}},
		{`Sure: {"a": 1}`, `{"a": 1}`, []string{"dropped 6 bytes of text before the JSON object"}},
		{`{"a": "quote \" inside`, `{"a": "quote \" inside"}`, []string{"closed an unterminated string", `appended the missing closers "}"`}},
		{`{"a": 1]`, `{"a": 1}`, []string{"dropped 1 unmatched closing brackets", `appended the missing closers "}"`}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			out, steps := repairJSON(tc.in)
			if out != tc.out || !slices.Equal(steps, tc.steps) {
				t.Errorf("repairJSON(%q) = %q %q, want %q %q", tc.in, out, steps, tc.out, tc.steps)
			}
			if !json.Valid([]byte(out)) {
				t.Errorf("repaired text %q is not valid JSON", out)
			}
		})
	}
}

func TestRepairJSONLeavesHopelessTextAlone(t *testing.T) {
	out, steps := repairJSON("no json here")
	if out != "no json here" || len(steps) != 0 {
		t.Errorf("repairJSON = %q %q", out, steps)
	}
}

func TestArithmetic(t *testing.T) {
	for in, want := range map[string]string{
		"what is 6 times 7":             "6*7",
		"calculate (2+3)*4":             "(2+3)*4",
		"What is 12 minus 5?":           "12-5",
		"what's 3 x 4.":                 "3*4",
		"compute 100 divided by 8":      "100/8",
		"what is 2 + 2 (roughly)":       "2+2",
		"how much is 7 multiplied by 6": "7*6",
	} {
		if got, ok := arithmetic(in); !ok || got != want {
			t.Errorf("arithmetic(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"what is 42", "tell me a story", "call me at 5"} {
		if got, ok := arithmetic(in); ok {
			t.Errorf("arithmetic(%q) = %q, want none", in, got)
		}
	}
}
