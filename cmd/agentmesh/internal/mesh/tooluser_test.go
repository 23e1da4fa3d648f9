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
