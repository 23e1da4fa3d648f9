package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// replicaMesh is a mesh with two orchestrator replicas, calculator needing approval, and a
// short lease so a handed-off run is adopted quickly.
func replicaMesh(t *testing.T, scenarios ...llmtest.Scenario) *harness {
	return replicaMeshTTL(t, time.Second, scenarios...)
}

// replicaMeshTTL is replicaMesh with a heartbeat TTL of ttl: a test that counts what the keepers
// do takes one that a stalled test machine does not outlast (a replica whose beat comes a TTL
// late loses its runs).
func replicaMeshTTL(t *testing.T, ttl time.Duration, scenarios ...llmtest.Scenario) *harness {
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.LeaseTTLMS = ttl.Milliseconds()
	return startReplicas(t, cfg, 2, nil, scenarios...)
}

func wantCode(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// TestEveryRPCOnEveryReplica starts a run on one replica and serves it entirely from the
// other: a retried Run with the same idempotency key attaches to it, GetRun sees the pause,
// ResolveApproval resumes it, WatchRun follows it to the end, CancelRun answers for it, and a
// run id in use is ALREADY_EXISTS.
func TestEveryRPCOnEveryReplica(t *testing.T) {
	h := replicaMesh(t,
		llmtest.Scenario{Name: "approve", Match: "approve it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}},
		llmtest.Scenario{Name: "cancel", Match: "cancel it", Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("2")}},
	)
	a, b := h.replicas[0], h.replicas[1]
	req := &agentv1.RunRequest{Message: "approve it", RunId: "replicated-run", IdempotencyKey: "key-1"}
	res, err := a.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")

	again, err := b.Run(t.Context(), req)
	if err != nil || again.GetRunId() != "replicated-run" || again.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("Run with the same idempotency key on the other replica = %v %v, %v", again.GetRunId(), again.GetOutcome(), err)
	}
	_, err = b.Run(t.Context(), &agentv1.RunRequest{Message: "approve it", RunId: "replicated-run"})
	wantCode(t, err, codes.AlreadyExists, "Run with a run id in use")
	got, err := b.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "replicated-run"})
	if err != nil || got.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL || got.GetTraceId() != res.GetTraceId() {
		t.Fatalf("GetRun(paused) on the other replica = %v %v, %v", got.GetOutcome(), got.GetTraceId(), err)
	}
	_, err = b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "replicated-run", CallId: "nope", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	wantCode(t, err, codes.NotFound, "ResolveApproval of an unknown call")
	resp, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "replicated-run", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	if err != nil || !resp.GetResumed() {
		t.Fatalf("ResolveApproval on the other replica = %v, %v", resp, err)
	}
	_, err = b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: "replicated-run", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT})
	if c := status.Code(err); c != codes.FailedPrecondition && c != codes.NotFound {
		t.Fatalf("a second decision: %v, want FAILED_PRECONDITION (decided) or NOT_FOUND (resumed already)", err)
	}
	final, kinds := finishOn(t, b, "replicated-run")
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "run_finished") != 1 || count(kinds, "approval_resolved") != 1 {
		t.Fatalf("outcome %s, events %v", final.GetOutcome(), kinds)
	}
	got, err = b.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "replicated-run"})
	if err != nil || got.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("GetRun(finished) on the other replica = %v, %v", got.GetOutcome(), err)
	}
	cancelled, err := b.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "replicated-run"})
	if err != nil || cancelled.GetCancelled() || cancelled.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("CancelRun(finished) = %v, %v", cancelled, err)
	}
	_, err = b.Run(t.Context(), &agentv1.RunRequest{Message: "approve it", RunId: "replicated-run"})
	wantCode(t, err, codes.AlreadyExists, "Run with the id of a finished run")

	// A paused run owned by the first replica is cancelled through the second.
	res, err = a.Run(t.Context(), &agentv1.RunRequest{Message: "cancel it"})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	cancelled, err = b.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: res.GetRunId(), Reason: "changed my mind"})
	if err != nil || !cancelled.GetCancelled() || cancelled.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
		t.Fatalf("CancelRun(paused elsewhere) = %v, %v", cancelled, err)
	}
}

