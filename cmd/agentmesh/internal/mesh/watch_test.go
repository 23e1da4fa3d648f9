package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestWatchRunOnTheOwnerGetsALargeResultWhole watches, on the replica that runs it, a run
// whose result is too large for one NATS message, so that the stream's run_finished leaves the
// result out: the watcher, following the run live as it finishes, gets the whole result all
// the same. Before, the replica read the result back with GetRun, which found the run still
// live (it publishes its result to its callers after its run_finished event) and answered
// FAILED_PRECONDITION, and the watcher got run_finished with result_omitted and no result.
func TestWatchRunOnTheOwnerGetsALargeResultWhole(t *testing.T) {
	const size = 1_500_000 // over NATS's default payload limit (1 MB)
	hold := make(chan struct{})
	h := start(t, nil, llmtest.Scenario{Name: "large", Match: "large history*", Turns: []llmtest.Turn{{Content: "read it all", Hold: hold}}})
	history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "large history:" + strings.Repeat(" all work and no play", size/21)}}
	req := &agentv1.RunRequest{
		RunId: "watched-large", Message: "Summarise the history.", History: history,
		Overrides: &agentv1.RunOverrides{ContextWindow: proto.Int64(4 * size)},
	}
	ran := make(chan error, 1)
	go func() {
		_, err := h.client.Run(t.Context(), req)
		ran <- err
	}()
	if !eventually(t, 30*time.Second, func() bool { return len(h.llm.Requests()) > 0 }) {
		t.Fatal("the run never asked the model")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := h.client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: req.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the watch follows the run now
		t.Fatal(err)
	}
	close(hold)
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch ended before run_finished: %v", err)
		}
		fin := ev.GetRunFinished()
		if fin == nil {
			continue
		}
		if fin.GetResultOmitted() || fin.GetResult().GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || len(fin.GetResult().GetConversation()) < 2 {
			t.Fatalf("run_finished: result_omitted %v, outcome %s, %d messages; want the whole result",
				fin.GetResultOmitted(), fin.GetResult().GetOutcome(), len(fin.GetResult().GetConversation()))
		}
		break
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestWatchRunOfARunWhoseEventsAreGone watches a retired run whose events the stream no longer
// keeps (nats.stream_max_age_ms shorter than durability.idempotency_ttl_ms, which its tombstone
// lives, or nats.stream_max_bytes): WatchRun is NOT_FOUND at once, as for a run whose tombstone
// is gone too, while GetRun still returns the result. Before, the tombstone let the watch begin,
// and it waited for good for a run_finished that would never come.
func TestWatchRunOfARunWhoseEventsAreGone(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "hello", RunId: "forgotten-run"})
	if !eventually(t, 10*time.Second, func() bool { return len(h.keys(t, runstore.CheckpointBucket)) == 0 }) {
		t.Fatal("the run was not retired")
	}
	stream, err := h.jetStream(t).Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// What the stream's limits do to a run's events once they are old enough.
	if err := stream.Purge(t.Context(), jetstream.WithPurgeSubject(events.Subject(res.GetRunId(), ">"))); err != nil {
		t.Fatal(err)
	}
	if got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil || got.GetOutcome() != res.GetOutcome() {
		t.Fatalf("GetRun = %v, %v; want %v", got.GetOutcome(), err, res.GetOutcome())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	watch, err := h.client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: res.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := watch.Recv()
	wantCode(t, err, codes.NotFound, fmt.Sprintf("WatchRun of a retired run without events (got event %v)", ev))
}

