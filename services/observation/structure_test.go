package observation_test

import (
	"strings"
	"testing"

	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/observation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestOutputSchema: a tool that declares an output schema must return JSON that matches it;
// anything else is a PARSE_ERROR saying why, and a match is structured.
func TestOutputSchema(t *testing.T) {
	c := client(t, observation.Options{})
	schema, err := structpb.NewStruct(map[string]any{
		"type": "object", "required": []any{"temperature"},
		"properties": map[string]any{"temperature": map[string]any{"type": "number"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	observe := func(raw string) (*observationv1.ObserveResponse, error) {
		return c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "weather", OutputSchema: schema, Status: success})
	}
	resp, err := observe(`{"temperature": 21.5}`)
	if err != nil || resp.GetStructured().AsMap()["temperature"] != 21.5 || !resp.GetSuccess() {
		t.Fatalf("matching output: %v %v", resp, err)
	}
	for raw, why := range map[string]string{
		"It is sunny.":            "not valid JSON",
		`{"temperature": "warm"}`: "does not match the output schema of weather",
		`{"humidity": 40}`:        "does not match the output schema of weather",
	} {
		_, err := observe(raw)
		if status.Code(err) != codes.InvalidArgument || stageerr.FromError(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR ||
			!strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want PARSE_ERROR saying %q", raw, err, why)
		}
	}
	t.Run("any tool name", func(t *testing.T) {
		// The name went into the schema's URL as it was, and one that is no URL path
		// ("100%", "a b?#") had its valid schema refused as invalid.
		for _, name := range []string{"100%", "a b?#", "../x"} {
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: `{"temperature": 3}`,
				ToolName: name, OutputSchema: schema, Status: success})
			if err != nil || !resp.GetSuccess() {
				t.Errorf("tool %q: %v %v", name, resp, err)
			}
		}
	})
	t.Run("a failed call is not checked", func(t *testing.T) {
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: "oops", ToolName: "weather", OutputSchema: schema,
			Status: failure, Error: "boom"})
		if err != nil || resp.GetObservation() != "(tool failed: boom)" || resp.GetSuccess() {
			t.Errorf("%v %v", resp, err)
		}
	})
	t.Run("an invalid schema is the request's fault", func(t *testing.T) {
		// Whatever the result: a result that is not JSON was blamed on the tool (PARSE_ERROR,
		// the run ends TOOL_RESULT_INVALID), and a failure's request was taken.
		bad, _ := structpb.NewStruct(map[string]any{"type": 7})
		for _, req := range []*observationv1.ObserveRequest{
			{RawResult: "{}", ToolName: "weather", OutputSchema: bad, Status: success},
			{RawResult: "It is sunny.", ToolName: "weather", OutputSchema: bad, Status: success},
			{ToolName: "weather", OutputSchema: bad, Status: failure, Error: "boom"},
		} {
			_, err := c.Observe(t.Context(), req)
			if status.Code(err) != codes.InvalidArgument || stageerr.FromError(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT ||
				!strings.Contains(err.Error(), "output_schema") {
				t.Errorf("result %q (%v): %v, want INVALID_INPUT naming output_schema", req.GetRawResult(), req.GetStatus(), err)
			}
		}
	})
}

