package mesh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/memory"
)

// TestTheFinishSpanSaysHowTheRunEnded: a run whose result the memory stage cannot take yet is
// finished again by a replica that takes it over, in an agentmesh.run.finish span of the
// run's trace, which carries how the run ended as the run's span does (README "Tracing":
// agentmesh.outcome, exit_reason, turns, contract_hash); it carried the run's id alone.
func TestTheFinishSpanSaysHowTheRunEnded(t *testing.T) {
	cfg := config.Default()
	cfg.Durability.LeaseTTLMS = 1000
	h := start(t, cfg, llmtest.Scenario{Name: "hi", Match: "*", Turns: []llmtest.Turn{text("hello")}})
	if err := h.mesh.Stop(context.WithoutCancel(t.Context()), "memory"); err != nil {
		t.Fatal(err)
	}
	res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi there"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := oteltrace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatal(err)
	}
	var finish sdktrace.ReadOnlySpan
	if !eventually(t, 15*time.Second, func() bool {
		for _, s := range h.recorder.Trace(id) {
			if s.Name() == "agentmesh.run.finish" && s.EndTime().After(s.StartTime()) {
				finish = s
				return true
			}
		}
		return false
	}) {
		t.Fatal("no agentmesh.run.finish span in the run's trace")
	}
	got := map[string]string{}
	for _, kv := range finish.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	want := map[string]string{"agentmesh.outcome": res.GetOutcome().String(), "agentmesh.exit_reason": res.GetExitReason(),
		"agentmesh.turns": "1", "agentmesh.contract_hash": res.GetContract().GetContractHash()}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("agentmesh.run.finish: %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestLearningIsInTheRunsTrace (DESIGN §8, one run = one trace): what the memory stage does to
// learn from a finished run — its agentmesh.memory.learn span, and within it the facts model's
// request (chat memory-model in the generation stage) — is part of the run's trace. Learning
// runs after SaveRun has answered, on a goroutine of the memory stage, and started a trace of
// its own for every run.
func TestLearningIsInTheRunsTrace(t *testing.T) {
	const tell = "Remember that my locker is number 12."
	h := startWith(t, config.Default(), func(cfg *config.Config, _ string) {
		cfg.Models.Memory = &config.Target{Provider: "scripted", Model: "memory-model"}
	},
		llmtest.Scenario{Name: "tell", Match: tell, Turns: []llmtest.Turn{text("Noted.")}},
		llmtest.Scenario{Name: "facts", Match: "User: " + tell + "*", Turns: []llmtest.Turn{
			call(memory.FactsTool, `{"facts": [{"text": "The user's locker is number 12.", "importance": 0.7}]}`)}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: tell})
	learnedBy(t, h.client, res.GetRunId())
	id, err := oteltrace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatal(err)
	}
	find := func(name string) sdktrace.ReadOnlySpan {
		for _, s := range h.recorder.Trace(id) {
			if s.Name() == name {
				return s
			}
		}
		return nil
	}
	if !eventually(t, 10*time.Second, func() bool { return find("agentmesh.memory.learn") != nil && find("chat memory-model") != nil }) {
		var names []string
		for _, s := range h.recorder.Trace(id) {
			names = append(names, s.Name())
		}
		t.Fatalf("the run's trace has no agentmesh.memory.learn span with the facts model's chat memory-model in it: %v", names)
	}
	learn := find("agentmesh.memory.learn")
	got := map[string]string{}
	for _, kv := range learn.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["agentmesh.run.id"] != res.GetRunId() {
		t.Errorf("agentmesh.memory.learn: agentmesh.run.id = %q, want %q", got["agentmesh.run.id"], res.GetRunId())
	}
	chat := find("chat memory-model")
	if !withinSpan(h.recorder.Trace(id), chat, learn) {
		t.Errorf("chat memory-model is not within agentmesh.memory.learn")
	}
}

