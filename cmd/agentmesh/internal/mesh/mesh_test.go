package mesh_test

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) {
	if os.Getenv(modelProcessEnv) != "" {
		os.Exit(serveModel()) // this binary re-executed as the benchmarks' model (perf_test.go)
	}
	defaultProcs = runtime.GOMAXPROCS(0)
	goleak.VerifyTestMain(m)
}

// harness is a whole mesh on loopback ports, its metrics served on one of them, with a
// scripted LLM behind the "scripted" provider.
type harness struct {
	mesh     *mesh.Mesh
	client   agentv1.AgentServiceClient   // of the first orchestrator replica
	replicas []agentv1.AgentServiceClient // of every orchestrator replica
	llm      *llmtest.Server
	recorder *telemetry.Recorder
	logs     *logtest.Buffer // every service's log lines, at debug level
}

func start(t *testing.T, cfg *config.Config, scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	return startWith(t, cfg, nil, scenarios...)
}

// startWith is start with a last change to the configuration once the scripted LLM's URL is
// known.
func startWith(t *testing.T, cfg *config.Config, tweak func(cfg *config.Config, llmURL string), scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	return startReplicas(t, cfg, 1, tweak, scenarios...)
}

// startReplicas is startWith with n orchestrator replicas.
func startReplicas(t *testing.T, cfg *config.Config, n int, tweak func(cfg *config.Config, llmURL string), scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	return startOptions(t, cfg, n, tweak, nil, scenarios...)
}

// startOptions is startReplicas with a last change to the mesh's options.
func startOptions(t *testing.T, cfg *config.Config, n int, tweak func(cfg *config.Config, llmURL string), edit func(*mesh.Options), scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	h := &harness{recorder: telemetry.NewRecorder(), logs: &logtest.Buffer{}}
	if cfg == nil {
		cfg = config.Default()
	}
	if len(scenarios) > 0 {
		h.llm = llmtest.New(t, scenarios...)
		cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: h.llm.URL(), APIKey: "test-key"}
		cfg.Providers["scripted2"] = cfg.Providers["scripted"] // a second target for round-robin
		cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}}
		if tweak != nil {
			tweak(cfg, h.llm.URL())
		}
	}
	var mu sync.Mutex
	providers := map[string]trace.TracerProvider{}
	opts := mesh.Options{
		Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Orchestrators: n, MetricsAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: func(service string) trace.TracerProvider {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := providers[service]; !ok {
				providers[service] = h.recorder.Provider("agentmesh-" + service)
			}
			return providers[service]
		},
	}
	if edit != nil {
		edit(&opts)
	}
	m, err := mesh.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(m.Close)
	h.mesh = m
	for _, addr := range m.OrchestratorAddrs() {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		h.replicas = append(h.replicas, agentv1.NewAgentServiceClient(conn))
	}
	h.client = h.replicas[0]
	return h
}

func (h *harness) run(t *testing.T, req *agentv1.RunRequest) *typev1.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := h.client.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.GetMessage(), err)
	}
	checkReported(t, res)
	return res
}

// checkReported holds for every finished run (issue 11.3): its final report tells the user
// what happened, in non-empty content, except EMPTY_INPUT, which has no message (seed 002:
// the client prompts for input). A run paused for approval or for an answer has not finished.
func checkReported(t *testing.T, res *typev1.RunResult) {
	t.Helper()
	if res.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_APPROVAL || res.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_INPUT {
		return
	}
	empty := strings.TrimSpace(res.GetFinalReport().GetContent()) == ""
	if empty != (res.GetExitReason() == orchestrator.ExitEmptyInput) {
		t.Errorf("%s %s ended with final report content %q: every ending but EMPTY_INPUT tells the user what happened",
			res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}
}

// storedEvents reads a finished run's events back from JetStream, with their headers.
func (h *harness) storedEvents(t *testing.T, runID string) ([]*eventv1.RunEvent, []jetstream.Msg) {
	t.Helper()
	js := h.jetStream(t)
	var evs []*eventv1.RunEvent
	if err := events.Watch(t.Context(), js, runID, 0, func(_ context.Context, ev *eventv1.RunEvent) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatalf("watch %s: %v", runID, err)
	}
	cons, err := js.OrderedConsumer(t.Context(), events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agentmesh.run." + runID + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(len(evs) + 10)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	return evs, msgs
}

func roles(msgs []*typev1.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strings.TrimPrefix(m.GetRole().String(), "ROLE_")
	}
	return out
}

func states(entries []*typev1.TranscriptEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimPrefix(e.GetState().String(), "RUN_STATE_"))
	}
	return out
}

