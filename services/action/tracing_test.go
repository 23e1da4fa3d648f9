package action_test

import (
	"context"
	"strings"
	"testing"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSpans(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	blocking := newFakeTool("blocking", func(ctx context.Context, _ action.Call) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	client := serve(t, action.Options{TracerProvider: tp, Tools: []action.Tool{blocking}})

	ok := request(t, "calculator", map[string]any{"expression": "1+1"})
	timeout := request(t, "blocking", nil)
	timeout.TimeoutMs = 10
	missing := request(t, "nope", nil)
	for _, req := range []*actionv1.ExecuteRequest{ok, ok, timeout, missing} {
		_, _ = client.Execute(t.Context(), req)
	}

	spans := recorder.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	table := []struct {
		name      string
		callID    string
		attrs     map[attribute.Key]attribute.Value
		errorType string
	}{
		{"execute_tool calculator", ok.GetCallId(), map[attribute.Key]attribute.Value{
			"agentmesh.tool.status": attribute.StringValue("success"), "agentmesh.tool.cached": attribute.BoolValue(false),
			"agentmesh.tool.attempts": attribute.IntValue(1)}, ""},
		{"execute_tool calculator", ok.GetCallId(), map[attribute.Key]attribute.Value{
			"agentmesh.tool.status": attribute.StringValue("success"), "agentmesh.tool.cached": attribute.BoolValue(true)}, ""},
		{"execute_tool blocking", timeout.GetCallId(), map[attribute.Key]attribute.Value{
			"agentmesh.tool.status": attribute.StringValue("timeout")}, "EXECUTION_TIMEOUT"},
		{"execute_tool nope", missing.GetCallId(), nil, "TOOL_NOT_FOUND"},
	}
	for i, tc := range table {
		span := spans[i]
		if span.Name() != tc.name || span.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %d: %q kind %v, want %q internal", i, span.Name(), span.SpanKind(), tc.name)
		}
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range span.Attributes() {
			got[kv.Key] = kv.Value
		}
		want := map[attribute.Key]attribute.Value{
			"gen_ai.operation.name": attribute.StringValue("execute_tool"),
			"gen_ai.tool.name":      attribute.StringValue(tc.name[len("execute_tool "):]),
			"gen_ai.tool.call.id":   attribute.StringValue(tc.callID),
			"agentmesh.run.id":      attribute.StringValue(testRunID(t)),
		}
		for k, v := range tc.attrs {
			want[k] = v
		}
		if tc.errorType != "" {
			want["error.type"] = attribute.StringValue(tc.errorType)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d %s = %v, want %v", i, k, got[k].String(), v.String())
			}
		}
		wantStatus := otelcodes.Unset
		if tc.errorType != "" {
			wantStatus = otelcodes.Error
		}
		if span.Status().Code != wantStatus {
			t.Errorf("span %d status %v, want %v", i, span.Status(), wantStatus)
		}
		if tc.errorType == "" && got["error.type"].Type() != attribute.EMPTY {
			t.Errorf("span %d has error.type %v on success", i, got["error.type"].String())
		}
	}
}

// TestARefusedRequestsSpanCarriesNoneOfIt: a request refused for its own fields (a tool name or
// call id past their 512-byte limit, a run id past its 128 bytes) makes an execute_tool span that says it was
// refused (error.type INVALID_INPUT) and carries none of those fields. The span was named and
// attributed from the request before it was checked: a caller's megabytes of tool name went
// into the span's name and gen_ai.tool.name, a span too large for the exporter's batch (an
// OTLP collector takes 4 MiB a request), which lost the spans exported with it.
func TestARefusedRequestsSpanCarriesNoneOfIt(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	client := serve(t, action.Options{TracerProvider: tp})

	long := strings.Repeat("x", 64<<10)
	for _, req := range []*actionv1.ExecuteRequest{
		{RunId: "run-1", CallId: "call-1", ToolName: long},
		{RunId: "run-1", CallId: long, ToolName: "calculator"},
		{RunId: long, CallId: "call-1", ToolName: "calculator"},
	} {
		if _, err := client.Execute(t.Context(), req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Execute: %v, want INVALID_ARGUMENT", err)
		}
	}
	spans := recorder.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for i, span := range spans {
		if len(span.Name()) > 512 {
			t.Errorf("span %d is named with %d bytes of the request", i, len(span.Name()))
		}
		var errorType string
		for _, kv := range span.Attributes() {
			if n := len(kv.Value.String()); n > 512 {
				t.Errorf("span %d: %s holds %d bytes of the request", i, kv.Key, n)
			}
			if kv.Key == "error.type" {
				errorType = kv.Value.AsString()
			}
		}
		if errorType != "INVALID_INPUT" || span.Status().Code != otelcodes.Error {
			t.Errorf("span %d: error.type %q, status %v, want INVALID_INPUT and Error", i, errorType, span.Status())
		}
	}
}