// TestDrainHandsRunsOff stops the replica that owns a paused run as a deploy does: the run
// is handed off, the other replica adopts it, and a decision sent there finishes it, with the
// resumption in its transcript (which still verifies), its events and its trace.
func TestDrainHandsRunsOff(t *testing.T) {
	h := replicaMesh(t, llmtest.Scenario{Name: "approve", Match: "approve it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	a, b := h.replicas[0], h.replicas[1]
	res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: "approve it"})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
	if _, err := a.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); status.Code(err) != codes.Unavailable {
		t.Fatalf("the stopped replica still answers: %v", err)
	}
	if _, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatal(err)
	}
	final, kinds := finishOn(t, b, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", final.GetOutcome(), final.GetExitReason())
	}
	if count(kinds, "run_resumed") != 1 || count(kinds, "run_finished") != 1 || count(kinds, "approval_requested") != 1 {
		t.Errorf("events %v", kinds)
	}
	if final.GetTraceId() != res.GetTraceId() {
		t.Errorf("trace %s after the hand-off, %s before", final.GetTraceId(), res.GetTraceId())
	}
	if !slices.ContainsFunc(final.GetTranscript(), func(e *typev1.TranscriptEntry) bool { return e.GetState() == typev1.RunState_RUN_STATE_RESUMED }) {
		t.Error("the transcript has no RESUMED entry")
	}
	if err := transcript.VerifyResult(final); err != nil {
		t.Errorf("transcript: %v", err)
	}
	if got := toolMessage(t, final, 0); got != "42" {
		t.Errorf("tool message %q", got)
	}
}

// TestRejectionOnAnotherReplicaEndsTheRun (issue 11.7): a rejection with end_run sent to the
// replica that does not own the paused run travels through the run-inputs bucket and ends the
// run USER_REJECTED on its owner; likewise when the owner was stopped and the other replica
// adopts the run from its paused checkpoint. The transcript of the ended run verifies.
func TestRejectionOnAnotherReplicaEndsTheRun(t *testing.T) {
	for _, handOff := range []bool{false, true} {
		name := "owner alive"
		if handOff {
			name = "owner stopped"
		}
		t.Run(name, func(t *testing.T) {
			h := replicaMesh(t, llmtest.Scenario{Name: "reject", Match: "reject it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("never asked")}})
			a, b := h.replicas[0], h.replicas[1]
			res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: "reject it"})
			if err != nil {
				t.Fatal(err)
			}
			paused(t, res, "c1")
			if handOff {
				h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
			}
			resp, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "no", EndRun: yes()})
			if err != nil || !resp.GetResumed() {
				t.Fatalf("ResolveApproval on the other replica = %v, %v", resp, err)
			}
			final, kinds := finishOn(t, b, res.GetRunId())
			checkRejected(t, h, "reject it", final, kinds, "no")
			if got, err := b.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil || transcript.VerifyResult(got) != nil {
				t.Errorf("GetRun(ended) on the other replica = %v; verify: %v", err, transcript.VerifyResult(got))
			}
		})
	}
}