// TestKnowledgeReferences: knowledge_search's references are parsed into structured data, and
// its empty sentinel is an empty list.
func TestKnowledgeReferences(t *testing.T) {
	c := client(t, observation.Options{})
	raw := "[1] Install guide — docs/install.md (score 0.91)\nRun make.\n\nThen run make test.\n\n[2] mem-7 (score 0.40)\nNotes."
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: observation.KnowledgeSearchTool, Status: success})
	if err != nil || resp.GetObservation() != raw {
		t.Fatalf("%v %v", resp, err)
	}
	m := resp.GetStructured().AsMap()
	refs := m["references"].([]any)
	if len(refs) != 2 || m["empty"] != false {
		t.Fatalf("structured %v", m)
	}
	first, second := refs[0].(map[string]any), refs[1].(map[string]any)
	if first["n"] != 1.0 || first["title"] != "Install guide" || first["source"] != "docs/install.md" || first["score"] != 0.91 ||
		first["text"] != "Run make.\n\nThen run make test." {
		t.Errorf("first reference %v", first)
	}
	if _, named := second["source"]; second["title"] != "mem-7" || named || second["text"] != "Notes." {
		t.Errorf("second reference %v", second)
	}
	resp, err = c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: "DOCUMENTATION_SEARCH_RESULT: EMPTY", ToolName: observation.KnowledgeSearchTool, Status: success})
	if m := resp.GetStructured().AsMap(); err != nil || m["empty"] != true || len(m["references"].([]any)) != 0 {
		t.Errorf("empty search: %v %v", resp.GetStructured(), err)
	}
	resp, err = c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: "something else", ToolName: observation.KnowledgeSearchTool, Status: success})
	if err != nil || resp.GetStructured() != nil {
		t.Errorf("unknown form: %v %v", resp.GetStructured(), err)
	}
}

// TestStructureOverTheInputLimit: a result's structure that would take the response over the
// stage's input limit is left out, and the result is observed as text; it was sent whole, a
// Struct several times the size of its JSON, and a response over the gRPC message limit made
// the tool fail instead.
func TestStructureOverTheInputLimit(t *testing.T) {
	c := client(t, observation.Options{MaxInputBytes: 1000})
	raw := "[" + strings.Repeat("0,", 400) + "0]" // 803 bytes of JSON, 401 numbers of 11 bytes each as a Struct
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "series", MaxBytes: 100, Status: success})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStructured() != nil || !resp.GetTruncated() || !resp.GetSuccess() || !strings.HasPrefix(resp.GetObservation(), "[TRUNCATED] Original size 803 bytes; truncated to 100 bytes.\n[0,0,") {
		t.Errorf("structured %d bytes, truncated %v, success %v, observation %.80q", proto.Size(resp.GetStructured()), resp.GetTruncated(), resp.GetSuccess(), resp.GetObservation())
	}
	small := "[" + strings.Repeat("0,", 40) + "0]"
	resp, err = c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: small, ToolName: "series", MaxBytes: 100, Status: success})
	if err != nil || len(resp.GetStructured().AsMap()["items"].([]any)) != 41 {
		t.Errorf("a structure within the limit: %v %v", resp.GetStructured(), err)
	}
}

// TestDeeplyNestedResult: a JSON result nested deeper than a Struct can travel is observed
// as text, without a structure. 5,000 levels of arrays (10 KB) made 10,000 levels of messages,
// over what gRPC decodes, and the caller got INTERNAL ("exceeded maximum recursion depth")
// instead of the observation: any tool that fetches JSON someone else wrote could be made to
// fail so.
func TestDeeplyNestedResult(t *testing.T) {
	c := client(t, observation.Options{})
	for _, tc := range []struct {
		name  string
		open  string
		close string
	}{{"arrays", "[", "]"}, {"objects", `{"a":`, "}"}} {
		t.Run(tc.name, func(t *testing.T) {
			raw := strings.Repeat(tc.open, 5000) + "1" + strings.Repeat(tc.close, 5000)
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "api", MaxBytes: 100, Status: success})
			if err != nil {
				t.Fatalf("%v, want the result observed", err)
			}
			if resp.GetStructured() != nil || !resp.GetTruncated() || !resp.GetSuccess() {
				t.Errorf("structured %v, truncated %v, success %v; want no structure, truncated, success", resp.GetStructured() != nil, resp.GetTruncated(), resp.GetSuccess())
			}
		})
	}
	raw := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "api", Status: success})
	if err != nil || resp.GetStructured() == nil {
		t.Errorf("100 levels: structured %v, %v; want it structured", resp.GetStructured(), err)
	}
}
