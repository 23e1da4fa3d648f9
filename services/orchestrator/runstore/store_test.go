package runstore_test

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open starts an embedded NATS server and opens a Store on it (lease TTL ttl).
func open(t *testing.T, ttl time.Duration) (*runstore.Store, jetstream.JetStream) {
	t.Helper()
	return openConfig(t, runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: ttl, IdempotencyTTL: time.Hour})
}

// openConfig starts an embedded NATS server and opens a Store on it with cfg.
func openConfig(t *testing.T, cfg runstore.Config) (*runstore.Store, jetstream.JetStream) {
	t.Helper()
	nc := natstest.Connect(t)
	s, err := runstore.Open(t.Context(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // ends the inputs' watch (goleak, TestMain)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func checkpoint(id string, phase checkpointv1.Phase, turns int32) *checkpointv1.RunCheckpoint {
	return &checkpointv1.RunCheckpoint{RunId: id, Phase: phase, Turns: turns, UserId: "u"}
}

// running stores a first checkpoint of each run: inputs go to runs the store holds (an input
// of a run without a checkpoint is ErrNotFound).
func running(t *testing.T, s *runstore.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := s.Create(t.Context(), checkpoint(id, checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
			t.Fatal(err)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCheckpointsAreCompareAndSet(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	h, err := s.Create(ctx, checkpoint("r1", checkpointv1.Phase_PHASE_STARTED, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, checkpoint("r1", checkpointv1.Phase_PHASE_STARTED, 0)); !errors.Is(err, runstore.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	_, stale, err := s.Load(ctx, "r1") // a second replica's view of the same revision
	if err != nil || stale.Revision() != h.Revision() {
		t.Fatalf("Load = rev %d, %v; want rev %d", stale.Revision(), err, h.Revision())
	}
	if err := s.Save(ctx, checkpoint("r1", checkpointv1.Phase_PHASE_READY, 1), h); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, checkpoint("r1", checkpointv1.Phase_PHASE_READY, 9), stale); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Save with a stale revision = %v, want ErrConflict", err)
	}
	cp, got, err := s.Load(ctx, "r1")
	if err != nil || got.Revision() != h.Revision() || cp.GetTurns() != 1 || cp.GetPhase() != checkpointv1.Phase_PHASE_READY || cp.GetVersion() != runstore.Version {
		t.Fatalf("Load = %v rev %d, %v; want turn 1 at rev %d", cp, got.Revision(), err, h.Revision())
	}
	if _, _, err := s.Load(ctx, "nope"); !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Load(unknown) = %v, want ErrNotFound", err)
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 1 || ids[0] != "r1" {
		t.Fatalf("Active = %v, %v", ids, err)
	}
	if err := s.Retire(ctx, "r1", nil); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("Active after Retire = %v, %v", ids, err)
	}
}

// TestRetiredRunsLeaveNothingToList (issue 15.3): every replica's keeper lists the active runs
// every third of the lease TTL, so the index must hold the runs not yet finished and nothing of
// those that finished: a retired run's entry is purged, leaving no delete marker behind.
func TestRetiredRunsLeaveNothingToList(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	for _, id := range []string{"done-1", "open", "done-2"} {
		if _, err := s.Create(ctx, checkpoint(id, checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"done-1", "done-2"} {
		if err := s.Retire(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 1 || ids[0] != "open" {
		t.Fatalf("Active = %v, %v; want [open]", ids, err)
	}
	stream, err := js.Stream(ctx, "KV_"+runstore.ActiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the active index's stream holds %d messages, want 1: the retired runs left markers", info.State.Msgs)
	}
}

// TestLargeCheckpoints stores checkpoints above the NATS payload limit (1 MB) through the
// object store: a large message in a log segment's body, a large result in the checkpoint's,
// replaced by the next checkpoint; retiring the run removes them all.
func TestLargeCheckpoints(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	big := checkpoint("big", checkpointv1.Phase_PHASE_READY, 1)
	big.Conversation = []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("x", 3<<20)}}
	h, err := s.Create(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	big.Turns = 2
	big.Conversation[0].Content += "y"
	if err := s.Save(ctx, big, h); err != nil {
		t.Fatal(err)
	}
	cp, _, err := s.Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if msgs := cp.GetConversation(); cp.GetTurns() != 2 || len(msgs) != 1 ||
		len(msgs[0].GetContent()) != 3<<20+1 {
		t.Fatalf("Load = turn %d, %d messages, want turn 2 and one message of %d bytes",
			cp.GetTurns(), len(msgs), 3<<20+1)
	}
	bodies, err := js.ObjectStore(ctx, runstore.BodyBucket)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		objs, err := bodies.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d bodies stored, want the two segments'", n)
	}
	fin := checkpoint("big", checkpointv1.Phase_PHASE_FINISHED, 2)
	fin.Conversation, fin.Result = big.Conversation, &typev1.RunResult{Conversation: big.Conversation}
	if err := s.Save(ctx, fin, h); err != nil {
		t.Fatal(err)
	}
	fin.Result.Conversation[0].Content += "z"
	if err := s.Save(ctx, fin, h); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d bodies stored, want the three segments' and the latest checkpoint's", n)
	}
	if cp, _, err = s.Load(ctx, "big"); err != nil || len(cp.GetResult().GetConversation()[0].GetContent()) != 3<<20+2 {
		t.Fatalf("Load of the finished run = %v", err)
	}
	if err := s.Save(ctx, checkpoint("big", checkpointv1.Phase_PHASE_FINISHED, 2), h); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, "big", nil); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d bodies left after Retire, want none", n)
	}
}

// TestOwners: a run's entry among the active runs names the replica that created it; only
// its owner hands it off, and one replica, of those that read the same revision, takes it over.
func TestOwners(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	cp := checkpoint("r1", checkpointv1.Phase_PHASE_STARTED, 0)
	cp.Replica = "a"
	if _, err := s.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	owner := func(want string) uint64 {
		t.Helper()
		got, rev, err := s.Owner(ctx, "r1")
		if err != nil || got != want {
			t.Fatalf("Owner = %q, %v; want %q", got, err, want)
		}
		return rev
	}
	owner("a")
	if err := s.HandOff(ctx, "r1", "b"); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("HandOff by a replica that does not own the run = %v, want ErrConflict", err)
	}
	if err := s.HandOff(ctx, "r1", "a"); err != nil {
		t.Fatal(err)
	}
	rev := owner(runstore.HandedOff)
	if err := s.TakeOver(ctx, "r1", "b", rev); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeOver(ctx, "r1", "c", rev); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("TakeOver at a revision another replica took over = %v, want ErrConflict", err)
	}
	owner("b")
	if err := s.Retire(ctx, "r1", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Owner(ctx, "r1"); !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Owner of a retired run = %v, want ErrNotFound", err)
	}
	if err := s.HandOff(ctx, "r1", "b"); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("HandOff of a retired run = %v, want ErrConflict", err)
	}
}