// TestAnIndexEntryDeletedByAnOlderVersionIsDropped: a replica of an older version retired a
// finished run by deleting its entry in its index of active runs, which leaves a marker that
// a listing of the index's subjects still names. The keeper finds the run finished and drops
// the marker, without resuming the run; the index then holds nothing of it.
func TestAnIndexEntryDeletedByAnOlderVersionIsDropped(t *testing.T) {
	cfg := config.Default()
	cfg.Durability.LeaseTTLMS = 1000 // the keeper looks every third of a second
	h := start(t, cfg, llmtest.Scenario{Name: "answer", Match: "hello", Turns: []llmtest.Turn{text("hi")}})
	res := h.run(t, &agentv1.RunRequest{Message: "hello"})
	js := h.jetStream(t)
	ctx := t.Context()
	// The older version's buckets, as its replicas create them.
	active, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyActiveBucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyLeaseBucket, History: 1, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := active.Put(ctx, res.GetRunId(), []byte("old-replica")); err != nil {
		t.Fatal(err)
	}
	if err := active.Delete(ctx, res.GetRunId()); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KV_"+runstore.LegacyActiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	subject := "$KV." + runstore.LegacyActiveBucket + "." + res.GetRunId()
	indexed := func() uint64 {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	if !eventually(t, 10*time.Second, func() bool { return indexed() == 0 }) {
		t.Fatalf("the index still holds %d messages of the finished run", indexed())
	}
	owners, err := js.KeyValue(ctx, runstore.ActiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(t, 10*time.Second, func() bool {
		_, err := owners.Get(ctx, res.GetRunId())
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}) {
		t.Fatal("the run moved to this version's index and stayed there, though it was finished")
	}
	events, _ := h.storedEvents(t, res.GetRunId())
	for _, ev := range events {
		if ev.GetRunResumed() != nil {
			t.Fatalf("the finished run was resumed: %v", ev)
		}
	}
	got, err := h.client.GetRun(ctx, &agentv1.GetRunRequest{RunId: res.GetRunId()})
	if err != nil || got.GetOutcome() != res.GetOutcome() {
		t.Fatalf("GetRun after the keeper's pass = %v, %v; want %v", got.GetOutcome(), err, res.GetOutcome())
	}
}

// TestLivenessCostsOneWriteAReplica (issue 15): a replica keeps its runs its own by beating
// one heartbeat every third of the TTL, not by renewing a lease a run, and the other replica's
// keeper reads a run's owner once, not every pass. With ten runs paused on one replica, the
// store sees, over three passes of both keepers, a write to each replica's heartbeat, none for
// any run, and at most one read of each run's owner (a pass under way when the count began).
func TestLivenessCostsOneWriteAReplica(t *testing.T) {
	h := replicaMeshTTL(t, 3*time.Second, llmtest.Scenario{Name: "pause", Match: "pause *", Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("2")}})
	const runs = 10
	for i := range runs {
		res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: fmt.Sprintf("pause %d", i), RunId: fmt.Sprintf("paused-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		paused(t, res, "c1")
	}
	writes := h.subscribe(t, "$KV.>")
	reads := h.subscribe(t, "$JS.API.DIRECT.GET.KV_"+runstore.ActiveBucket+".>")
	read := map[string]int{}
	heartbeat := "$KV." + runstore.ReplicaBucket + "."
	beats := map[string]int{}
	deadline := time.After(20 * time.Second)
	for min(beats[heartbeat+"orchestrator-1"], beats[heartbeat+"orchestrator-2"]) < 3 {
		select {
		case msg := <-writes:
			if strings.HasPrefix(msg.Subject, heartbeat) {
				beats[msg.Subject]++
			} else if strings.Contains(msg.Subject, "paused-") {
				t.Errorf("a write for a paused run: %s", msg.Subject)
			}
		case msg := <-reads:
			read[msg.Subject]++
		case <-deadline:
			t.Fatalf("heartbeats after 20s: %v; want three of each replica", beats)
		}
	}
	for subject, n := range read {
		if n > 1 {
			t.Errorf("%s was read %d times in three passes, want at most once", subject, n)
		}
	}
}

// TestALapsedHeartbeatStopsTheRunsTakenOver: a replica that stalled past the TTL finds its
// heartbeat lapsed at its next beat; the runs another replica took over meanwhile stop on it
// at once, even one that waits for an approval and would reach no checkpoint to conflict at,
// and the run goes on, once, on the replica that took it. The metrics count the lapse and the
// take-over.
func TestALapsedHeartbeatStopsTheRunsTakenOver(t *testing.T) {
	h := replicaMeshTTL(t, 3*time.Second, llmtest.Scenario{Name: "lapse", Match: "lapse", Turns: []llmtest.Turn{calcTurn("c1", "2+2"), text("4")}})
	const runID = "lapsed"
	res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "lapse", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")

	// orchestrator-1 stalled: its heartbeat expired, and orchestrator-2 took the run over.
	ctx := t.Context()
	h.lapse(t, runID, "orchestrator-2")

	if !eventually(t, 10*time.Second, h.logged(`"replica":"orchestrator-1"`, "run taken over by another replica", runID)) {
		t.Fatal("orchestrator-1 did not stop the run it lost when its heartbeat lapsed")
	}
	if got := h.awaitResumed(t, runID, 10*time.Second); got.GetReplica() != "orchestrator-2" {
		t.Fatalf("run_resumed = %v, want the run resumed on orchestrator-2", got)
	}
	m := h.metrics(t)
	if got := m.Value("agentmesh_replica_heartbeat_lapses_total", nil); got < 1 {
		t.Errorf("agentmesh_replica_heartbeat_lapses_total = %v, want at least 1 (families %s)", got, m)
	}
	if got := m.Value("agentmesh_run_adopted_total", metricstest.Labels{"agentmesh_run_adopt_reason": "replica restarted"}); got != 1 {
		t.Errorf("agentmesh_run_adopted_total{replica restarted} = %v, want 1 (families %s)", got, m)
	}
	if _, err := h.replicas[1].ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: runID, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		for line := range strings.Lines(h.logs.String()) {
			if strings.Contains(line, runID) {
				t.Log(line)
			}
		}
		t.Fatal(err)
	}
	final, kinds := finishOn(t, h.replicas[1], runID)
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "run_finished") != 1 || count(kinds, "approval_resolved") != 1 {
		t.Fatalf("outcome %s, events %v", final.GetOutcome(), kinds)
	}
}

