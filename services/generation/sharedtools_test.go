package generation_test

import (
	"reflect"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestToolsOfOneNameKeepTheirOwnSchemas: the service shares one copy of each distinct tool
// across requests; requests offering a tool of one name with different schemas still have
// their answers repaired by the schema each offered, also when one is asked again.
func TestToolsOfOneNameKeepTheirOwnSchemas(t *testing.T) {
	wantsObject := schemaOf(t, map[string]any{"type": "object", "properties": map[string]any{"filters": map[string]any{"type": "object"}}})
	wantsString := schemaOf(t, map[string]any{"type": "object", "properties": map[string]any{"filters": map[string]any{"type": "string"}}})
	raw := `{"filters": "{\"year\": 2024}"}`
	call := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "search", Arguments: raw}}}
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{call, call, call}})
	client := openAIClient(t, srv, nil)
	for i, tc := range []struct {
		schema *structpb.Struct
		args   map[string]any
	}{
		{wantsObject, map[string]any{"filters": map[string]any{"year": 2024.0}}},
		{wantsString, map[string]any{"filters": `{"year": 2024}`}},
		{wantsObject, map[string]any{"filters": map[string]any{"year": 2024.0}}},
	} {
		// Each request decodes its own tools, as from another caller; the scripted model
		// answers a conversation by its assistant messages, so each request is one turn on.
		msgs := []*typev1.Message{user("search")}
		for range i {
			msgs = append(msgs, msg(typev1.Role_ROLE_ASSISTANT, "searched"), user("again"))
		}
		req := request("openai", "gpt-test", msgs...)
		req.Tools = []*typev1.Tool{{Name: "search", Description: "Searches.", InputSchema: tc.schema}}
		resp, err := client.Generate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := args(resp.GetToolCalls()[0]); !reflect.DeepEqual(got, tc.args) {
			t.Errorf("request %d: arguments %v, want %v", i+1, got, tc.args)
		}
	}
}

// TestGenerateStreamSendsHeadersAtOnce: a stream's headers reach the caller while the provider
// is still thinking, so the caller's gRPC can drop the copy of the request it keeps for a
// retry; the answer follows once the provider gives it.
func TestGenerateStreamSendsHeadersAtOnce(t *testing.T) {
	hold := make(chan struct{})
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "done", Hold: hold}}})
	client := openAIClient(t, srv, nil)
	stream, err := client.GenerateStream(t.Context(), &generationv1.GenerateStreamRequest{Request: request("openai", "gpt-test", user("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	headers := make(chan error, 1)
	go func() {
		_, err := stream.Header()
		headers <- err
	}()
	select {
	case err := <-headers:
		if err != nil {
			t.Fatalf("headers: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("no headers within 10 s while the provider held its answer")
	}
	close(hold)
	for {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended without a final answer: %v", err)
		}
		if f := msg.GetFinal(); f != nil {
			if f.GetContent() != "done" {
				t.Errorf("final content %q, want done", f.GetContent())
			}
			return
		}
	}
}

func schemaOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
