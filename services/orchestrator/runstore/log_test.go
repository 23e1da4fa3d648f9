package runstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// growing is a run whose checkpoints grow: each turn adds an assistant message, a tool
// message, transcript and accounting entries.
type growing struct {
	cp    *checkpointv1.RunCheckpoint
	chain *transcript.Chain
}

func newGrowing(id string) *growing {
	g := &growing{cp: checkpoint(id, checkpointv1.Phase_PHASE_STARTED, 0), chain: transcript.NewChain("v", "p")}
	g.cp.Request = &agentv1.RunRequest{Message: "go"}
	g.cp.Conversation = []*typev1.Message{{Role: typev1.Role_ROLE_SYSTEM, Content: "be brief"}, {Role: typev1.Role_ROLE_USER, Content: "go"}}
	return g
}

// turn adds a turn of about size bytes.
func (g *growing) turn(size int) {
	g.cp.Turns++
	g.cp.Phase = checkpointv1.Phase_PHASE_READY
	n := g.cp.Turns
	g.cp.Conversation = append(g.cp.Conversation,
		&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: fmt.Sprintf("turn %d", n)},
		&typev1.Message{Role: typev1.Role_ROLE_TOOL, Content: strings.Repeat("r", size)})
	g.chain.Append(typev1.RunState_RUN_STATE_COMMIT, fmt.Sprint(n), "c", nil, nil, "", g.cp.Conversation)
	g.cp.Transcript = g.chain.Shared()
	g.cp.Accounting = append(g.cp.Accounting, &typev1.AccountingEntry{Model: "m", Command: fmt.Sprint(n)})
}

// equalRun reports how got differs from want in what the log holds.
func equalRun(t *testing.T, got, want *checkpointv1.RunCheckpoint) {
	t.Helper()
	for name, pair := range map[string][2]proto.Message{
		"request":  {got.GetRequest(), want.GetRequest()},
		"contract": {got.GetContract(), want.GetContract()},
	} {
		if !proto.Equal(pair[0], pair[1]) {
			t.Errorf("%s = %.200v, want %.200v", name, pair[0], pair[1])
		}
	}
	eq := func(name string, n, m int, at func(int) (proto.Message, proto.Message)) {
		if n != m {
			t.Errorf("%d %s, want %d", n, name, m)
			return
		}
		for i := range n {
			if a, b := at(i); !proto.Equal(a, b) {
				t.Errorf("%s[%d] = %.200v, want %.200v", name, i, a, b)
			}
		}
	}
	eq("messages", len(got.GetConversation()), len(want.GetConversation()), func(i int) (proto.Message, proto.Message) {
		return got.GetConversation()[i], want.GetConversation()[i]
	})
	eq("transcript entries", len(got.GetTranscript()), len(want.GetTranscript()), func(i int) (proto.Message, proto.Message) {
		return got.GetTranscript()[i], want.GetTranscript()[i]
	})
	eq("accounting entries", len(got.GetAccounting()), len(want.GetAccounting()), func(i int) (proto.Message, proto.Message) {
		return got.GetAccounting()[i], want.GetAccounting()[i]
	})
	eq("tools", len(got.GetAvailable()), len(want.GetAvailable()), func(i int) (proto.Message, proto.Message) {
		return got.GetAvailable()[i], want.GetAvailable()[i]
	})
}

