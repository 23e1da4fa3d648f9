package main

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/protobuf/proto"
)

// approvalTimeout is the approval deadline of TestSIGTERMWhilePaused's run that nobody answers.
const approvalTimeout = 8 * time.Second

// TestSIGTERMWhilePaused proves that runs paused for approval outlive a deploy of every replica
// (issue 10, item 5). Two runs pause on replica a; then both replicas are stopped with SIGTERM
// (each must exit cleanly) and stay down until the approval deadline of one of the runs has
// passed, and are started again.
//
// The run nobody answers must end REJECTED / APPROVAL_TIMEOUT at its stored deadline: not
// before it, and not a whole approval timeout after the restart, as a replica that restarted
// the timer when it took the run over would. The other run is approved afterwards, on b, and
// must resume and finish with its tool executed once.
func TestSIGTERMWhilePaused(t *testing.T) {
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "approved", Match: "paused: approved after the restart", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolGuardedBump, "paused-approved")}},
			{Content: "Approved after the restart."},
		}},
		llmtest.Scenario{Name: "unanswered", Match: "paused: never answered", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolGuardedBump, "paused-unanswered")}},
		}},
	)
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()

	approved := &agentv1.RunRequest{RunId: "paused-approved", Message: "paused: approved after the restart"}
	unanswered := &agentv1.RunRequest{RunId: "paused-unanswered", Message: "paused: never answered",
		Overrides: &agentv1.RunOverrides{ApprovalTimeoutMs: proto.Int64(approvalTimeout.Milliseconds())}}
	pause := func(req *agentv1.RunRequest) *typev1.RunResult {
		res, err := a.Agent().Run(ctx, req)
		if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
			t.Fatalf("Run %s on a = %s, %v; want AWAITING_APPROVAL", req.GetRunId(), res.GetOutcome(), err)
		}
		return res
	}
	pause(approved)
	expires := pause(unanswered).GetPendingAction().GetExpiresAt().AsTime()
	if wait := time.Until(expires); wait <= 0 || wait > approvalTimeout {
		t.Fatalf("the approval of %s expires at %s, want within %s from now", unanswered.GetRunId(), expires, approvalTimeout)
	}

	for _, r := range []*meshproc.Service{a, b} {
		if err := r.Stop(t); err != nil {
			t.Errorf("replica %s did not exit cleanly on SIGTERM: %v", r.Name(), err)
		}
	}
	// No replica runs while the unanswered run's deadline passes: the wait is for the clock.
	deadline := time.NewTimer(time.Until(expires))
	<-deadline.C
	restarted := time.Now()
	a.Restart(t)
	b.Restart(t)

	t.Run("an unanswered approval times out at its stored deadline", func(t *testing.T) {
		res := checkSurvived(t, m, b, unanswered.GetRunId(), handedOff, typev1.Outcome_OUTCOME_REJECTED)
		if res.GetExitReason() != "APPROVAL_TIMEOUT" {
			t.Errorf("exit reason %s, want APPROVAL_TIMEOUT", res.GetExitReason())
		}
		ended := m.WaitEvent(t, unanswered.GetRunId(), "run_finished", runTimeout).GetTime().AsTime()
		if ended.Before(expires) {
			t.Errorf("the run ended at %s, before its approval deadline %s", ended, expires)
		}
		if limit := restarted.Add(approvalTimeout); !ended.Before(limit) {
			t.Errorf("the run ended at %s, a whole approval timeout after the restart at %s: the stored deadline %s was not kept",
				ended, restarted, expires)
		}
		if d := m.WaitEvent(t, unanswered.GetRunId(), "approval_resolved", runTimeout).GetApprovalResolved(); d.GetDecision() != "timeout" {
			t.Errorf("approval_resolved = %v, want the decision timeout", d)
		}
		if n := tools.Count("paused-unanswered"); n != 0 {
			t.Errorf("the unapproved tool ran %d times", n)
		}
	})

	t.Run("an approval after the restart resumes the run", func(t *testing.T) {
		resp, err := b.Agent().ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{
			RunId: approved.GetRunId(), CallId: "call-1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
		})
		if err != nil {
			t.Fatalf("ResolveApproval on b: %v", err)
		}
		if !resp.GetResumed() {
			t.Errorf("ResolveApproval = %v, want the run resumed", resp)
		}
		res := checkSurvived(t, m, b, approved.GetRunId(), handedOff, typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS)
		if n := tools.Count("paused-approved"); n != 1 {
			t.Errorf("the approved tool ran %d times, want 1", n)
		}
		checkToolSaw(t, res, "call-1", meshproc.Answer("paused-approved", 1))
	})
}
