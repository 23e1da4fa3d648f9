package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEveryRPCOnEveryReplica proves that a run belongs to the mesh, not to the replica that
// started it (issue 10, item 4): behind a round-robin load balancer any call may land on any
// replica. Runs started on replica a are read, watched, cancelled, approved and retried through
// replica b, with both replicas alive: GetRun of a live run is FAILED_PRECONDITION "still
// running", of a paused run the AWAITING_APPROVAL snapshot, of a finished run its result;
// CancelRun, ResolveApproval and WatchRun act on the run; a Run retried with the same
// idempotency key attaches to the first run instead of running again; and a run_id that already
// exists is ALREADY_EXISTS on either replica, leaving the existing run untouched.
func TestEveryRPCOnEveryReplica(t *testing.T) {
	liveHold := make(chan struct{})
	t.Cleanup(func() { close(liveHold) })
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "live", Match: "rpc: live", Turns: []llmtest.Turn{{Content: "Never answered.", Hold: liveHold}}},
		llmtest.Scenario{Name: "paused", Match: "rpc: paused", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolGuardedBump, "rpc-paused")}},
			{Content: "Approved and counted."},
		}},
		llmtest.Scenario{Name: "finished", Match: "rpc: finished", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, "rpc-finished")}},
			{Content: "Counted once."},
		}},
	)
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a").Agent(), m.Replica(t, "b").Agent()

	t.Run("live run: GetRun, WatchRun, retried Run and CancelRun on b", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		defer cancel()
		req := &agentv1.RunRequest{RunId: "rpc-live", IdempotencyKey: "rpc-live", Message: "rpc: live"}
		first := goRun(func() (*typev1.RunResult, error) { return a.Run(ctx, req) })
		if !poll(t, runTimeout, func() bool { return llmRequests(llm, req.GetMessage(), 0) > 0 }) {
			t.Fatal("the run never reached the LLM")
		}
		_, err := b.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "still running") {
			t.Errorf("GetRun of a live run on b = %v, want FAILED_PRECONDITION \"still running\"", err)
		}
		watch, err := b.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatalf("WatchRun on b: %v", err)
		}
		retried := goRun(func() (*typev1.RunResult, error) { return b.Run(ctx, req) })

		resp, err := b.CancelRun(ctx, &agentv1.CancelRunRequest{RunId: req.GetRunId(), Reason: "cancelled on b"})
		if err != nil {
			t.Fatalf("CancelRun on b: %v", err)
		}
		if !resp.GetCancelled() || resp.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
			t.Errorf("CancelRun on b = %v, want cancelled, INTERRUPTED", resp)
		}
		if last := lastEvent(t, watch); last.GetRunFinished().GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
			t.Errorf("WatchRun on b ended with %v, want run_finished INTERRUPTED", last)
		}
		first.check(t, req.GetRunId(), typev1.Outcome_OUTCOME_INTERRUPTED)
		retried.check(t, req.GetRunId(), typev1.Outcome_OUTCOME_INTERRUPTED)
		if n := llmRequests(llm, req.GetMessage(), 0); n != 1 {
			t.Errorf("the LLM was asked %d times, want once: the retried Run must not run again", n)
		}
		checkEventLog(t, m, req.GetRunId())
	})

	t.Run("paused run: GetRun and ResolveApproval on b", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		defer cancel()
		req := &agentv1.RunRequest{RunId: "rpc-paused", Message: "rpc: paused"}
		res, err := a.Run(ctx, req)
		if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
			t.Fatalf("Run on a = %s, %v; want AWAITING_APPROVAL", res.GetOutcome(), err)
		}
		snap, err := b.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatalf("GetRun of a paused run on b: %v", err)
		}
		if snap.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL || len(snap.GetPendingAction().GetToolCalls()) != 1 ||
			snap.GetPendingAction().GetToolCalls()[0].GetId() != "call-1" {
			t.Errorf("GetRun of a paused run on b = %s pending %v, want the AWAITING_APPROVAL snapshot with call-1",
				snap.GetOutcome(), snap.GetPendingAction())
		}
		watch, err := b.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatalf("WatchRun on b: %v", err)
		}
		if _, err := b.ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{
			RunId: req.GetRunId(), CallId: "call-1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
		}); err != nil {
			t.Fatalf("ResolveApproval on b: %v", err)
		}
		if last := lastEvent(t, watch); last.GetRunFinished().GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Errorf("WatchRun on b ended with %v, want run_finished COMPLETED_WITH_TOOLS", last)
		}
		if n := tools.Count("rpc-paused"); n != 1 {
			t.Errorf("the approved tool ran %d times, want 1", n)
		}
		checkEventLog(t, m, req.GetRunId())
	})

	t.Run("finished run: GetRun, retried Run and an existing run_id on b", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		defer cancel()
		req := &agentv1.RunRequest{RunId: "rpc-finished", IdempotencyKey: "rpc-finished", Message: "rpc: finished"}
		done, err := a.Run(ctx, req)
		if err != nil || done.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Fatalf("Run on a = %s, %v", done.GetOutcome(), err)
		}
		got, err := b.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatalf("GetRun of a finished run on b: %v", err)
		}
		sameRun(t, "GetRun on b", got, done)
		checkTranscript(t, m.Replica(t, "b"), got)

		again, err := b.Run(ctx, req)
		if err != nil {
			t.Fatalf("Run retried on b with the same idempotency key: %v", err)
		}
		sameRun(t, "Run retried on b", again, done)

		for _, r := range []struct {
			name   string
			client agentv1.AgentServiceClient
		}{{"a", a}, {"b", b}} {
			_, err := r.client.Run(ctx, &agentv1.RunRequest{RunId: req.GetRunId(), Message: "rpc: finished"})
			if status.Code(err) != codes.AlreadyExists {
				t.Errorf("Run on %s with the id of a finished run = %v, want ALREADY_EXISTS", r.name, err)
			}
		}
		after, err := b.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatal(err)
		}
		sameRun(t, "GetRun after the refused runs", after, done)
		if n := tools.Count("rpc-finished"); n != 1 {
			t.Errorf("the tool ran %d times, want 1", n)
		}
		if n := llmRequests(llm, req.GetMessage(), 0); n != 1 {
			t.Errorf("the first turn was asked %d times, want once", n)
		}
		checkEventLog(t, m, req.GetRunId())
	})
}

// sameRun asserts that got is the finished run want: same id, outcome and transcript head.
func sameRun(t *testing.T, what string, got, want *typev1.RunResult) {
	t.Helper()
	if got.GetRunId() != want.GetRunId() || got.GetOutcome() != want.GetOutcome() || transcriptHead(got) != transcriptHead(want) {
		t.Errorf("%s = run %s %s head %s, want run %s %s head %s", what,
			got.GetRunId(), got.GetOutcome(), transcriptHead(got), want.GetRunId(), want.GetOutcome(), transcriptHead(want))
	}
}

// transcriptHead returns the hash of the run's last transcript entry.
func transcriptHead(res *typev1.RunResult) string {
	entries := res.GetTranscript()
	if len(entries) == 0 {
		return ""
	}
	return entries[len(entries)-1].GetHash()
}
