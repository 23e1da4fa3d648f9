package generation_test

// The tests of what a request holds while its model answers: shared tools, the headers that
// let the caller drop its copy, and the conversation dropped once encoded.

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
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

// heldMessages wraps a provider and hands the test a weak pointer to the first message of
// each streamed request it gets.
type heldMessages struct {
	generation.Provider
	first chan weak.Pointer[typev1.Message]
}

func (p *heldMessages) Stream(ctx context.Context, req *generation.Request, onDelta func(*generationv1.Delta) error) (*generation.Response, error) {
	p.first <- weak.Make(req.Messages[0])
	return p.Provider.Stream(ctx, req, onDelta)
}

// TestTheConversationIsNotHeldWhileTheModelThinks: once the provider has encoded a request,
// the service keeps no decoded copy of its conversation while the model takes its time: a
// run waiting on its model holds its conversation in the generation stage once, encoded.
func TestTheConversationIsNotHeldWhileTheModelThinks(t *testing.T) {
	hold := make(chan struct{})
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "done", Hold: hold}}})
	p := &heldMessages{Provider: openAIAt(t, srv.URL(), nil), first: make(chan weak.Pointer[typev1.Message], 1)}
	client := serveProviders(t, map[string]generation.Provider{"openai": p})
	done := make(chan error, 1)
	go func() {
		_, final, err := streamAll(t, client, request("openai", "gpt-test", user(strings.Repeat("a long message ", 1000))))
		if err == nil && final.GetContent() != "done" {
			err = fmt.Errorf("final answer %q, want done", final.GetContent())
		}
		done <- err
	}()
	first := <-p.first
	deadline := time.Now().Add(10 * time.Second)
	for first.Value() != nil {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("the request's decoded conversation was still held 10 s into the model's answer")
		}
		runtime.GC()
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTheDefaultClientCarriesLongRequestsAndAnswers: the provider client made when none is
// given (pooled, with small connection buffers) sends a request far larger than its buffers,
// with many headers, and reads answers far larger, streamed and not.
func TestTheDefaultClientCarriesLongRequestsAndAnswers(t *testing.T) {
	answer := strings.Repeat("a long answer, ", 4000) // 60 KB
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: answer}, {Content: answer}}})
	headers := map[string]string{}
	for i := range 40 {
		headers[fmt.Sprintf("X-Header-%d", i)] = strings.Repeat("h", 100)
	}
	client := openAIClient(t, srv, func(o *generation.OpenAIOptions) { o.HTTPClient, o.Headers = nil, headers })
	req := request("openai", "gpt-test", user(strings.Repeat("a long question ", 4000)))
	_, final, err := streamAll(t, client, req)
	if err != nil || final.GetContent() != answer {
		t.Fatalf("streamed: %d bytes of content, %v; want %d", len(final.GetContent()), err, len(answer))
	}
	req.Messages = append(req.Messages, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: answer}, user("again"))
	req.UseCache = true // not streamed
	resp, err := client.Generate(t.Context(), req)
	if err != nil || resp.GetContent() != answer {
		t.Fatalf("not streamed: %d bytes of content, %v; want %d", len(resp.GetContent()), err, len(answer))
	}
	if got := srv.Requests()[0].Header.Get("X-Header-39"); got != headers["X-Header-39"] {
		t.Errorf("header X-Header-39 = %q", got)
	}
}
