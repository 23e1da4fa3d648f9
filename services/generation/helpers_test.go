package generation_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/generation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testAPIKey is the key test providers send; no error message may contain it.
const testAPIKey = "sk-test-SECRET-0123456789"

// serve starts the service with the providers and returns a client.
func serve(t *testing.T, opts generation.Options) generationv1.GenerationServiceClient {
	t.Helper()
	svc := generation.New(opts)
	return generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register))
}

// serveProviders starts the service with the providers.
func serveProviders(t *testing.T, providers map[string]generation.Provider) generationv1.GenerationServiceClient {
	t.Helper()
	return serve(t, generation.Options{Providers: providers})
}

// openAIAt returns an OpenAI provider for baseURL with fast retries, whose connections close
// when the test ends; edit changes the options first.
func openAIAt(t *testing.T, baseURL string, edit func(*generation.OpenAIOptions)) generation.Provider {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	opts := generation.OpenAIOptions{
		Name:         "openai",
		BaseURL:      baseURL,
		APIKey:       testAPIKey,
		Headers:      map[string]string{"X-Team": "agents"},
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
		HTTPClient:   &http.Client{Transport: tr},
	}
	if edit != nil {
		edit(&opts)
	}
	return generation.NewOpenAI(opts)
}

// openAIClient serves the service with one OpenAI provider named "openai" pointing at srv.
func openAIClient(t *testing.T, srv *llmtest.Server, edit func(*generation.OpenAIOptions)) generationv1.GenerationServiceClient {
	t.Helper()
	return serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), edit)})
}

// anthropicAt returns an Anthropic provider for baseURL with fast retries, whose connections
// close when the test ends; edit changes the options first.
func anthropicAt(t *testing.T, baseURL string, edit func(*generation.AnthropicOptions)) generation.Provider {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	opts := generation.AnthropicOptions{
		Name:         "anthropic",
		BaseURL:      baseURL,
		APIKey:       testAPIKey,
		Headers:      map[string]string{"X-Team": "agents"},
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
		HTTPClient:   &http.Client{Transport: tr},
	}
	if edit != nil {
		edit(&opts)
	}
	return generation.NewAnthropic(opts)
}

// anthropicClient serves the service with one Anthropic provider named "anthropic" pointing
// at srv.
func anthropicClient(t *testing.T, srv *llmtest.Server, edit func(*generation.AnthropicOptions)) generationv1.GenerationServiceClient {
	t.Helper()
	return serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, srv.URL(), edit)})
}

// rulesClient serves the service with the rules provider.
func rulesClient(t *testing.T) generationv1.GenerationServiceClient {
	t.Helper()
	return serveProviders(t, map[string]generation.Provider{"rules": generation.NewRules()})
}

// httpServer starts a plain HTTP server with handler, closed when the test ends, and returns
// its API base URL.
func httpServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func msg(role typev1.Role, content string) *typev1.Message {
	return &typev1.Message{Role: role, Content: content}
}

func user(content string) *typev1.Message   { return msg(typev1.Role_ROLE_USER, content) }
func system(content string) *typev1.Message { return msg(typev1.Role_ROLE_SYSTEM, content) }

func assistantCall(id, name, args string) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: id, Name: name, RawArguments: args}}}
}

func toolResult(id, name, content string) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_TOOL, ToolCallId: id, Name: name, Content: content}
}

// tool is an offered tool with an object schema of the given string properties.
func tool(name string, props ...string) *typev1.Tool {
	properties := map[string]any{}
	for _, p := range props {
		properties[p] = map[string]any{"type": "string"}
	}
	schema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": properties})
	return &typev1.Tool{Name: name, Description: "the " + name + " tool", InputSchema: schema}
}

func tools(names ...string) []*typev1.Tool {
	out := make([]*typev1.Tool, 0, len(names))
	for _, n := range names {
		out = append(out, tool(n))
	}
	return out
}

// request builds a generate request against provider/model.
func request(provider, model string, msgs ...*typev1.Message) *generationv1.GenerateRequest {
	return &generationv1.GenerateRequest{
		RunId:    "run-1",
		Target:   &typev1.Target{Provider: provider, Model: model},
		Messages: msgs,
	}
}

// stageError asserts err is a gRPC status with the code and returns its stage error.
func stageError(t *testing.T, err error, code codes.Code) *stageerr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	if got := status.Code(err); got != code {
		t.Fatalf("grpc code = %v, want %v (%v)", got, code, err)
	}
	return stageerr.FromError(err)
}

// streamAll reads a generate stream to its end.
func streamAll(t *testing.T, client generationv1.GenerationServiceClient, req *generationv1.GenerateRequest) ([]*generationv1.Delta, *generationv1.GenerateResponse, error) {
	t.Helper()
	return streamOf(t, client, &generationv1.GenerateStreamRequest{Request: req})
}

// streamOf is streamAll for a whole stream request.
func streamOf(t *testing.T, client generationv1.GenerationServiceClient, in *generationv1.GenerateStreamRequest) ([]*generationv1.Delta, *generationv1.GenerateResponse, error) {
	t.Helper()
	return streamWith(t, t.Context(), client, in)
}

// streamWith is streamOf with the call's context ctx (e.g. acting for a user).
func streamWith(t *testing.T, ctx context.Context, client generationv1.GenerationServiceClient,
	in *generationv1.GenerateStreamRequest,
) ([]*generationv1.Delta, *generationv1.GenerateResponse, error) {
	t.Helper()
	stream, err := client.GenerateStream(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	var deltas []*generationv1.Delta
	var final *generationv1.GenerateResponse
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return deltas, final, nil
		}
		if err != nil {
			return deltas, final, err
		}
		if final != nil {
			t.Fatal("a message arrived after the final answer")
		}
		switch c := msg.GetChunk().(type) {
		case *generationv1.GenerateStreamResponse_Delta:
			deltas = append(deltas, c.Delta)
		case *generationv1.GenerateStreamResponse_Final:
			final = c.Final
		default:
			t.Fatalf("empty stream message %v", msg)
		}
	}
}

// joinDeltas concatenates the content and reasoning fragments.
func joinDeltas(deltas []*generationv1.Delta) (content, reasoning string, contentParts int) {
	var c, r strings.Builder
	for _, d := range deltas {
		if d.GetContent() != "" {
			contentParts++
		}
		c.WriteString(d.GetContent())
		r.WriteString(d.GetReasoning())
	}
	return c.String(), r.String(), contentParts
}

// recorder returns a tracer provider recording ended spans.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// args returns the parsed arguments of a call as a map.
func args(tc *typev1.ToolCall) map[string]any {
	return tc.GetArguments().AsMap()
}

func ptr[T any](v T) *T { return &v }