// TestARunTakenJustAfterALapseStopsToo: a keeper that listed the live replicas while a
// replica's heartbeat was missing may take one of its runs after that replica has beaten again
// and found its runs its own; the replica checks again at every beat for two TTLs, and stops
// the run then.
func TestARunTakenJustAfterALapseStopsToo(t *testing.T) {
	h := replicaMeshTTL(t, 3*time.Second, llmtest.Scenario{Name: "late", Match: "late", Turns: []llmtest.Turn{calcTurn("c1", "2+2"), text("4")}})
	const runID = "taken-late"
	res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "late", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	ctx := t.Context()
	h.purgeHeartbeat(t, "orchestrator-1")
	if !eventually(t, 10*time.Second, h.logged(`"replica":"orchestrator-1"`, "heartbeat lapsed")) {
		t.Fatal("orchestrator-1 did not find its heartbeat lapsed")
	}
	// The lapse's first check is over; now a keeper takes the run (unless orchestrator-2's own
	// keeper took it while the heartbeat was missing, and the first check found that).
	owners := h.bucket(t, runstore.ActiveBucket)
	e, err := owners.Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) == "orchestrator-1" {
		if _, err := owners.Update(ctx, runID, []byte("orchestrator-2"), e.Revision()); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(t, 6*time.Second, h.logged(`"replica":"orchestrator-1"`, "run taken over by another replica", runID)) {
		t.Fatal("orchestrator-1 did not stop the run taken from it just after its heartbeat lapsed")
	}
}