// checkEvents asserts the event log of a run: seq 1, 2, 3 … without gaps, run_started first,
// exactly one run_finished and it last, subjects of DESIGN §7, Nats-Msg-Id and traceparent.
func checkEvents(t *testing.T, h *harness, res *typev1.RunResult) []string {
	t.Helper()
	evs, msgs := h.storedEvents(t, res.GetRunId())
	if len(evs) < 2 || len(msgs) != len(evs) {
		t.Fatalf("got %d events and %d stored messages", len(evs), len(msgs))
	}
	var kinds []string
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, ev.GetSeq())
		}
		kind := events.Kind(ev)
		kinds = append(kinds, kind)
		msg := msgs[i]
		if want := "agentmesh.run." + res.GetRunId() + "." + kind; msg.Subject() != want {
			t.Errorf("event %d subject %q, want %q", i+1, msg.Subject(), want)
		}
		if got, want := msg.Headers().Get("Nats-Msg-Id"), res.GetRunId()+"-"+strconv.Itoa(i+1); got != want {
			t.Errorf("event %d Nats-Msg-Id %q, want %q", i+1, got, want)
		}
		if tp := msg.Headers().Get("traceparent"); !strings.Contains(tp, res.GetTraceId()) {
			t.Errorf("event %d traceparent %q does not carry the run's trace %s", i+1, tp, res.GetTraceId())
		}
	}
	if kinds[0] != "run_started" || kinds[len(kinds)-1] != "run_finished" {
		t.Errorf("events run from %s to %s", kinds[0], kinds[len(kinds)-1])
	}
	if n := count(kinds, "run_finished"); n != 1 {
		t.Errorf("%d run_finished events", n)
	}
	return kinds
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool) bool {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return false
		case <-t.Context().Done():
			return false
		}
	}
	return true
}

func TestChatOnlyRun(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "chat", Match: "Hello there", Turns: []llmtest.Turn{
		{Content: "Hi! How can I help?", Usage: &llmtest.Usage{PromptTokens: 30, CompletionTokens: 7}},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "Hello there", UserId: "alice"})

	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetExitReason() != "COMPLETED" || !res.GetSuccess() {
		t.Fatalf("outcome %s %s success=%v (%v)", res.GetOutcome(), res.GetExitReason(), res.GetSuccess(), res.GetError())
	}
	if got := res.GetFinalReport(); got.GetContent() != "Hi! How can I help?" || got.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
		t.Errorf("final report %v", got)
	}
	if got := roles(res.GetConversation()); !slices.Equal(got, []string{"SYSTEM", "USER", "ASSISTANT"}) {
		t.Errorf("conversation roles %v", got)
	}
	if len(res.GetAccounting()) != 1 {
		t.Fatalf("accounting %v", res.GetAccounting())
	}
	a := res.GetAccounting()[0]
	if a.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM || a.GetProvider() != "scripted" || a.GetModel() != "gpt-test" ||
		a.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || a.GetTokens().GetInput() != 30 || a.GetTokens().GetOutput() != 7 || a.GetTimestampMs() == 0 {
		t.Errorf("llm accounting entry %v", a)
	}
	if res.GetUsage().GetTotal() != 37 || res.GetTurns() != 1 || res.GetToolCalls() != 0 {
		t.Errorf("usage %v turns %d tool calls %d", res.GetUsage(), res.GetTurns(), res.GetToolCalls())
	}
	if res.GetContract().GetContractHash() == "" || res.GetContract().GetContractId() != res.GetRunId() {
		t.Errorf("contract %v", res.GetContract())
	}
	want := []string{"PRECHECK", "INTENT", "PLAN", "ASSEMBLE", "INFER", "VALIDATE_CALLS", "COMMIT", "TERMINATE"}
	if got := states(res.GetTranscript()); !slices.Equal(got, want) {
		t.Errorf("transcript states %v, want %v", got, want)
	}
	kinds := checkEvents(t, h, res)
	for _, k := range []string{"intent_parsed", "plan_created", "turn_started", "llm_response"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s event in %v", k, kinds)
		}
	}
	if slices.Contains(kinds, "llm_delta") {
		t.Errorf("llm_delta in %v: a run started with Run does not stream its answers", kinds)
	}
	// GetRun returns the stored result.
	stored, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
	if err != nil || stored.GetFinalReport().GetContent() != "Hi! How can I help?" || len(stored.GetTranscript()) != len(res.GetTranscript()) {
		t.Errorf("GetRun = %v, %v", stored, err)
	}
}