// TestCheckpointLog saves a run turn after turn: each checkpoint entry stays small however long
// the run gets (what a turn adds is written once, in the run's log), a message changed in place
// is written again, the request, contract and tools once, and Load (on another replica) puts
// the run back together exactly.
func TestCheckpointLog(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("long")
	h, err := s.Create(ctx, g.cp)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, runstore.CheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	g.cp.Contract = &typev1.ExecutionContract{ContractHash: "c", ParentContractHash: "p"}
	g.cp.Available = []*typev1.Tool{{Name: "search", Description: strings.Repeat("d", 2000)}}
	for turn := range 60 {
		if turn != 30 {
			g.turn(3000)
		} else {
			// The XML transport's XML-PAST message grows in place, after it was stored in a
			// segment (it is larger than a checkpoint's tail).
			g.turn(40 << 10)
			past := g.cp.Conversation[len(g.cp.Conversation)-1]
			if err := s.Save(ctx, g.cp, h); err != nil {
				t.Fatal(err)
			}
			past.Content += " and more"
		}
		if err := s.Save(ctx, g.cp, h); err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, "long")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(e.Value()); n > 16<<10 {
			t.Fatalf("turn %d: the checkpoint entry is %d bytes; a turn adds about 3 KiB", turn+1, n)
		}
	}
	cp, other, err := s.Load(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if cp.GetTurns() != 60 || cp.GetLog() != nil || other.Revision() != h.Revision() {
		t.Fatalf("Load = turn %d, log %v, rev %d; want turn 60 at rev %d", cp.GetTurns(), cp.GetLog(), other.Revision(), h.Revision())
	}
	equalRun(t, cp, g.cp)
	if err := transcript.Verify(cp.GetTranscript()); err != nil {
		t.Fatal(err)
	}
	if st, err := s.State(ctx, "long"); err != nil || st.GetTurns() != 60 || len(st.GetConversation()) != 0 || st.GetContract() != nil {
		t.Fatalf("State = turn %d, %d messages, contract %v, %v; want turn 60 without the log", st.GetTurns(), len(st.GetConversation()), st.GetContract(), err)
	}

	// The replica that loaded it goes on from its head: only the new turn is written.
	cp.Conversation = append(cp.Conversation, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "done"})
	cp.Turns++
	if err := s.Save(ctx, cp, other); err != nil {
		t.Fatal(err)
	}
	again, _, err := s.Load(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	equalRun(t, again, cp)
	// The first owner lost the run: its write is refused and leaves nothing behind.
	g.turn(40 << 10)
	if err := s.Save(ctx, g.cp, h); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Save of a run another replica advanced = %v, want ErrConflict", err)
	}
	if again, _, err = s.Load(ctx, "long"); err != nil || len(again.GetConversation()) != len(cp.GetConversation()) {
		t.Fatalf("Load after a refused write = %d messages, %v; want %d", len(again.GetConversation()), err, len(cp.GetConversation()))
	}

	// Retired, the run's log is gone.
	if err := s.Save(ctx, checkpoint("long", checkpointv1.Phase_PHASE_FINISHED, 61), other); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, "long", nil); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, runstore.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("agentmesh.checkpoint.>"))
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("the log holds %d segments after Retire (%v), want none", info.State.Msgs, err)
	}
}

// TestCheckpointLogCrash writes log segments that no checkpoint names, as a replica that
// stopped between the two writes leaves them: Load ignores them. A segment the checkpoint
// names that is missing makes the checkpoint corrupt, not silently shorter.
func TestCheckpointLogCrash(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("crash")
	h, err := s.Create(ctx, g.cp)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		g.turn(4000)
		if err := s.Save(ctx, g.cp, h); err != nil {
			t.Fatal(err)
		}
	}
	orphan, err := proto.Marshal(&checkpointv1.LogSegment{RunId: "crash", Messages: []*typev1.Message{{Content: "never committed"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, runstore.SegmentSubject("crash"), orphan); err != nil {
		t.Fatal(err)
	}
	cp, _, err := s.Load(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	equalRun(t, cp, g.cp)

	st, err := js.Stream(ctx, runstore.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctx, 1)
	if err != nil || first.Subject != runstore.SegmentSubject("crash") {
		t.Fatalf("first log message = %v, %v", first, err)
	}
	if err := st.DeleteMsg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(ctx, "crash"); err == nil || errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Load of a checkpoint whose log lost a segment = %v, want an error", err)
	}
}

// TestCheckpointVersion1 reads a checkpoint written by a build that kept the whole run in
// it, and goes on from it.
func TestCheckpointVersion1(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("old")
	g.turn(100)
	g.cp.Version = 1
	data, err := proto.Marshal(g.cp)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, runstore.CheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "old", data); err != nil {
		t.Fatal(err)
	}
	cp, h, err := s.Load(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	equalRun(t, cp, g.cp)
	cp.Conversation = append(cp.Conversation, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "on"})
	if err := s.Save(ctx, cp, h); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Load(ctx, "old")
	if err != nil || got.GetVersion() != runstore.Version {
		t.Fatalf("Load = version %d, %v", got.GetVersion(), err)
	}
	equalRun(t, got, cp)
}

// TestCheckpointReadWhileRetired reads a run's checkpoint while its owner finishes the run and
// retires it, removing the log the checkpoint read first names: the reader reads the
// checkpoint again, and gets the finished one, not an error.
func TestCheckpointReadWhileRetired(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("racing")
	h, err := s.Create(ctx, g.cp)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		g.turn(4000)
		if err := s.Save(ctx, g.cp, h); err != nil {
			t.Fatal(err)
		}
	}
	retired := false
	cp, err := s.Await(ctx, "racing", func(cp *checkpointv1.RunCheckpoint) bool {
		if !retired { // between reading the checkpoint and reading its log
			retired = true
			tomb := checkpoint("racing", checkpointv1.Phase_PHASE_FINISHED, 10)
			tomb.ResultSaved = true
			if err := s.Save(ctx, tomb, h); err != nil {
				t.Error(err)
			}
			if err := s.Retire(ctx, "racing", nil); err != nil {
				t.Error(err)
			}
		}
		return true
	})
	if err != nil || !cp.GetResultSaved() {
		t.Fatalf("Await while the run was retired = %v, %v; want the finished checkpoint", cp, err)
	}
}

