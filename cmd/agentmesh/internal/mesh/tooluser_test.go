package mesh_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestAToolIsToldTheRunsUser: a REST tool's request names the run's user in X-Agentmesh-User,
// whatever user the model writes into the arguments (seed 004: execute(tool_name, parameters,
// user_id)); the API was told no user.
func TestAToolIsToldTheRunsUser(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "for "+r.Header.Get("X-Agentmesh-User")+", not "+r.URL.Query().Get("user"))
	}))
	t.Cleanup(api.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"my_tasks": {Description: "Lists the user's tasks.", URL: api.URL + "/tasks?user=${parameters.user}"}}
	h := start(t, cfg, llmtest.Scenario{Name: "tasks", Match: "list my tasks", Turns: []llmtest.Turn{
		call("my_tasks", `{"user":"mallory"}`), text("done"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "list my tasks", UserId: "alice"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	if got := toolMessage(t, res, 0); got != "for alice, not mallory" {
		t.Errorf("the tool answered %q, want it told the run's user, alice", got)
	}
}

// TestAToolIsToldWhoApprovedACall: a call of a REST tool that waits for approval runs, once an
// approver of the user's tenant approves it through ResolveApproval, with the approver in
// X-Agentmesh-Approver beside the run's user in X-Agentmesh-User, so that the API (and its
// audit) knows who let the call through; the API was told only the run's user.
func TestAToolIsToldWhoApprovedACall(t *testing.T) {
	const message = "Close my account."
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "for "+r.Header.Get("X-Agentmesh-User")+
			", approved by "+r.Header.Get("X-Agentmesh-Approver"))
	}))
	t.Cleanup(api.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"close_account": {Description: "Closes the account.",
		Method: http.MethodPost, URL: api.URL + "/close"}}
	keys := withKeys(cfg)
	h := start(t, cfg, llmtest.Scenario{Name: message, Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "close_account", Arguments: `{}`}}}, text("closed"),
	}})
	addr := h.mesh.OrchestratorAddrs()[0]
	alice, ann := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["ann"])
	res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("run: %v %v, want it paused for approval", res.GetOutcome(), err)
	}
	if _, err := ann.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatalf("ann approves c1: %v", err)
	}
	final := h.followAs(t, alice, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	if got, want := toolMessage(t, final, 0), "for acme/alice, approved by acme/ann"; got != want {
		t.Errorf("the tool answered %q, want %q", got, want)
	}
}