// TestARunTakenLateAfterALapseIsFenced: a keeper that listed the replicas while a replica's
// heartbeat was missing may take one of its runs later than the replica's checks after the
// lapse look (lapseWatch). Here orchestrator-1's heartbeat lapsed and its checks are over
// before its run starts; orchestrator-2 then takes the run while it waits for the model, and
// resumes it. When the model answers both, orchestrator-1's answer is refused by the fence
// its runs' events have had since the lapse (events.WithOwner), and its run stops there: the
// run's events hold orchestrator-2's answer only. Without the fence orchestrator-1 published
// its answer among orchestrator-2's events, until its next checkpoint conflicted.
func TestARunTakenLateAfterALapseIsFenced(t *testing.T) {
	hold := make(chan struct{})
	h := replicaMesh(t, llmtest.Scenario{Name: "fenced", Match: "fenced", Turns: []llmtest.Turn{{Content: "4", Hold: hold}}})
	h.purgeHeartbeat(t, "orchestrator-1")
	if !eventually(t, 10*time.Second, h.logged(`"replica":"orchestrator-1"`, "the checks after the heartbeat's lapse are over")) {
		t.Fatal("orchestrator-1 did not find its heartbeat lapsed, or never ended its checks")
	}

	const runID = "fenced"
	done := make(chan error, 1)
	go func() {
		_, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "fenced", RunId: runID})
		done <- err
	}()
	if !eventually(t, 10*time.Second, func() bool { return len(h.llm.Requests()) == 1 }) {
		t.Fatal("the run never asked the model")
	}
	h.takeOver(t, runID, "orchestrator-2")
	h.awaitResumed(t, runID, 10*time.Second)
	if !eventually(t, 10*time.Second, func() bool { return len(h.llm.Requests()) == 2 }) {
		t.Fatal("orchestrator-2 never asked the model again")
	}
	close(hold)

	if !eventually(t, 10*time.Second, h.logged(`"replica":"orchestrator-1"`, "another replica runs the run; it stops here", runID)) {
		t.Fatal("orchestrator-1 did not stop the run another replica took")
	}
	final, kinds := finishOn(t, h.replicas[1], runID)
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || count(kinds, "llm_response") != 1 || count(kinds, "run_finished") != 1 {
		t.Fatalf("outcome %s, events %v; want one llm_response, orchestrator-2's", final.GetOutcome(), kinds)
	}
	<-done // orchestrator-1's caller is told the run moved
}

