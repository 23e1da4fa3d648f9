package mesh_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestToolCallOfADeadReplica: a call whose execution started and never finished (its record
// left started in the call ledger, as an action replica that died leaves it) is not run
// again; the model is told it may or may not have run.
func TestToolCallOfADeadReplica(t *testing.T) {
	var posts atomic.Int32
	notes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		_, _ = w.Write([]byte("posted"))
	}))
	t.Cleanup(notes.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"post_note": {Description: "Posts a note.", URL: notes.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "interrupted", Match: "post the note", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "post_note", Arguments: `{}`}}}, text("I could not tell whether it was posted."),
	}})

	ledger, err := action.NewKVLedger(h.mesh.NATS(), action.KVLedgerOptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	const runID = "run-of-a-dead-replica"
	if _, err := ledger.Put(t.Context(), &actionv1.CallRecord{RunId: runID, CallId: "c1", ToolName: "post_note",
		State: actionv1.CallState_CALL_STATE_STARTED, StartedAt: timestamppb.New(time.Now().Add(-time.Hour))}, 0); err != nil {
		t.Fatal(err)
	}

	res := h.run(t, &agentv1.RunRequest{RunId: runID, Message: "post the note"})
	if got, want := toolMessage(t, res, 0), "(tool failed: interrupted by a restart; it may or may not have run)"; got != want {
		t.Errorf("tool message %q, want %q", got, want)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("the tool ran %d times, want 0", n)
	}
}