// withinSpan reports whether span descends from ancestor among spans.
func withinSpan(spans []sdktrace.ReadOnlySpan, span, ancestor sdktrace.ReadOnlySpan) bool {
	byID := map[oteltrace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	for s := span; s != nil; s = byID[s.Parent().SpanID()] {
		if s.Parent().SpanID() == ancestor.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

// TestAFailedRunsSpanSaysWhy: a run that fails ends its agentmesh.run span with status Error
// and error.type, its exit reason, as the OpenTelemetry conventions for recording errors ask
// (README "Tracing"); the span had the status alone, so a failed run could not be told apart
// by error.type from the failed calls of its trace, nor searched by it.
func TestAFailedRunsSpanSaysWhy(t *testing.T) {
	loop := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "current_time", Arguments: `{}`}}}
	h := start(t, nil, llmtest.Scenario{Name: "loop", Match: "Keep checking the time", Turns: []llmtest.Turn{loop, loop, loop}})
	two := int32(2)
	res := h.run(t, &agentv1.RunRequest{Message: "Keep checking the time", Overrides: &agentv1.RunOverrides{MaxTurns: &two}})
	if res.GetSuccess() || res.GetExitReason() != "MAX_TURNS_REACHED" {
		t.Fatalf("outcome %s %s, want a failure MAX_TURNS_REACHED", res.GetOutcome(), res.GetExitReason())
	}
	id, err := oteltrace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatal(err)
	}
	var root sdktrace.ReadOnlySpan
	if !eventually(t, 10*time.Second, func() bool {
		for _, s := range h.recorder.Trace(id) {
			if s.Name() == "agentmesh.run" {
				root = s
				return true
			}
		}
		return false
	}) {
		t.Fatal("no agentmesh.run span in the run's trace")
	}
	if root.Status().Code != codes.Error {
		t.Errorf("agentmesh.run: status %v, want Error", root.Status())
	}
	got := ""
	for _, kv := range root.Attributes() {
		if kv.Key == "error.type" {
			got = kv.Value.String()
		}
	}
	if got != "MAX_TURNS_REACHED" {
		t.Errorf("agentmesh.run: error.type = %q, want the exit reason MAX_TURNS_REACHED", got)
	}
}

// TestAnOverriddenModelNameIsBounded: a run's overrides.targets name a model of at most 256
// bytes, as the API's other names; a longer one is INVALID_ARGUMENT naming the field and the
// limit, before the run starts. The model's name names the generation stage's chat span
// ("chat {model}") and fills its gen_ai.request.model: a caller's megabytes of model name made
// a span larger than an OTLP export request takes (a collector's 4 MiB), which lost the other
// runs' spans exported with it.
func TestAnOverriddenModelNameIsBounded(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "hi", Match: "*", Turns: []llmtest.Turn{text("hello")}})
	long := strings.Repeat("m", 64<<10)
	_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi there", Overrides: &agentv1.RunOverrides{
		Targets: []*typev1.Target{{Provider: "scripted", Model: long}},
	}})
	if status.Code(err) != grpccodes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "overrides.targets[0].model: at most 256 bytes, got 65536") {
		t.Errorf("Run with a 64 KiB model name: %v, want INVALID_ARGUMENT naming overrides.targets[0].model and its limit", err)
	}
	for _, s := range h.recorder.Spans() {
		if len(s.Name()) > 1024 {
			t.Errorf("a %s span is named with %d bytes", s.SpanKind(), len(s.Name()))
		}
	}
}

// TestARefusedRunsSpanSaysWhy: a Run refused after its agentmesh.run span started (its id
// names a run the store keeps: ALREADY_EXISTS) ends the span with status Error and error.type,
// the refusal's code, as a failed run's does; it ended with no status, so the refused start
// looked like a run that went well.
func TestARefusedRunsSpanSaysWhy(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "hi", Match: "*", Turns: []llmtest.Turn{text("hello"), text("hello")}})
	first := h.run(t, &agentv1.RunRequest{Message: "hello", RunId: "refused-span-run"})
	if !first.GetSuccess() {
		t.Fatalf("first run: %s %s", first.GetOutcome(), first.GetExitReason())
	}
	_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hello", RunId: "refused-span-run"})
	if status.Code(err) != grpccodes.AlreadyExists {
		t.Fatalf("Run with the id of a finished run: %v, want ALREADY_EXISTS", err)
	}
	var refused sdktrace.ReadOnlySpan
	if !eventually(t, 10*time.Second, func() bool {
		for _, s := range h.recorder.Spans() {
			if s.Name() == "agentmesh.run" && s.SpanContext().TraceID().String() != first.GetTraceId() && spanAttr(s, "agentmesh.run.id") == "refused-span-run" {
				refused = s
				return true
			}
		}
		return false
	}) {
		t.Fatal("no agentmesh.run span of the refused start")
	}
	if refused.Status().Code != codes.Error {
		t.Errorf("agentmesh.run of the refused start: status %v, want Error", refused.Status())
	}
	if got := spanAttr(refused, "error.type"); got != "ALREADY_EXISTS" {
		t.Errorf("agentmesh.run of the refused start: error.type = %q, want ALREADY_EXISTS", got)
	}
}

// spanAttr is the string value of the span's attribute key, "" when it has none.
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
