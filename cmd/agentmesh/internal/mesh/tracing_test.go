package mesh_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
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
		got[string(kv.Key)] = kv.Value.Emit()
	}
	want := map[string]string{"agentmesh.outcome": res.GetOutcome().String(), "agentmesh.exit_reason": res.GetExitReason(),
		"agentmesh.turns": "1", "agentmesh.contract_hash": res.GetContract().GetContractHash()}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("agentmesh.run.finish: %s = %q, want %q", k, got[k], v)
		}
	}
}