func TestToolRunSpansEveryService(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "tool", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
		// The first attempt is rate limited (429s are not retried at the HTTP layer), so the
		// recovery stage is consulted and the retry honours Retry-After.
		{FailuresBeforeSuccess: 1, Failure: llmtest.FailRateLimit, RetryAfterMS: 50,
			ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		{Content: "6 times 7 is 42."},
	}})
	o := &agentv1.RunOverrides{}
	streamAnswers(o) // by the generation stage's GenerateStream, whose end the trace shows below
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?", UserId: "bob", Overrides: o})

	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || res.GetExitReason() != "COMPLETED" {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if got := roles(res.GetConversation()); !slices.Equal(got, []string{"SYSTEM", "USER", "ASSISTANT", "TOOL", "ASSISTANT"}) {
		t.Errorf("conversation roles %v", got)
	}
	tool := res.GetConversation()[3]
	if tool.GetContent() != "42" || tool.GetToolCallId() != "call_calc" || tool.GetName() != "calculator" {
		t.Errorf("tool message %v", tool)
	}
	var summary []string
	for _, a := range res.GetAccounting() {
		summary = append(summary, strings.TrimPrefix(a.GetType().String(), "ACCOUNTING_TYPE_")+":"+strings.TrimPrefix(a.GetStatus().String(), "ACCOUNTING_STATUS_"))
	}
	if !slices.Equal(summary, []string{"LLM:FAILED", "LLM:OK", "TOOL:OK", "LLM:OK"}) {
		t.Errorf("accounting %v", summary)
	}
	toolEntry := res.GetAccounting()[2]
	if toolEntry.GetCommand() != "calculator" || toolEntry.GetServer() != "builtin" || toolEntry.GetCharactersOut() != 2 || toolEntry.GetCharactersIn() == 0 {
		t.Errorf("tool accounting %v", toolEntry)
	}
	if res.GetToolCalls() != 1 || res.GetTurns() != 2 {
		t.Errorf("turns %d tool calls %d", res.GetTurns(), res.GetToolCalls())
	}
	// The model saw the tool result on its second turn.
	reqs := h.llm.Requests()
	last := reqs[len(reqs)-1]
	if n := len(last.Messages); n == 0 || last.Messages[n-1].Role != "tool" || !strings.Contains(string(last.Messages[n-1].Content), "42") {
		t.Errorf("last request's final message %+v", last.Messages[len(last.Messages)-1])
	}
	kinds := checkEvents(t, h, res)
	for _, k := range []string{"tool_started", "tool_finished", "recovery_decided"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s event in %v", k, kinds)
		}
	}

	// One trace spans all nine services; the root span and the GenAI spans are there.
	traceID, err := trace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatalf("trace id %q: %v", res.GetTraceId(), err)
	}
	if !eventually(t, 10*time.Second, func() bool { return len(h.recorder.Services(traceID)) == 9 }) {
		t.Fatalf("trace %s spans services %v, want all nine", traceID, h.recorder.Services(traceID))
	}
	// The root span ends when the run's goroutine returns, just after Run answered.
	eventually(t, 10*time.Second, func() bool {
		return slices.ContainsFunc(h.recorder.Trace(traceID), func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "agentmesh.run" })
	})
	var spans []string
	attrs := map[string]map[string]string{}
	for _, s := range h.recorder.Trace(traceID) {
		spans = append(spans, s.Name())
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		attrs[s.Name()] = m
	}
	for _, name := range []string{"agentmesh.run", "agentmesh.infer", "agentmesh.execute", "chat gpt-test", "execute_tool calculator"} {
		if !slices.Contains(spans, name) {
			t.Errorf("no %q span in %v", name, spans)
		}
	}
	if a := attrs["agentmesh.run"]; a["agentmesh.outcome"] != "OUTCOME_COMPLETED_WITH_TOOLS" || a["agentmesh.exit_reason"] != "COMPLETED" || a["agentmesh.turns"] != "2" {
		t.Errorf("root span attributes %v", a)
	}
	if a := attrs["chat gpt-test"]; a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] != "gpt-test" {
		t.Errorf("chat span attributes %v", a)
	}
	if a := attrs["execute_tool calculator"]; a["gen_ai.tool.name"] != "calculator" || a["gen_ai.tool.call.id"] != "call_calc" {
		t.Errorf("tool span attributes %v", a)
	}
	// The run's events are published in the trace, and every span that names the run names it
	// with one attribute, agentmesh.run.id.
	const toolPublish = "publish agentmesh.run.{run_id}.tool_finished"
	if a := attrs[toolPublish]; a["messaging.system"] != "nats" || a["messaging.destination.name"] != "agentmesh.run."+res.GetRunId()+".tool_finished" {
		t.Errorf("%s span attributes %v (spans %v)", toolPublish, a, spans)
	}
	for _, name := range []string{"agentmesh.run", "agentmesh.infer", "chat gpt-test", "execute_tool calculator", toolPublish} {
		if got := attrs[name]["agentmesh.run.id"]; got != res.GetRunId() {
			t.Errorf("%s span: agentmesh.run.id = %q, want %q", name, got, res.GetRunId())
		}
	}
	for name, a := range attrs {
		for key := range a {
			if strings.HasPrefix(key, "agentmesh.") && strings.HasSuffix(key, "_id") {
				t.Errorf("%s span has attribute %s: ids are agentmesh.<thing>.id", name, key)
			}
		}
	}
	// A generation call ends with the inference that made it: the orchestrator reads the
	// stream to its end, rather than leaving the call (its span, its resources) open.
	var infers, generates []sdktrace.ReadOnlySpan
	for _, s := range h.recorder.Trace(traceID) {
		switch {
		case s.Name() == "agentmesh.infer":
			infers = append(infers, s)
		case s.Name() == "agentmesh.generation.v1.GenerationService/GenerateStream" && s.SpanKind() == trace.SpanKindClient:
			generates = append(generates, s)
		}
	}
	if len(generates) == 0 {
		t.Error("no GenerateStream client span")
	}
	for _, g := range generates {
		i := slices.IndexFunc(infers, func(in sdktrace.ReadOnlySpan) bool {
			return !g.StartTime().Before(in.StartTime()) && !g.StartTime().After(in.EndTime())
		})
		if i < 0 || g.EndTime().After(infers[i].EndTime()) {
			t.Errorf("a GenerateStream call (%v to %v) outlives its inference", g.StartTime(), g.EndTime())
		}
	}
}