// TestWatchRunSaysTheRunsStartIsGone watches a run whose first events the stream no longer
// keeps (nats.stream_max_age_ms or nats.stream_max_bytes dropped them while the run was paused
// or still going): a watch from its start is FAILED_PRECONDITION naming the first seq kept and
// the from_seq to watch from, and a watch from there follows the run. Before, the watch began
// at the first event kept, mid-run, without a word of what came before.
func TestWatchRunSaysTheRunsStartIsGone(t *testing.T) {
	hello := llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}}
	h := start(t, nil, hello)
	res := h.run(t, &agentv1.RunRequest{Message: "hello", RunId: "started-long-ago"})
	stream, err := h.jetStream(t).Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// What the stream's limits do to a run's oldest events once they are old enough.
	startedOn := events.Subject(res.GetRunId(), "run_started")
	started, err := stream.GetLastMsgForSubject(t.Context(), startedOn)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(t.Context(), started.Sequence); err != nil {
		t.Fatal(err)
	}
	watch := func(from uint64) ([]*eventv1.RunEvent, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req := &agentv1.WatchRunRequest{RunId: res.GetRunId(), FromSeq: from}
		w, err := h.client.WatchRun(ctx, req)
		if err != nil {
			return nil, err
		}
		var got []*eventv1.RunEvent
		for {
			ev, err := w.Recv()
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, ev)
		}
	}
	got, err := watch(0)
	wantCode(t, err, codes.FailedPrecondition, fmt.Sprintf(
		"WatchRun from the start of a run whose start is gone (after %d events)", len(got)))
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "before seq 2") ||
		!strings.Contains(msg, "from_seq 1") {
		t.Errorf("WatchRun's error = %q; want it to name the first seq kept (2) and from_seq 1",
			msg)
	}
	// A client reads the from_seq from the status's ErrorInfo detail, not from its message,
	// whatever the message says.
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if d, ok := d.(*errdetails.ErrorInfo); ok {
			info = d
		}
	}
	if info.GetReason() != events.ReasonStartLost || info.GetMetadata()["from_seq"] != "1" {
		t.Errorf("WatchRun's error has ErrorInfo %v; want reason %s with from_seq 1",
			info, events.ReasonStartLost)
	}
	reworded, derr := status.New(codes.FailedPrecondition, "reworded").WithDetails(info)
	if derr != nil {
		t.Fatal(derr)
	}
	if cause, from, ok := events.LostStart(reworded.Err()); !ok || from != 1 ||
		!strings.Contains(cause, "before seq 2") {
		t.Errorf("LostStart of the reworded error = %q, %d, %v; want the cause of seq 2, "+
			"from_seq 1", cause, from, ok)
	}
	got, err = watch(1)
	if err != nil || len(got) == 0 || got[0].GetSeq() != 2 ||
		got[len(got)-1].GetRunFinished() == nil {
		t.Fatalf("WatchRun from_seq 1 = %d events, %v; want the run from seq 2 to run_finished",
			len(got), err)
	}
}

// TestStreamRunAgainEndsAtAPauseTakenOver: StreamRun repeated with the idempotency key of a
// paused run ends at the pause the run waits in also once another replica took the run over
// (its owner was deployed): the run's last event is then run_resumed, at the pause, not
// approval_requested. Before, the call streamed on until someone decided, up to
// approval_timeout_ms, as it did on the run's own replica before the pause was made to end it.
func TestStreamRunAgainEndsAtAPauseTakenOver(t *testing.T) {
	h := replicaMesh(t, llmtest.Scenario{Name: "pause", Match: "pause, move and reconnect", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	a, b := h.replicas[0], h.replicas[1]
	req := &agentv1.RunRequest{Message: "pause, move and reconnect", IdempotencyKey: "reconnect-elsewhere"}
	kinds := func(c agentv1.AgentServiceClient) ([]string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		stream, err := c.StreamRun(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		var runID string
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return ks, runID, nil
			}
			if err != nil {
				return ks, runID, err
			}
			ks, runID = append(ks, events.Kind(ev)), ev.GetRunId()
		}
	}
	first, runID, err := kinds(a)
	if err != nil || first[len(first)-1] != "approval_requested" {
		t.Fatalf("StreamRun = %v, %v; want it to end at approval_requested", first, err)
	}
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
	if resumed := h.awaitResumed(t, runID, 30*time.Second); resumed.GetPhase() != "awaiting_approval" {
		t.Fatalf("resumed at %q, want awaiting_approval", resumed.GetPhase())
	}
	again, againID, err := kinds(b)
	if err != nil || againID != runID || again[len(again)-1] != "run_resumed" || count(again, "approval_requested") != 1 {
		t.Fatalf("StreamRun again on the replica that took the run over = %v (run %s), %v; want the run's events to its run_resumed at the pause",
			again, againID, err)
	}
	if _, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: runID, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatal(err)
	}
	if done, _, err := kinds(b); err != nil || done[len(done)-1] != "run_finished" {
		t.Errorf("StreamRun after the decision = %v, %v; want the run to run_finished", done, err)
	}
}