// TestADrainingReplicasRunsMoveAtOnce: a keeper does not read again the owner of a run it
// knows a live replica owns, but a replica that drains marks itself so, and the other replica
// then reads its runs' owners again: a run handed off moves at the other replica's next pass,
// while the drain still waits for another run (held in its model call), not once the drained
// replica has gone (the TTL is 3 s, a pass every second; the keeper trusts an owner it read
// for 9 passes, and the drain waits 7 s at most). Once the drain is over, the replica's
// heartbeat and draining mark are gone.
func TestADrainingReplicasRunsMoveAtOnce(t *testing.T) {
	hold := make(chan struct{})
	h := replicaMeshTTL(t, 3*time.Second,
		llmtest.Scenario{Name: "drain", Match: "drain", Turns: []llmtest.Turn{calcTurn("c1", "3*3"), text("9")}},
		llmtest.Scenario{Name: "held", Match: "held", Turns: []llmtest.Turn{{Content: "Held.", Hold: hold}}},
	)
	const runID = "drained"
	ctx := t.Context()
	var held sync.WaitGroup
	defer held.Wait()
	held.Go(func() { _, _ = h.replicas[0].Run(ctx, &agentv1.RunRequest{Message: "held", RunId: "held"}) })
	if !eventually(t, 10*time.Second, func() bool { return h.metrics(t).Value("agentmesh_generation_active_requests", nil) == 1 }) {
		t.Fatal("the held run never reached its model")
	}
	reads := h.subscribe(t, "$JS.API.DIRECT.GET.KV_"+runstore.ActiveBucket+".$KV."+runstore.ActiveBucket+"."+runID)
	res, err := h.replicas[0].Run(ctx, &agentv1.RunRequest{Message: "drain", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	select { // orchestrator-2 has read the run's owner: it knows orchestrator-1 owns it
	case <-reads:
	case <-time.After(20 * time.Second):
		t.Fatal("orchestrator-2's keeper never read the run's owner")
	}

	drained := make(chan struct{})
	go func() {
		defer close(drained)
		h.mesh.StopOrchestrator(context.WithoutCancel(ctx), 0)
	}()
	if got := h.awaitResumed(t, runID, 30*time.Second); got.GetReplica() != "orchestrator-2" || got.GetReason() != runstore.HandedOff {
		t.Fatalf("run_resumed = %v, want orchestrator-2 taking over a run handed off", got)
	}
	select {
	case <-drained:
		t.Fatal("the run moved only once its replica's drain was over, not while it drained")
	default:
	}
	close(hold)
	<-drained
	heartbeats := h.bucket(t, runstore.ReplicaBucket)
	for _, key := range []string{"orchestrator-1", "orchestrator-1/draining"} {
		if _, err := heartbeats.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s after the drain: %v; want it removed", key, err)
		}
	}
}

// TestARunHandedOffByALiveReplicaMoves: a replica that lives and does not drain also hands a
// run off, one it could not resume (a checkpoint of a newer release's, during a deploy), and
// the other replicas, which know it owns the run, read the run's owner again within nine
// passes and take it. Here the live replica is "ghost", whose heartbeat the test beats: the
// run, paused on orchestrator-1, becomes ghost's (as when ghost takes it over while
// orchestrator-1's heartbeat lapsed), ghost hands it off once both keepers know it as ghost's,
// and a mesh replica resumes it.
func TestARunHandedOffByALiveReplicaMoves(t *testing.T) {
	h := replicaMesh(t, llmtest.Scenario{Name: "ghost", Match: "ghost", Turns: []llmtest.Turn{calcTurn("c1", "5+5"), text("10")}})
	const runID = "ghosted"
	ctx := t.Context()
	replicas := h.bucket(t, runstore.ReplicaBucket)
	beat := func() {
		if _, err := replicas.Put(ctx, "ghost", nil); err != nil {
			t.Error(err)
		}
	}
	beat()
	beating, stopBeating := context.WithCancel(ctx)
	var beater sync.WaitGroup
	defer beater.Wait()
	defer stopBeating()
	beater.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-beating.Done():
				return
			case <-tick.C:
				_, _ = replicas.Put(context.WithoutCancel(beating), "ghost", nil)
			}
		}
	})
	res, err := h.replicas[0].Run(ctx, &agentv1.RunRequest{Message: "ghost", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")

	// ghost takes the run over while orchestrator-1's heartbeat lapsed: orchestrator-1 stops it.
	owners, rev := h.lapse(t, runID, "ghost")
	if !eventually(t, 10*time.Second, func() bool {
		return strings.Contains(h.logs.String(), "run taken over by another replica")
	}) {
		t.Fatal("orchestrator-1 did not stop the run ghost took")
	}
	// Both keepers have read the run's owner, ghost, once each has made a whole pass since
	// orchestrator-1 beat again (it did before it stopped the run): two beats of each.
	beats := h.subscribe(t, "$KV."+runstore.ReplicaBucket+".*")
	seen := map[string]int{}
	for min(seen["orchestrator-1"], seen["orchestrator-2"]) < 2 {
		select {
		case msg := <-beats:
			seen[strings.TrimPrefix(msg.Subject, "$KV."+runstore.ReplicaBucket+".")]++
		case <-time.After(10 * time.Second):
			t.Fatalf("beats seen: %v; want two of each replica", seen)
		}
	}

	if _, err := owners.Update(ctx, runID, []byte(runstore.HandedOff), rev); err != nil {
		t.Fatal(err)
	}
	resumed := h.awaitResumed(t, runID, 20*time.Second)
	if resumed.GetReason() != runstore.HandedOff {
		t.Fatalf("run_resumed = %v, want a run handed off", resumed)
	}
	by := 0
	if resumed.GetReplica() == "orchestrator-2" {
		by = 1
	}
	if _, err := h.replicas[by].ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: runID, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatal(err)
	}
	final, kinds := finishOn(t, h.replicas[by], runID)
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "run_finished") != 1 {
		t.Fatalf("outcome %s, events %v", final.GetOutcome(), kinds)
	}
}

// lapse makes the run runID, which orchestrator-1 owns, owner's, and purges orchestrator-1's
// heartbeat: owner took the run over while orchestrator-1's heartbeat had lapsed. It returns
// the index of active runs and the run's entry's revision.
func (h *harness) lapse(t *testing.T, runID, owner string) (jetstream.KeyValue, uint64) {
	t.Helper()
	owners, rev := h.takeOver(t, runID, owner)
	h.purgeHeartbeat(t, "orchestrator-1")
	return owners, rev
}

