package mesh_test

import (
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// cutterNATS starts an embedded NATS server behind a natstest.Cutter and points cfg at it.
func cutterNATS(t *testing.T, cfg *config.Config) *natstest.Cutter {
	t.Helper()
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cutter := natstest.NewCutter(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	cfg.NATS.URL = cutter.URL()
	return cutter
}

// TestARetriedDecisionWhoseAnswerWasLost: a decision was stored, but its answer was lost with
// the connection, so its caller was told UNAVAILABLE and retried, as gRPC clients do. The
// retry, the same decision by the same caller, is answered as the first would have been; it
// was FAILED_PRECONDITION "already decided", for the caller's own decision. Another decision
// on the call still is.
func TestARetriedDecisionWhoseAnswerWasLost(t *testing.T) {
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.LeaseTTLMS = time.Second.Milliseconds()
	cutter := cutterNATS(t, cfg)
	const message = "Two sums, decided once."
	two := llmtest.Turn{ToolCalls: []llmtest.ToolCall{
		{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`},
		{ID: "c2", Name: "calculator", Arguments: `{"expression":"1+1"}`},
	}}
	h := startReplicas(t, cfg, 1, nil, llmtest.Scenario{Name: "two", Match: message,
		Turns: []llmtest.Turn{two, text("42 and 2")}})
	res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1", "c2")
	approve := &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
	cutter.Arm("$KV." + runstore.InputBucket + ".")
	_, err = h.client.ResolveApproval(t.Context(), approve)
	<-cutter.Cut()
	wantCode(t, err, codes.Unavailable, "ResolveApproval whose answer was lost")

	resp, err := h.client.ResolveApproval(t.Context(), approve)
	want := &agentv1.ResolveApprovalResponse{RunId: res.GetRunId(), CallId: "c1",
		PendingCallIds: []string{"c2"}}
	if err != nil || !proto.Equal(resp, want) {
		t.Fatalf("the retried ResolveApproval = %v, %v; want %v", resp, err, want)
	}
	reject := proto.CloneOf(approve)
	reject.Decision = agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT
	_, err = h.client.ResolveApproval(t.Context(), reject)
	wantCode(t, err, codes.FailedPrecondition, "another decision on the decided call")

	approve.CallId = "c2"
	resp, err = h.client.ResolveApproval(t.Context(), approve)
	if err != nil || !resp.GetResumed() {
		t.Fatalf("ResolveApproval(c2) = %v, %v", resp, err)
	}
	final, kinds := finishOn(t, h.client, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Errorf("outcome %s %s, events %v", final.GetOutcome(), final.GetExitReason(), kinds)
	}
}

// TestARetriedAnswerWhoseAnswerWasLost: as TestARetriedDecisionWhoseAnswerWasLost, for an
// answer to a run's question: the retry is resumed: true, where it was FAILED_PRECONDITION
// "already answered" (or NOT_FOUND once the run went on with the answer); another answer is
// refused.
func TestARetriedAnswerWhoseAnswerWasLost(t *testing.T) {
	var cutter *natstest.Cutter
	const message, answer = "Export it all.", "Skip it."
	hold := make(chan struct{})
	scenario := exportScenario(message, "Skipped.")
	scenario.Turns[2].Hold = hold // the run goes on with the answer, and waits there
	h := askMesh(t, 1, func(cfg *config.Config) { cutter = cutterNATS(t, cfg) }, scenario)
	res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	q := asking(t, res)
	req := &agentv1.AnswerRequest{RunId: res.GetRunId(), QuestionId: q, Answer: answer}
	cutter.Arm("$KV." + runstore.InputBucket + ".")
	_, err = h.client.Answer(t.Context(), req)
	<-cutter.Cut()
	wantCode(t, err, codes.Unavailable, "Answer whose answer was lost")

	resp, err := h.client.Answer(t.Context(), req)
	want := &agentv1.AnswerResponse{RunId: res.GetRunId(), QuestionId: q, Resumed: true}
	if err != nil || !proto.Equal(resp, want) {
		t.Fatalf("the retried Answer = %v, %v; want %v", resp, err, want)
	}
	other := proto.CloneOf(req)
	other.Answer = "Export it anyway."
	if _, err := h.client.Answer(t.Context(), other); err == nil {
		t.Error("another answer to the answered question was taken")
	}
	close(hold)
	final, kinds := finishOn(t, h.client, res.GetRunId())
	answered(t, h, message, answer, final, kinds)
}
