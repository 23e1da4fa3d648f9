package mesh_test

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"go.opentelemetry.io/otel/trace"
)

// TestInProcessStagesRunAToolRun: with Options.InProcess only the public API listens, and a tool
// run through it completes as over gRPC: the generation stage's rate-limit error reaches the
// orchestrator with its details and the recovery stage retries, the calculator's result reaches
// the model, and one trace spans the nine services.
func TestInProcessStagesRunAToolRun(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) { o.InProcess = true }, llmtest.Scenario{Name: "tool", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
		{FailuresBeforeSuccess: 1, Failure: llmtest.FailRateLimit, RetryAfterMS: 50,
			ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		{Content: "6 times 7 is 42."},
	}})
	if got := h.mesh.Services(); !slices.Equal(got, []string{mesh.Orchestrator}) {
		t.Fatalf("services listening: %v, want only the orchestrator", got)
	}
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?", UserId: "bob"})

	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || res.GetFinalReport().GetContent() != "6 times 7 is 42." {
		t.Fatalf("outcome %s %s %q (%v)", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent(), res.GetError())
	}
	if tool := res.GetConversation()[3]; tool.GetContent() != "42" || tool.GetName() != "calculator" {
		t.Errorf("tool message %v", tool)
	}
	var accounting []string
	for _, a := range res.GetAccounting() {
		accounting = append(accounting, a.GetType().String()+":"+a.GetStatus().String())
	}
	if want := []string{"ACCOUNTING_TYPE_LLM:ACCOUNTING_STATUS_FAILED", "ACCOUNTING_TYPE_LLM:ACCOUNTING_STATUS_OK",
		"ACCOUNTING_TYPE_TOOL:ACCOUNTING_STATUS_OK", "ACCOUNTING_TYPE_LLM:ACCOUNTING_STATUS_OK"}; !slices.Equal(accounting, want) {
		t.Errorf("accounting %v, want %v", accounting, want)
	}
	traceID, err := trace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatalf("trace id %q: %v", res.GetTraceId(), err)
	}
	if !eventually(t, 10*time.Second, func() bool { return len(h.recorder.Services(traceID)) == 9 }) {
		t.Fatalf("trace %s spans services %v, want all nine", traceID, h.recorder.Services(traceID))
	}
}

// TestInProcessStagesRefuseStageAddrs: stages served in process cannot be replaced by stages on
// the network.
func TestInProcessStagesRefuseStageAddrs(t *testing.T) {
	m, err := mesh.Start(t.Context(), mesh.Options{Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		InProcess: true, StageAddrs: map[string]string{mesh.Planning: "127.0.0.1:1"}})
	if err == nil {
		m.Close()
	}
	if exitcode.Of(err) != exitcode.Invalid {
		t.Fatalf("Start = %v, want an exitcode.Invalid error", err)
	}
}