// takeOver makes the run runID, which orchestrator-1 owns, owner's, as a keeper that takes it
// over does. It returns the index of active runs and the run's entry's revision.
func (h *harness) takeOver(t *testing.T, runID, owner string) (jetstream.KeyValue, uint64) {
	t.Helper()
	ctx := t.Context()
	owners := h.bucket(t, runstore.ActiveBucket)
	e, err := owners.Get(ctx, runID)
	if err != nil || string(e.Value()) != "orchestrator-1" {
		t.Fatalf("the run's owner = %v, %v; want orchestrator-1", e, err)
	}
	rev, err := owners.Update(ctx, runID, []byte(owner), e.Revision())
	if err != nil {
		t.Fatal(err)
	}
	return owners, rev
}

// purgeHeartbeat removes replica's heartbeat from the store, as its expiry would.
func (h *harness) purgeHeartbeat(t *testing.T, replica string) {
	t.Helper()
	heartbeats, err := h.jetStream(t).Stream(t.Context(), "KV_"+runstore.ReplicaBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := heartbeats.Purge(t.Context(), jetstream.WithPurgeSubject("$KV."+runstore.ReplicaBucket+"."+replica)); err != nil {
		t.Fatal(err)
	}
}

// logged returns a condition for eventually: whether one line the mesh logged holds every one
// of parts.
func (h *harness) logged(parts ...string) func() bool {
	return func() bool {
		for line := range strings.Lines(h.logs.String()) {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return true
			}
		}
		return false
	}
}

// awaitResumed returns the run's last run_resumed event once there is one, within timeout.
func (h *harness) awaitResumed(t *testing.T, runID string, timeout time.Duration) *eventv1.RunResumed {
	t.Helper()
	stream, err := h.jetStream(t).Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var ev eventv1.RunEvent
	if !eventually(t, timeout, func() bool {
		msg, err := stream.GetLastMsgForSubject(t.Context(), events.Subject(runID, "run_resumed"))
		return err == nil && proto.Unmarshal(msg.Data, &ev) == nil
	}) {
		t.Fatalf("run %s was not resumed within %s", runID, timeout)
	}
	return ev.GetRunResumed()
}

// TestAReplicaNameInUseIsReported: two processes that share a replica name each take the
// other's runs for their own; a replica whose heartbeat another process beats says so in an
// error naming the variable to change. Here the test beats orchestrator-1's heartbeat.
func TestAReplicaNameInUseIsReported(t *testing.T) {
	h := replicaMesh(t)
	heartbeats := h.bucket(t, runstore.ReplicaBucket)
	reported := h.logged(`"level":"ERROR"`, "another orchestrator process uses this replica's name", "AGENTMESH_REPLICA", `"replica":"orchestrator-1"`)
	if !eventually(t, 10*time.Second, func() bool {
		if _, err := heartbeats.Put(t.Context(), "orchestrator-1", nil); err != nil {
			t.Fatal(err)
		}
		return reported()
	}) {
		t.Fatal("orchestrator-1 did not report that another process beats its name")
	}
}