func TestEmptyInputMakesNoLLMCall(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "never", Match: "*", Turns: []llmtest.Turn{{Content: "should not be asked"}}})
	res := h.run(t, &agentv1.RunRequest{Message: "   \n\t "})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != "EMPTY_INPUT" || res.GetSuccess() {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Errorf("the LLM got %d requests", n)
	}
	if len(res.GetAccounting()) != 0 {
		t.Errorf("accounting %v", res.GetAccounting())
	}
	if got := states(res.GetTranscript()); !slices.Equal(got, []string{"PRECHECK", "TERMINATE"}) {
		t.Errorf("transcript %v", got)
	}
	if kinds := checkEvents(t, h, res); !slices.Equal(kinds, []string{"run_started", "run_finished"}) {
		t.Errorf("events %v", kinds)
	}
}

func TestMaxTurnsEndsWithSyntheticFailure(t *testing.T) {
	loop := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "current_time", Arguments: `{}`}}}
	h := start(t, nil, llmtest.Scenario{Name: "loop", Match: "Keep checking the time", Turns: []llmtest.Turn{loop, loop, loop}})
	two := int32(2)
	res := h.run(t, &agentv1.RunRequest{Message: "Keep checking the time", Overrides: &agentv1.RunOverrides{MaxTurns: &two}})

	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TURNS_REACHED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	report := res.GetFinalReport()
	if report.GetStatus() != typev1.ReportStatus_REPORT_STATUS_FAILURE || report.GetMetadata().GetFields()["reason"].GetStringValue() != "max_turns_exhausted" {
		t.Errorf("final report %v", report)
	}
	if report.GetContent() != "That request is too complex. Could you break it into smaller steps?" {
		t.Errorf("final report content %q", report.GetContent())
	}
	if n := len(h.llm.Requests()); n != 2 || res.GetTurns() != 2 {
		t.Errorf("%d LLM requests, %d turns; max_turns is 2", n, res.GetTurns())
	}
	// Issue 11.3: the last turn is a final turn, so its call is refused, never run.
	if got := h.llm.Requests()[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
		t.Errorf("the last turn offered %v, want only final_report", got)
	}
	if got := roles(res.GetConversation()); !slices.Equal(got, []string{"SYSTEM", "USER", "ASSISTANT", "TOOL", "ASSISTANT", "TOOL"}) {
		t.Errorf("conversation roles %v", got)
	}
	if got := toolMessage(t, res, 1); got != "(tool failed: current_time is not offered in this final turn; only final_report may be called)" {
		t.Errorf("the last turn's tool message %q", got)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:OK LLM:OK" || res.GetToolCalls() != 1 {
		t.Errorf("accounting %s, tool_calls %d: the last turn's call ran", got, res.GetToolCalls())
	}
	if got := h.toolEvents(t, res.GetRunId()); !slices.Equal(got, []string{"tool_started", "tool_finished"}) {
		t.Errorf("tool events %v: the refused call never started", got)
	}
	if got := h.turnStarts(t, res.GetRunId()); !slices.Equal(got, []string{"1:", "2:max_turns"}) {
		t.Errorf("turn_started events %v", got)
	}
	checkEvents(t, h, res)
}