// TestHeartbeats: a replica is alive while it beats, and draining while it marks itself so,
// until it leaves; a heartbeat not beaten for the TTL lapses, and the next beat after it says so; a beat after
// another process beat the same name says that.
func TestHeartbeats(t *testing.T) {
	s, js := open(t, time.Second)
	ctx := t.Context()
	alive := func() map[string]bool {
		t.Helper()
		m, _, err := s.Alive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first, err := s.Beat(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Beat(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if got := alive(); !got["a"] || !got["b"] || len(got) != 2 {
		t.Fatalf("Alive = %v, want a and b", got)
	}
	if err := s.MarkDraining(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, draining, err := s.Alive(ctx); err != nil || len(got) != 2 || !draining["b"] || len(draining) != 1 {
		t.Fatalf("Alive after b marked itself draining = %v, draining %v, %v; want a and b alive, b draining", got, draining, err)
	}
	if err := s.Leave(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, draining, err := s.Alive(ctx); err != nil || len(got) != 1 || !got["a"] || len(draining) != 0 {
		t.Fatalf("Alive after b left = %v, draining %v, %v; want a alone", got, draining, err)
	}
	lost, err := s.Beat(ctx, "a", first)
	if err != nil {
		t.Fatal(err)
	}
	// A beat whose answer was lost, though it was stored: the next beat, at the revision
	// before it, finds this process's own heartbeat and beats after it.
	next, err := s.Beat(ctx, "a", first)
	if err != nil || next <= lost {
		t.Fatalf("Beat after its own beat whose answer was lost = %d, %v; want a beat after %d", next, err, lost)
	}
	// Another process beating the same name (another orchestrator with the same replica name).
	other, err := runstore.Open(ctx, js.Conn(), runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Second, IdempotencyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	if _, err := other.Beat(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Beat(ctx, "a", next); !errors.Is(err, runstore.ErrNameTaken) {
		t.Fatalf("Beat at a revision another process's beat of the name replaced = %v, want ErrNameTaken", err)
	}
	eventually(t, "the unbeaten heartbeats lapse", func() bool { return len(alive()) == 0 })
	if _, err := s.Beat(ctx, "a", next); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Beat after the heartbeat lapsed = %v, want ErrConflict", err)
	}
	if _, err := s.Beat(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if got := alive(); !got["a"] || len(got) != 1 {
		t.Fatalf("Alive = %v, want a", got)
	}
}

// TestAdoptLegacy: runs an earlier release indexed, with a lease a run, move to this release's
// index once their lease is gone; a run whose lease lives stays its replica's.
func TestAdoptLegacy(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	if moved, err := s.AdoptLegacy(ctx, "new"); err != nil || len(moved) != 0 {
		t.Fatalf("AdoptLegacy without an earlier release's buckets = %v, %v", moved, err)
	}
	active, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyActiveBucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyLeaseBucket, History: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]struct{ note, lease string }{
		"expired": {note: "old"},
		"handed":  {note: runstore.HandedOff},
		"held":    {note: "old", lease: "old"},
		"ours":    {note: "new", lease: "new"}, // this replica's, from before it restarted
	}
	for id, r := range runs {
		if _, err := s.Create(ctx, checkpoint(id, checkpointv1.Phase_PHASE_READY, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Retire(ctx, id, nil); err != nil { // indexed by the earlier release only
			t.Fatal(err)
		}
		if _, err := active.Put(ctx, id, []byte(r.note)); err != nil {
			t.Fatal(err)
		}
		if r.lease != "" {
			if _, err := leases.Put(ctx, id, []byte(r.lease)); err != nil {
				t.Fatal(err)
			}
		}
	}
	moved, err := s.AdoptLegacy(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"expired": "lease expired", "handed": runstore.HandedOff, "ours": "lease expired"}
	if !maps.Equal(moved, want) {
		t.Fatalf("AdoptLegacy = %v, want %v", moved, want)
	}
	for id := range want {
		if owner, _, err := s.Owner(ctx, id); err != nil || owner != "new" {
			t.Errorf("Owner(%s) = %q, %v; want new", id, owner, err)
		}
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 3 {
		t.Errorf("Active = %v, %v; want the three moved runs", ids, err)
	}
	for bucket, kv := range map[string]jetstream.KeyValue{"active": active, "leases": leases} {
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for k := range keys.Keys() {
			left = append(left, k)
		}
		if !slices.Equal(left, []string{"held"}) {
			t.Errorf("the earlier release's %s bucket holds %v, want [held]", bucket, left)
		}
	}
}

func TestIdempotencyKeys(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	if _, err := s.Claim(ctx, "u", "k", runstore.KeyClaim{RunID: "r1", Request: "print1"}); err != nil {
		t.Fatal(err)
	}
	if existing, err := s.Claim(ctx, "u", "k", runstore.KeyClaim{RunID: "r2", Request: "print2"}); !errors.Is(err, runstore.ErrExists) || existing.RunID != "r1" || existing.Request != "print1" {
		t.Fatalf("second Claim = %+v, %v; want r1's claim, ErrExists", existing, err)
	}
	if c, err := s.Claimed(ctx, "u", "k"); err != nil || c.RunID != "r1" || c.Request != "print1" || c.At.IsZero() {
		t.Fatalf("Claimed = %+v, %v; want r1's claim", c, err)
	}
	if _, err := s.Claim(ctx, "other user", "k", runstore.KeyClaim{RunID: "r3"}); err != nil {
		t.Fatalf("the same key of another user: %v", err)
	}
	if c, err := s.Claimed(ctx, "other user", "k"); err != nil || c.RunID != "r3" || c.Request != "" {
		t.Fatalf("Claimed of a claim without a fingerprint = %+v, %v; want r3 alone", c, err)
	}
	if err := s.Unclaim(ctx, "u", "k", "r2"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "u", "k", runstore.KeyClaim{RunID: "r4"}); !errors.Is(err, runstore.ErrExists) || c.RunID != "r1" {
		t.Fatalf("Unclaim of another run's key removed it: Claim = %+v, %v", c, err)
	}
	if err := s.Unclaim(ctx, "u", "k", "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "u", "k", runstore.KeyClaim{RunID: "r5"}); err != nil {
		t.Fatalf("Claim after Unclaim = %v, want the key free", err)
	}
}

// TestUnclaimReportsAKeyItCouldNotRead: an Unclaim whose read of the key fails (NATS is away)
// reports the failure; it returned nil, and its caller logged the key freed when it was not.
func TestUnclaimReportsAKeyItCouldNotRead(t *testing.T) {
	nc := natstest.Connect(t)
	s, err := runstore.Open(t.Context(), nc, runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := s.Unclaim(t.Context(), "u", "k", "r1"); err == nil {
		t.Fatal("Unclaim over a closed connection = nil; want its failure")
	}
}

func TestInputs(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	running(t, s, "r1")
	approve := &agentv1.ResolveApprovalRequest{RunId: "r1", CallId: "call/1 ü", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
	if err := s.Decide(ctx, approve, "acme/ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.Decide(ctx, approve, "acme/bob"); !errors.Is(err, runstore.ErrExists) {
		t.Fatalf("a second decision = %v, want ErrExists", err)
	}
	in := watchInputs(ctx, s, "r1")
	next := func() runstore.Input { t.Helper(); return nextInput(t, in) }
	if got := next(); !proto.Equal(got.Decision, approve) || got.By != "acme/ann" {
		t.Fatalf("first input %v by %q, want the recorded decision by acme/ann", got.Decision, got.By)
	}
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "r1", Reason: "stop"}, "acme/boss"); err != nil {
		t.Fatal(err)
	}
	if got := next(); got.Cancel.GetReason() != "stop" || got.By != "acme/boss" {
		t.Fatalf("second input %v by %q, want the cancellation by acme/boss", got.Cancel, got.By)
	}
	// An input recorded after the cancellation is stored, but it is not the run's: the run
	// takes the cancellation first. Another cancellation does not move the first.
	answer := &agentv1.AnswerRequest{RunId: "r1", QuestionId: "turn-2", Answer: "use the cache"}
	if err := s.Answer(ctx, answer, ""); !errors.Is(err, runstore.ErrCancelled) {
		t.Fatalf("an answer after the cancellation = %v, want ErrCancelled", err)
	}
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "r1"}, "acme/ann"); err != nil {
		t.Fatalf("a second cancellation = %v", err)
	}
	if got, err := s.Answered(ctx, "r1", "turn-2"); !errors.Is(err, runstore.ErrCancelled) ||
		!proto.Equal(got.Answer, answer) {
		t.Fatalf("Answered = %v, %v; want the answer, ErrCancelled", got.Answer, err)
	}
	if got, err := s.Decided(ctx, "r1", "call/1 ü"); err != nil || got.By != "acme/ann" {
		t.Fatalf("Decided, before the cancellation = %v by %q, %v", got.Decision, got.By, err)
	}
	if err := s.Answer(ctx, answer, ""); !errors.Is(err, runstore.ErrExists) {
		t.Fatalf("a second answer = %v, want ErrExists", err)
	}
	if got := next(); !proto.Equal(got.Answer, answer) || got.Decision != nil || got.By != "" {
		t.Fatalf("third input %v by %q, want the answer of no known origin", got, got.By)
	}
	// A release before origins were stored reads a decision as the request it wrote: the
	// origin is a field the request reserves.
	kv, err := js.KeyValue(ctx, runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "r1.approval."+hex.EncodeToString([]byte("call/1 ü")))
	if err != nil {
		t.Fatal(err)
	}
	earlier := &agentv1.ResolveApprovalRequest{}
	if err := proto.Unmarshal(e.Value(), earlier); err != nil {
		t.Fatalf("the stored decision, read as a request: %v", err)
	}
	if len(earlier.ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("the stored decision holds no origin")
	}
	earlier.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(earlier, approve) {
		t.Fatalf("the stored decision, read as a request: %v, want %v", earlier, approve)
	}
	if decided, err := s.Decisions(ctx, "r1"); err != nil || !proto.Equal(decided["call/1 ü"], approve) || len(decided) != 1 {
		t.Fatalf("Decisions = %v, %v", decided, err)
	}
	if err := s.Retire(ctx, "r1", nil); err != nil {
		t.Fatal(err)
	}
	if decided, err := s.Decisions(ctx, "r1"); err != nil || len(decided) != 0 {
		t.Fatalf("Decisions after Retire = %v, %v", decided, err)
	}
}

// nextInput returns the next input delivered on in, failing t when none comes within 10 s.
func nextInput(t *testing.T, in <-chan runstore.Input) runstore.Input {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case got := <-in:
		return got
	case <-timer.C:
		t.Fatal("no input delivered within 10 s")
		return runstore.Input{}
	}
}

// watchInputs subscribes to runID's inputs and returns them on a channel (WatchInputs hands
// them over one at a time, and must not wait: the channel holds more than a test records).
func watchInputs(ctx context.Context, s *runstore.Store, runID string) <-chan runstore.Input {
	in := make(chan runstore.Input, 16)
	s.WatchInputs(ctx, runID, func(got runstore.Input) { in <- got })
	return in
}

// TestRetireDropsEveryInput: retiring a run removes its inputs from the bucket, those no watch
// of this replica ever saw included (recorded by another replica, or too late), and purge
// markers with them; another run's inputs stay.
func TestRetireDropsEveryInput(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	running(t, s, "r1", "r2")
	for _, run := range []string{"r1", "r2"} {
		if err := s.Decide(ctx, &agentv1.ResolveApprovalRequest{RunId: run, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Answer(ctx, &agentv1.AnswerRequest{RunId: run, QuestionId: "q", Answer: "yes"}, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: run, Reason: "stop"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	if got := nextInput(t, watchInputs(watchCtx, s, "r1")); got.Decision == nil && got.Answer == nil && got.Cancel == nil {
		t.Fatalf("r1's first input %v", got) // the watch has recorded r1's inputs
	}
	stopWatching()
	if err := s.Retire(ctx, "r1", nil); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	left := func(run string) int {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("$KV."+runstore.InputBucket+"."+run+".>"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects)
	}
	if n := left("r1"); n != 0 {
		t.Errorf("r1 retired with %d subjects of inputs left in the bucket, want none", n)
	}
	if n := left("r2"); n != 3 {
		t.Errorf("r2, not retired, has %d subjects of inputs, want 3", n)
	}
	if err := s.Retire(ctx, "r2", nil); err != nil { // no watch ever saw r2's inputs
		t.Fatal(err)
	}
	if n := left("r2"); n != 0 {
		t.Errorf("r2 retired with %d subjects of inputs left, want none", n)
	}
}

// TestBucketsComeBack deletes the buckets, as a NATS restarted with an empty store loses
// them: the store creates them again on the next use.
func TestBucketsComeBack(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	h, err := s.Create(ctx, checkpoint("r0", checkpointv1.Phase_PHASE_STARTED, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{runstore.CheckpointBucket, runstore.ReplicaBucket, runstore.ActiveBucket} {
		if err := js.DeleteKeyValue(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Beat(ctx, "a", 0); err != nil {
		t.Fatalf("Beat after the buckets were lost: %v", err)
	}
	if _, err := s.Create(ctx, checkpoint("r1", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatalf("Create after the buckets were lost: %v", err)
	}
	// The owner of a run whose checkpoint was lost writes it again from its own state.
	if err := s.Save(ctx, checkpoint("r0", checkpointv1.Phase_PHASE_READY, 1), h); err != nil {
		t.Fatalf("Save of a lost checkpoint: %v", err)
	}
	if cp, _, err := s.Load(ctx, "r0"); err != nil || cp.GetTurns() != 1 {
		t.Fatalf("Load = %v, %v", cp, err)
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 2 {
		t.Fatalf("Active = %v, %v; want both runs indexed again", ids, err)
	}
}

// TestCreateWhenOnlyTheOwnersBucketIsGone: Create writes the checkpoint, then the run's entry
// among the active runs; when only that second bucket is missing (its stream without a leader
// for a moment, or another replica's store creating it again), the write goes again once the
// buckets are back and must not then fail on its own checkpoint. It answered ErrExists for a
// new run id, and the run's caller was told the id was taken while its checkpoint stayed,
// indexed nowhere and never retired.
func TestCreateWhenOnlyTheOwnersBucketIsGone(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	if err := js.DeleteKeyValue(ctx, runstore.ActiveBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, checkpoint("fresh", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatalf("Create of a new run id while the owners' bucket was gone = %v", err)
	}
	if _, _, err := s.Load(ctx, "fresh"); err != nil {
		t.Errorf("Load = %v", err)
	}
	if ids, err := s.Active(ctx); err != nil || !slices.Equal(ids, []string{"fresh"}) {
		t.Errorf("Active = %v, %v; want the run indexed", ids, err)
	}
}

// TestRunsShareOneInputWatch (issue 15.3): the runs of a replica watch their inputs through one
// JetStream consumer, not one each, and each run gets only its own inputs, those recorded
// before it watched first.
func TestRunsShareOneInputWatch(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	const runs = 20
	for i := range runs {
		running(t, s, fmt.Sprintf("run-%d", i))
	}
	if err := s.Answer(ctx, &agentv1.AnswerRequest{RunId: "run-0", QuestionId: "q", Answer: "early"}, ""); err != nil {
		t.Fatal(err)
	}
	subs := make([]<-chan runstore.Input, runs)
	for i := range subs {
		subs[i] = watchInputs(ctx, s, fmt.Sprintf("run-%d", i))
	}
	if got := nextInput(t, subs[0]); got.Answer.GetAnswer() != "early" {
		t.Fatalf("run-0's first input %v, want the answer recorded before it watched", got)
	}
	for i := range runs {
		if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: fmt.Sprintf("run-%d", i), Reason: fmt.Sprint(i)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, sub := range subs {
		if got := nextInput(t, sub); got.Cancel.GetReason() != fmt.Sprint(i) {
			t.Fatalf("run-%d's input %v, want its own cancellation", i, got)
		}
	}
	stream, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 1 {
		t.Errorf("%d consumers of the inputs bucket for %d watching runs, want 1", n, runs)
	}
}

// TestTheInputWatchOutlivesItsLastRun (issue 15): runs one after another share the watch of
// their inputs too, rather than make and delete a JetStream consumer each: the watch ends a
// linger after the last run stopped watching, or when the store closes.
func TestTheInputWatchOutlivesItsLastRun(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	consumers := func() []string {
		stream, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for name := range stream.ConsumerNames(ctx).Name() {
			names = append(names, name)
		}
		return names
	}
	running(t, s, "r1", "r2", "r3")
	watchOne := func(runID string) context.CancelFunc {
		rctx, stop := context.WithCancel(ctx)
		in := watchInputs(rctx, s, runID)
		if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: runID, Reason: "stop"}, ""); err != nil {
			t.Fatal(err)
		}
		if got := nextInput(t, in); got.Cancel.GetRunId() != runID {
			t.Fatalf("%s's input %v, want its cancellation", runID, got)
		}
		return stop
	}

	watchOne("r1")()
	first := consumers()
	if len(first) != 1 {
		t.Fatalf("consumers of the inputs bucket after a run: %v, want the watch's", first)
	}
	stop := watchOne("r2")
	if got := consumers(); !slices.Equal(got, first) {
		t.Fatalf("the next run's watch is consumer %v, want the first run's %v", got, first)
	}
	runstore.SetWatchLinger(s, time.Millisecond)
	stop()
	eventually(t, "the watch ends a linger after the last run", func() bool { return len(consumers()) == 0 })

	watchOne("r3")
	s.Close()
	eventually(t, "the watch ends with the store", func() bool { return len(consumers()) == 0 })
}

// TestLoadOfACheckpointReplacedWhileRead: a reader that found a checkpoint whose body its owner
// deletes while it reads it (a finished run's result, deleted as the run is retired, read by
// another replica's GetRun) reads the checkpoint that replaced it, instead of waiting for a
// body that is gone and failing.
func TestLoadOfACheckpointReplacedWhileRead(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	h, err := s.Create(ctx, checkpoint("retiring", checkpointv1.Phase_PHASE_READY, 1))
	if err != nil {
		t.Fatal(err)
	}
	fin := checkpoint("retiring", checkpointv1.Phase_PHASE_FINISHED, 1)
	fin.Result = &typev1.RunResult{Conversation: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("x", 2<<20)}}}
	if err := s.Save(ctx, fin, h); err != nil {
		t.Fatal(err)
	}
	// The body's chunks go and its description stays: a reader now waits for chunks that never
	// come, as one does whose body is deleted while it reads it.
	objects, err := js.Stream(ctx, "OBJ_"+runstore.BodyBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := objects.Purge(ctx, jetstream.WithPurgeSubject("$O."+runstore.BodyBucket+".C.>")); err != nil {
		t.Fatal(err)
	}
	type loaded struct {
		cp  *checkpointv1.RunCheckpoint
		err error
	}
	got := make(chan loaded, 1)
	go func() {
		cp, _, err := s.Load(ctx, "retiring")
		got <- loaded{cp, err}
	}()
	eventually(t, "the reader reads the body", func() bool { // through a consumer of the object store's stream
		info, err := objects.Info(ctx)
		return err == nil && info.State.Consumers > 0
	})
	tomb := checkpoint("retiring", checkpointv1.Phase_PHASE_FINISHED, 1)
	tomb.ResultSaved = true
	if err := s.Save(ctx, tomb, h); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || !r.cp.GetResultSaved() || r.cp.GetResult() != nil {
		t.Fatalf("Load while the checkpoint was replaced = %v, %v; want the checkpoint that replaced it", r.cp, r.err)
	}
}

// TestBeatingReadsOneHeartbeatNow: Beating reports a heartbeat beaten since the keeper listed
// the live replicas, and none for a replica that never beat or whose heartbeat expired.
func TestBeatingReadsOneHeartbeatNow(t *testing.T) {
	s, _ := open(t, time.Second)
	ctx := t.Context()
	if beating, err := s.Beating(ctx, "a"); err != nil || beating {
		t.Fatalf("Beating before any beat = %t, %v; want false", beating, err)
	}
	if _, err := s.Beat(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if beating, err := s.Beating(ctx, "a"); err != nil || !beating {
		t.Fatalf("Beating after a beat = %t, %v; want true", beating, err)
	}
	eventually(t, "the heartbeat expires", func() bool {
		beating, err := s.Beating(ctx, "a")
		return err == nil && !beating
	})
}

// TestInputsComeInTheirOrder: a run that starts watching its inputs (a replica adopts it) gets
// those recorded before, in the order they were recorded, as the watch hands on later ones: a
// run takes no input recorded after its cancellation, so one handed over before the
// cancellation although recorded after it would have been taken.
func TestInputsComeInTheirOrder(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	running(t, s, "r0", "r1")
	r0 := watchInputs(ctx, s, "r0") // the replica's watch runs, and records r1's inputs
	var want []string
	for i := range 6 {
		id := fmt.Sprintf("call-%d", i)
		d := &agentv1.ResolveApprovalRequest{RunId: "r1", CallId: id,
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
		if err := s.Decide(ctx, d, ""); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "r1"}, ""); err != nil {
		t.Fatal(err)
	}
	want = append(want, "cancel")
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "r0"}, ""); err != nil {
		t.Fatal(err)
	}
	nextInput(t, r0) // recorded after r1's: the watch has them
	in := watchInputs(ctx, s, "r1")
	var got []string
	for range want {
		next := nextInput(t, in)
		got = append(got, cmp.Or(next.Decision.GetCallId(), "cancel"))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("inputs handed over in the order %v, want %v", got, want)
	}
}

// TestAwaitEndsWithItsContext: a wait whose context ends returns the context's error, though
// its checkpoint watch, which ends with the context, may have closed by the time it looks:
// it said "the checkpoint watch ended" (UNAVAILABLE to a caller) about as often as not.
func TestAwaitEndsWithItsContext(t *testing.T) {
	s, _ := open(t, time.Minute)
	if _, err := s.Create(t.Context(), checkpoint("waited", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		ctx, cancel := context.WithCancel(t.Context())
		_, err := s.Await(ctx, "waited", func(*checkpointv1.RunCheckpoint) bool {
			cancel()
			// Leaves the watch time to close before the wait looks, which the failure needs; the
			// fixed wait returns the context's error whichever it sees first.
			time.Sleep(time.Millisecond)
			return false
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Await whose context ended = %v, want context.Canceled", err)
		}
	}
}
