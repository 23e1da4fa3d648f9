package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceTimeout bounds how long the spans of a run take to reach Jaeger once the run answered.
const traceTimeout = time.Minute

// TestRunIsOneTraceInJaeger runs the nine binaries as separate processes exporting OTLP to a
// real Jaeger v2 (meshproc.StartJaeger), makes a run with a tool call, its first LLM call rate
// limited so that the recovery stage is consulted too, and reads the run's trace back from
// Jaeger's query API. It must be one trace: spans of all nine services, each naming its process
// (service.instance.id: the replica's name for the orchestrator), one root and every other
// span's parent in it; the GenAI attributes on the chat and execute_tool spans; and, for every
// event of the run that NATS stored, the producer span whose context the event's traceparent
// header carries, with the messaging attributes.
func TestRunIsOneTraceInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh and Jaeger as separate processes")
	}
	jaeger := meshproc.StartJaeger(t)
	const message = "trace: what is 6 times 7?"
	llm := llmtest.New(t, llmtest.Scenario{Name: "traced", Match: message, Turns: []llmtest.Turn{
		{FailuresBeforeSuccess: 1, Failure: llmtest.FailRateLimit, RetryAfterMS: 50,
			ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		{Content: "6 times 7 is 42."},
	}})
	m := meshproc.Start(t, meshproc.Options{Config: meshproc.Config{LLM: llm.URL()}, Replicas: []string{"a"}, Env: jaeger.Env()})

	res, err := m.Replica(t, "a").Agent().Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("run ended %s %s (error %v), want COMPLETED_WITH_TOOLS", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	runID := res.GetRunId()
	// The stored events name their publish spans in their traceparent headers.
	published := map[string]jetstream.Msg{}
	for _, msg := range m.StoredMessages(t, runID) {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), events.HeaderCarrier(msg.Headers())))
		if sc.TraceID().String() != res.GetTraceId() {
			t.Fatalf("event %s carries trace %s, want the run's trace %s", msg.Subject(), sc.TraceID(), res.GetTraceId())
		}
		published[sc.SpanID().String()] = msg
	}
	if len(published) < 4 {
		t.Fatalf("the stream holds %d events of the run, want at least run_started, tool_started, tool_finished and run_finished", len(published))
	}

	services := []string{"agentmesh-orchestrator"}
	for _, s := range meshproc.Stages {
		services = append(services, "agentmesh-"+s.Name)
	}
	slices.Sort(services)
	tr := jaeger.WaitTrace(t, res.GetTraceId(), traceTimeout, func(tr *meshproc.JaegerTrace) error {
		ids := map[string]bool{}
		got := map[string]bool{}
		for _, s := range tr.Spans {
			ids[s.SpanID] = true
			got[tr.Service(s)] = true
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, services) {
			return fmt.Errorf("spans of services %v, want %v", names, services)
		}
		for id, msg := range published {
			if !ids[id] {
				return fmt.Errorf("no publish span %s of %s", id, msg.Subject())
			}
		}
		// Every process exports its spans in batches of its own: wait for those checked below,
		// not only for a span of each service.
		for name, least := range map[string]int{"agentmesh.run": 1, "chat scripted-model": 3, "execute_tool calculator": 1} {
			if n := countSpans(tr, name); n < least {
				return fmt.Errorf("%d %s spans so far, want at least %d", n, name, least)
			}
		}
		return nil
	})

	checkOneTree(t, tr)
	checkInstances(t, tr)
	spans := map[string][]meshproc.JaegerSpan{}
	for _, s := range tr.Spans {
		spans[s.OperationName] = append(spans[s.OperationName], s)
	}
	for _, s := range spans["agentmesh.run"] {
		want(t, s, map[string]string{"agentmesh.run.id": runID, "agentmesh.outcome": "OUTCOME_COMPLETED_WITH_TOOLS"})
	}

	// GenAI: every chat call, the rate-limited one included, then the two answers with usage.
	chats := spans["chat scripted-model"]
	answered := 0
	for _, s := range chats {
		want(t, s, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-model",
			"gen_ai.provider.name": "scripted", "span.kind": "client", "agentmesh.run.id": runID})
		if in, ok := s.Tags.Get("gen_ai.usage.input_tokens"); ok {
			answered++
			out, _ := s.Tags.Get("gen_ai.usage.output_tokens")
			if n, _ := strconv.Atoi(in); n <= 0 {
				t.Errorf("chat span %s: gen_ai.usage.input_tokens = %s", s.SpanID, in)
			}
			if n, _ := strconv.Atoi(out); n <= 0 {
				t.Errorf("chat span %s: gen_ai.usage.output_tokens = %s", s.SpanID, out)
			}
			want(t, s, map[string]string{"gen_ai.response.model": "scripted-model"})
		} else {
			want(t, s, map[string]string{"error.type": "RATE_LIMITED"})
		}
	}
	if len(chats) != 3 || answered != 2 {
		t.Errorf("%d chat spans, %d with usage; want 3: the rate-limited call and two answers", len(chats), answered)
	}
	tools := spans["execute_tool calculator"]
	if len(tools) != 1 {
		t.Fatalf("%d execute_tool calculator spans, want 1", len(tools))
	}
	want(t, tools[0], map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator",
		"gen_ai.tool.call.id": "call_calc", "agentmesh.run.id": runID, "agentmesh.tool.status": "success"})
	if got := tr.Service(tools[0]); got != "agentmesh-action" {
		t.Errorf("execute_tool span from %s, want agentmesh-action", got)
	}

	// Every stored event was published in a producer span of the orchestrator.
	for _, s := range tr.Spans {
		msg, ok := published[s.SpanID]
		if !ok {
			continue
		}
		kind := msg.Subject()[len(events.Subject(runID, "")):]
		if s.OperationName != "publish "+events.Subject("{run_id}", kind) {
			t.Errorf("publish span of %s is named %q", msg.Subject(), s.OperationName)
		}
		want(t, s, map[string]string{"span.kind": "producer", "messaging.system": "nats", "messaging.operation.type": "send",
			"messaging.destination.name": msg.Subject(), "messaging.message.id": msg.Headers().Get(jetstream.MsgIDHeader),
			"agentmesh.run.id": runID})
		if got := tr.Service(s); got != "agentmesh-orchestrator" {
			t.Errorf("publish span of %s from %s, want agentmesh-orchestrator", msg.Subject(), got)
		}
	}
}