func TestStreamRunDeliversTheRunsEvents(t *testing.T) {
	h := start(t, nil) // the built-in rules model
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if err != nil {
		t.Fatal(err)
	}
	var got []*eventv1.RunEvent
	for {
		ev, err := stream.Recv()
		if err != nil {
			break
		}
		got = append(got, ev)
	}
	if len(got) == 0 || got[len(got)-1].GetRunFinished() == nil {
		t.Fatalf("stream did not end with run_finished: %d events", len(got))
	}
	res := got[len(got)-1].GetRunFinished().GetResult()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || !strings.Contains(res.GetFinalReport().GetContent(), "42") {
		t.Errorf("rules run: %s %q", res.GetOutcome(), res.GetFinalReport().GetContent())
	}
	stored, _ := h.storedEvents(t, res.GetRunId())
	if len(stored) != len(got) {
		t.Fatalf("streamed %d events, NATS holds %d", len(got), len(stored))
	}
	for i := range got {
		if got[i].GetSeq() != stored[i].GetSeq() || events.Kind(got[i]) != events.Kind(stored[i]) {
			t.Errorf("event %d: streamed %s/%d, stored %s/%d", i, events.Kind(got[i]), got[i].GetSeq(), events.Kind(stored[i]), stored[i].GetSeq())
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	h := start(t, nil)
	zero := int32(0)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"bad max_turns", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{MaxTurns: &zero}})
			return err
		}, "max_turns"},
		{"bad run id", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", RunId: "a.b"})
			return err
		}, "run_id"},
		{"unspecified history role", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{{Content: "x"}}})
			return err
		}, "history[0].role"},
		{"get without id", func() error {
			_, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{})
			return err
		}, "run_id"},
		{"decide without message", func() error {
			_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{})
			return err
		}, "message"},
		// Issue 11.5: unknown enum values and overflowing timeouts are refused, not accepted.
		{"unknown tool_policy", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ToolPolicy: 99}})
			return err
		}, "tool_policy 99"},
		{"unknown tool_transport", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ToolTransport: 99}})
			return err
		}, "tool_transport 99"},
		{"unknown output_format", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", OutputFormat: 99})
			return err
		}, "output_format 99"},
		{"timeout that overflows", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(1<<63 - 1)}})
			return err
		}, "total_timeout_ms must be at most"},
		{"output_schema with an external $ref", func() error {
			secret := filepath.Join(t.TempDir(), "secret.json")
			if err := os.WriteFile(secret, []byte(`{"type":"string","description":"do-not-leak"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			schema, err := structpb.NewStruct(map[string]any{"$ref": "file://" + secret})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", OutputFormat: typev1.OutputFormat_OUTPUT_FORMAT_JSON, OutputSchema: schema})
			if strings.Contains(status.Convert(err).Message(), "do-not-leak") {
				t.Errorf("the error quotes the referenced file: %v", err)
			}
			return err
		}, "output_schema"},
		{"unknown approval decision", func() error {
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "r", CallId: "c", Decision: 99})
			return err
		}, "decision must be approve, reject or modify, got 99"},
		// Found by a review of the public API (issue 15's sixteenth session): each of these
		// started a run that failed later with another outcome, or was answered UNAVAILABLE
		// (retryable) or silently ignored.
		{"synthesis ratio not a number", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ForceSynthesisAtRatio: f64(math.NaN())}})
			return err
		}, "force_synthesis_at_ratio must be between 0 and 1, got NaN"},
		{"unknown history role", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "x"}, {Role: 999, Content: "y"}}})
			return err
		}, "history[1].role must be system, user, assistant or tool, got 999"},
		{"unknown history role of a decision", func() error {
			_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", MessageHistory: []*typev1.Message{{Role: 999, Content: "y"}}})
			return err
		}, "message_history[0].role must be system, user, assistant or tool"},
		// A history's tool calls and results pair by id; the context stage dropped a broken
		// pair without a word.
		{"history tool result answering no call", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{
				{Role: typev1.Role_ROLE_USER, Content: "x"},
				{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c9", Content: "4"}}})
			return err
		}, `history[1].tool_call_id "c9" answers no tool call of an earlier assistant message`},
		{"history tool result without an id", func() error {
			_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", MessageHistory: []*typev1.Message{
				{Role: typev1.Role_ROLE_TOOL, Content: "4"}}})
			return err
		}, "message_history[0].tool_call_id must not be empty"},
		{"history tool call without an id", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Name: "calculator"}}}}})
			return err
		}, "history[0].tool_calls[0].id must not be empty"},
		{"history tool call id twice in a message", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{
					{Id: "c1", Name: "calculator"}, {Id: "c1", Name: "calculator"}}}}})
			return err
		}, `history[0].tool_calls[1].id "c1" repeats tool_calls[0]'s`},
		// Found by a review of the public API (orch37): a result pairs with its call by id, so
		// an id two assistant messages give their calls, or a call two results answer, made the
		// pairing ambiguous; the run started.
		{"history tool call id of an earlier message", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}},
				{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "4"},
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{
					{Id: "c2", Name: "calculator"}, {Id: "c1", Name: "calculator"}}}}})
			return err
		}, `history[2].tool_calls[1].id "c1" duplicates history[0].tool_calls[0].id`},
		{"history tool call answered twice", func() error {
			_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", MessageHistory: []*typev1.Message{
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}},
				{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "4"},
				{Role: typev1.Role_ROLE_USER, Content: "again"},
				{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "5"}}})
			return err
		}, `message_history[3].tool_call_id "c1" duplicates message_history[1].tool_call_id`},
		{"unknown surface", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Surface: 999})
			return err
		}, "surface 999 is not one of its values"},
		{"context window over the largest token count", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ContextWindow: i64(1 << 50)}})
			return err
		}, "overrides.context_window must be at most"},
		{"approval timeout of zero", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ApprovalTimeoutMs: i64(0)}})
			return err
		}, "overrides.approval_timeout_ms must be positive"},
		{"answer timeout of zero", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{AnswerTimeoutMs: i64(0)}})
			return err
		}, "overrides.answer_timeout_ms must be positive"},
		// Each message names the one field that is wrong, and its value.
		{"step timeout of zero", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{StepTimeoutMs: i64(0)}})
			return err
		}, "overrides.step_timeout_ms must be positive, got 0"},
		{"negative max_output_tokens", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{MaxOutputTokens: i64(-1)}})
			return err
		}, "overrides.max_output_tokens must not be negative, got -1"},
		{"unknown tool_policy names the override", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{ToolPolicy: 99}})
			return err
		}, "overrides.tool_policy 99 is not one of its values"},
		// Seed 001's V2.1 overlay: under strict_mode the retry path is bounded (<=1).
		{"format retries over strict mode's bound", func() error {
			strict := true
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", Overrides: &agentv1.RunOverrides{StrictMode: &strict, MaxFormatRetries: i32(2)}})
			return err
		}, "overrides.max_format_retries must be at most 1 under strict_mode, got 2"},
		{"output_schema of a text answer", func() error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", OutputSchema: mustStruct(t, map[string]any{"type": "object"})})
			return err
		}, "output_schema needs output_format OUTPUT_FORMAT_JSON"},
		{"a run answering a confirmation", func() error {
			stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{
				RunId: "paused", ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}}})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, "pending_confirmation: a run does not take it; answer a paused run's calls with ResolveApproval"},
		{"get a run id that cannot be one", func() error {
			_, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "a*"})
			return err
		}, "run_id: run id \"a*\" contains '*'"},
		{"cancel a run id that cannot be one", func() error {
			_, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "a b"})
			return err
		}, "run_id: run id \"a b\" contains ' '"},
		{"answer a run id that cannot be one", func() error {
			_, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: ">", Answer: "yes"})
			return err
		}, "run_id: run id \">\" contains '>'"},
		{"decide on a run id that cannot be one", func() error {
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "a.b", CallId: "c", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			return err
		}, "run_id: run id \"a.b\" contains '.'"},
		{"approval with arguments", func() error {
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "r", CallId: "c",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE, ModifiedArguments: mustStruct(t, map[string]any{"expression": "1+1"})})
			return err
		}, "modified_arguments is only for decision modify, got APPROVAL_DECISION_APPROVE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "no-such-run"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetRun(unknown) = %v, want NOT_FOUND", err)
	}
}

// jetStream is JetStream on the mesh's NATS connection.
func (h *harness) jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(h.mesh.NATS())
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// bucket is the mesh's key-value bucket of that name.
func (h *harness) bucket(t *testing.T, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := h.jetStream(t).KeyValue(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// subscribe returns the messages published on subject (a NATS subscription, plain, not
// JetStream) from now until the test ends.
func (h *harness) subscribe(t *testing.T, subject string) <-chan *nats.Msg {
	t.Helper()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := h.mesh.NATS().ChanSubscribe(subject, msgs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return msgs
}
