package mesh_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
)

// TestNodeClient calls the public API from Node with @grpc/grpc-js (installed by `make test`
// from npm), proving a non-Go client can list tools, run an agent, stream its events and get
// INVALID_ARGUMENT for a bad request, with the StageError detail it reads from the
// google.rpc.Status of examples/proto.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the polyglot test: %v", err)
	}
	h := start(t, nil) // the built-in rules model
	script := filepath.Join("..", "..", "..", "..", "test", "node", "client.mjs")
	cmd := exec.CommandContext(t.Context(), node, script, h.mesh.Addr(mesh.Orchestrator), "What is 6 times 7?")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\n%s(run `npm ci --prefix test/node` if @grpc/grpc-js is missing)", err, stderr.String())
	}
	var got struct {
		Tools      []string `json:"tools"`
		Outcome    string   `json:"outcome"`
		ExitReason string   `json:"exit_reason"`
		Answer     string   `json:"answer"`
		Roles      []string `json:"roles"`
		Events     []struct {
			Seq  int    `json:"seq"`
			Kind string `json:"kind"`
		} `json:"events"`
		Invalid *struct {
			Code       int    `json:"code"`
			Details    string `json:"details"`
			StageError *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"stage_error"`
		} `json:"invalid"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	if !slices.Contains(got.Tools, "calculator") {
		t.Errorf("tools %v", got.Tools)
	}
	if got.Outcome != "OUTCOME_COMPLETED_WITH_TOOLS" || got.ExitReason != "COMPLETED" || !strings.Contains(got.Answer, "42") {
		t.Errorf("run: %s %s %q", got.Outcome, got.ExitReason, got.Answer)
	}
	if !slices.Equal(got.Roles, []string{"ROLE_SYSTEM", "ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_ASSISTANT"}) {
		t.Errorf("roles %v", got.Roles)
	}
	if n := len(got.Events); n < 3 || got.Events[0].Kind != "run_started" || got.Events[n-1].Kind != "run_finished" {
		t.Fatalf("streamed events %v", got.Events)
	}
	for i, ev := range got.Events {
		if ev.Seq != i+1 {
			t.Errorf("event %d has seq %d", i+1, ev.Seq)
		}
	}
	if got.Invalid == nil || got.Invalid.Code != 3 || !strings.Contains(got.Invalid.Details, "run_id") {
		t.Fatalf("GetRun with no id: %+v, want code 3 (INVALID_ARGUMENT)", got.Invalid)
	}
	if se := got.Invalid.StageError; se == nil || se.Code != "STAGE_ERROR_CODE_INVALID_INPUT" || se.Message != got.Invalid.Details {
		t.Errorf("GetRun with no id: StageError %+v, want INVALID_INPUT with the status's message", se)
	}
}