// TestLostHeartbeatsAdoptNothing: when the store loses the heartbeats (NATS came back without
// its store, or keeps losing it), every replica still lives, and none adopts another's run
// for it: a replica adopts nothing while the store lists no heartbeat of its own, nor until its
// beats have gone a TTL without trouble, by when the others have beaten again. The test purges
// every heartbeat ten times a second for a TTL while a run waits on orchestrator-1 for an
// approval, then waits until orchestrator-2 has beaten for two TTLs more, and finds the run
// still orchestrator-1's, never resumed. A replica that adopted whenever the run's owner had
// no heartbeat would take it during the purges.
func TestLostHeartbeatsAdoptNothing(t *testing.T) {
	const ttl = 3 * time.Second
	h := replicaMeshTTL(t, ttl, llmtest.Scenario{Name: "lost", Match: "lost", Turns: []llmtest.Turn{calcTurn("c1", "4*4"), text("16")}})
	const runID = "lost-heartbeats"
	ctx := t.Context()
	res, err := h.replicas[0].Run(ctx, &agentv1.RunRequest{Message: "lost", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	heartbeats, err := h.jetStream(t).Stream(ctx, "KV_"+runstore.ReplicaBucket)
	if err != nil {
		t.Fatal(err)
	}
	purge := time.NewTicker(100 * time.Millisecond)
	defer purge.Stop()
	for end := time.Now().Add(ttl); time.Now().Before(end); <-purge.C {
		if err := heartbeats.Purge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	beats := h.subscribe(t, "$KV."+runstore.ReplicaBucket+".orchestrator-2")
	for range 6 { // a beat a third of the TTL: two TTLs
		select {
		case <-beats:
		case <-time.After(10 * time.Second):
			t.Fatal("orchestrator-2 stopped beating")
		}
	}
	e, err := h.bucket(t, runstore.ActiveBucket).Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if owner := string(e.Value()); owner != "orchestrator-1" {
		t.Fatalf("the run's owner is %q; want orchestrator-1 still", owner)
	}
	stream, err := h.jetStream(t).Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, events.Subject(runID, "run_resumed")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("run_resumed: %v; want none", err)
	}
}

// TestDecisionInTimeIsTaken: an approval taken before the pause's expires_at (ResolveApproval
// said resumed) is the run's, though the run gets it only after the deadline passed: here it
// was recorded while no replica owned the paused run, which a replica adopts only after the
// pause expired (pauses of 6 s, a lease of 12 s: the replicas look for runs to adopt every 4 s). The run
// executes the approved call and completes, never APPROVAL_TIMEOUT. A decision that comes
// after expires_at is refused NOT_FOUND, and that run ends APPROVAL_TIMEOUT: the caller is
// never told resumed for a decision the run will not take.
func TestDecisionInTimeIsTaken(t *testing.T) {
	const runs = 4 // approved in time; one more is decided late
	var scenarios []llmtest.Scenario
	for i := range runs + 1 {
		scenarios = append(scenarios, llmtest.Scenario{Name: fmt.Sprint(i), Match: fmt.Sprintf("Multiply batch %d.", i),
			Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	}
	h := replicaMeshTTL(t, 12*time.Second, scenarios...)
	a, b := h.replicas[0], h.replicas[1]
	var paused []*typev1.RunResult
	for i := range runs + 1 {
		// Pauses of 6 s leave time to approve on a loaded machine and expire before the lease;
		// the late run's of 1.5 s keeps the test short.
		timeout := int64(6000)
		if i == runs {
			timeout = 1500
		}
		res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: fmt.Sprintf("Multiply batch %d.", i),
			Overrides: &agentv1.RunOverrides{ApprovalTimeoutMs: i64(timeout)}})
		if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
			t.Fatalf("run %d: %v, %v; want a pause", i, res.GetOutcome(), err)
		}
		paused = append(paused, res)
	}
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0) // hands the paused runs off
	approve := func(res *typev1.RunResult) (*agentv1.ResolveApprovalResponse, error) {
		return b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	}
	for _, res := range paused[:runs] {
		if resp, err := approve(res); err != nil || !resp.GetResumed() {
			t.Fatalf("ResolveApproval before the pause expired = %v, %v", resp, err)
		}
	}
	late := paused[runs]
	<-time.NewTimer(time.Until(late.GetPendingAction().GetExpiresAt().AsTime())).C // the pause's own deadline
	_, err := approve(late)
	if status.Code(err) != codes.NotFound {
		t.Errorf("ResolveApproval after the pause expired: %v, want NOT_FOUND", err)
	}
	for i, res := range paused {
		final, kinds := finishOn(t, b, res.GetRunId())
		want, exit := typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED"
		if i == runs {
			want, exit = typev1.Outcome_OUTCOME_REJECTED, orchestrator.ExitApprovalTimeout
		}
		if final.GetOutcome() != want || final.GetExitReason() != exit {
			t.Errorf("run %d: %s %s (%v), events %v; want %s %s", i, final.GetOutcome(), final.GetExitReason(), final.GetError().GetMessage(), kinds, want, exit)
		}
	}
}