// checkOneTree checks that the trace is one tree: a single root, and every other span's parent
// in the trace.
func checkOneTree(t *testing.T, tr *meshproc.JaegerTrace) {
	t.Helper()
	ids := map[string]bool{}
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	var roots []string
	for _, s := range tr.Spans {
		switch parent := s.Parent(); {
		case parent == "":
			roots = append(roots, tr.Service(s)+" "+s.OperationName)
		case !ids[parent]:
			t.Errorf("span %s %q of %s has parent %s, which is not in the trace", s.SpanID, s.OperationName, tr.Service(s), parent)
		}
	}
	if len(roots) != 1 {
		t.Errorf("the trace has roots %v, want one", roots)
	}
}

// checkInstances checks that every process of the trace names its instance: the orchestrator
// its replica's name, and no two stages the same.
func checkInstances(t *testing.T, tr *meshproc.JaegerTrace) {
	t.Helper()
	seen := map[string]string{}
	for _, p := range tr.Processes {
		id, _ := p.Tags.Get("service.instance.id")
		switch {
		case id == "":
			t.Errorf("%s spans carry no service.instance.id", p.ServiceName)
		case p.ServiceName == "agentmesh-orchestrator" && id != "a":
			t.Errorf("orchestrator spans carry service.instance.id %q, want its replica name a", id)
		case seen[id] != "" && seen[id] != p.ServiceName:
			t.Errorf("%s and %s both carry service.instance.id %q", seen[id], p.ServiceName, id)
		}
		seen[id] = p.ServiceName
	}
}

// want checks the tags of a span.
func want(t *testing.T, s meshproc.JaegerSpan, tags map[string]string) {
	t.Helper()
	for key, value := range tags {
		if got, _ := s.Tags.Get(key); got != value {
			t.Errorf("span %s %q: %s = %q, want %q", s.SpanID, s.OperationName, key, got, value)
		}
	}
}

// countSpans is how many spans of tr are named name.
func countSpans(tr *meshproc.JaegerTrace, name string) int {
	n := 0
	for _, s := range tr.Spans {
		if s.OperationName == name {
			n++
		}
	}
	return n
}