// TestCheckpointTombstone writes a finished run's last checkpoint, which keeps nothing of the
// run, after a checkpoint whose log holds the request and messages but no transcript: it names
// no segment, so it still loads once the run's log is removed.
func TestCheckpointTombstone(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("short")
	g.cp.Conversation = append(g.cp.Conversation, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("u", 20<<10)})
	h, err := s.Create(ctx, g.cp)
	if err != nil {
		t.Fatal(err)
	}
	tomb := checkpoint("short", checkpointv1.Phase_PHASE_FINISHED, 0)
	tomb.ResultSaved = true
	if err := s.Save(ctx, tomb, h); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, "short", nil); err != nil {
		t.Fatal(err)
	}
	cp, _, err := s.Load(ctx, "short")
	if err != nil || !cp.GetResultSaved() || cp.GetRequest() != nil || len(cp.GetConversation()) != 0 {
		t.Fatalf("Load of the tombstone = %v, %v; want it without the run", cp, err)
	}
}

// TestRetireSkipsALogNothingWrote (issue 15): a run that went from Create to its end without a
// log segment is retired without the log's requests to JetStream; one that wrote a segment,
// even in a write that was refused, or whose head was loaded, has its log purged.
func TestRetireSkipsALogNothingWrote(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	// The requests are delivered to a channel by the connection's reader as they arrive, so
	// once a flush returns every request published before it is in the channel. (A callback
	// subscription runs its callback later, on a goroutine of its own: a request could still
	// be on its way when the flush returned, which failed this test on a loaded machine.)
	requests := make(chan *nats.Msg, 1024)
	sub, err := js.Conn().ChanSubscribe("$JS.API.>", requests)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// flushed returns the subjects of the requests delivered so far.
	flushed := func() []string {
		t.Helper()
		if err := js.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		var subjects []string
		for {
			select {
			case m := <-requests:
				subjects = append(subjects, m.Subject)
			default:
				return subjects
			}
		}
	}
	// logRequests retires id at h and returns the requests to the log stream it made.
	logRequests := func(id string, h *runstore.Head) []string {
		t.Helper()
		flushed()
		if err := s.Retire(ctx, id, h); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, subject := range flushed() {
			if strings.Contains(subject, runstore.LogStream) {
				out = append(out, subject)
			}
		}
		return out
	}
	finish := func(id string, h *runstore.Head, turns int32) {
		t.Helper()
		if err := s.Save(ctx, checkpoint(id, checkpointv1.Phase_PHASE_FINISHED, turns), h); err != nil {
			t.Fatal(err)
		}
	}

	short := newGrowing("short")
	h, err := s.Create(ctx, short.cp)
	if err != nil {
		t.Fatal(err)
	}
	short.turn(100)
	if err := s.Save(ctx, short.cp, h); err != nil {
		t.Fatal(err)
	}
	finish("short", h, 2)
	if got := logRequests("short", h); len(got) != 0 {
		t.Errorf("retiring a run that never wrote its log made %v", got)
	}

	long := newGrowing("long")
	h, err = s.Create(ctx, long.cp)
	if err != nil {
		t.Fatal(err)
	}
	long.turn(20 << 10) // more than a checkpoint keeps itself: a segment
	if err := s.Save(ctx, long.cp, h); err != nil {
		t.Fatal(err)
	}
	finish("long", h, 2)
	if got := logRequests("long", h); len(got) == 0 {
		t.Error("retiring a run that wrote a segment did not purge its log")
	}

	refused := newGrowing("refused")
	h, err = s.Create(ctx, refused.cp)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := s.Load(ctx, "refused")
	if err != nil {
		t.Fatal(err)
	}
	refused.turn(100)
	if err := s.Save(ctx, refused.cp, other); err != nil { // another replica goes on
		t.Fatal(err)
	}
	refused.turn(20 << 10)
	if err := s.Save(ctx, refused.cp, h); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Save of a run another replica advanced = %v, want ErrConflict", err)
	}
	finish("refused", other, 3)
	if got := logRequests("refused", h); len(got) == 0 {
		t.Error("retiring at a head whose refused write appended a segment did not purge the log")
	}
	if got := logRequests("refused", other); len(got) == 0 {
		t.Error("retiring at a loaded head did not purge the log")
	}

	st, err := js.Stream(ctx, runstore.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("agentmesh.checkpoint.>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the log holds %d messages after every run retired, want none", info.State.Msgs)
	}
}
