package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDetachedDerivesWithoutGoroutines: a context derived from a detached one has the detached
// one's values, is cancelled with its lifetime, and starts no goroutine to watch it.
func TestDetachedDerivesWithoutGoroutines(t *testing.T) {
	type key struct{}
	until, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	values, stop := context.WithCancel(context.WithValue(t.Context(), key{}, "span"))
	stop() // ended: the detached context still lives
	d := detached{Context: context.WithoutCancel(values), until: until}

	const derived = 100
	before := runtime.NumGoroutine()
	ctxs := make([]context.Context, derived)
	for i := range ctxs {
		ctx, cancel := context.WithTimeout(d, time.Hour)
		defer cancel()
		ctxs[i] = ctx
	}
	if started := runtime.NumGoroutine() - before; started >= derived/2 {
		t.Fatalf("%d contexts derived from a detached one started %d goroutines", derived, started)
	}
	for _, ctx := range ctxs {
		if ctx.Err() != nil || ctx.Value(key{}) != "span" {
			t.Fatalf("derived context: err %v, value %v; want a live context with the detached one's values", ctx.Err(), ctx.Value(key{}))
		}
	}

	drained := errors.New("drain over")
	cancel(drained)
	for _, ctx := range ctxs {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), drained) {
			t.Fatalf("derived context ended by %v; want the lifetime's cause %v", context.Cause(ctx), drained)
		}
	}
}

// TestACheckpointThatCannotBeEncodedIsRepaired: a checkpoint holding text that is not UTF-8
// (a stage's defect, with the stages in process) is stored at once with the text replaced,
// in the run's state too, and the repair logged as an error, instead of being retried until
// the run's deadline.
func TestACheckpointThatCannotBeEncodedIsRepaired(t *testing.T) {
	store, err := runstore.Open(t.Context(), natstest.Connect(t), runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	var logs bytes.Buffer
	r := &run{id: "run-1", svc: &Service{store: store, log: slog.New(slog.NewTextHandler(&logs, nil))}}
	if r.head, err = store.Create(t.Context(), &checkpointv1.RunCheckpoint{RunId: r.id, Phase: checkpointv1.Phase_PHASE_STARTED}); err != nil {
		t.Fatal(err)
	}
	answer := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "a\xffb"}
	cp := &checkpointv1.RunCheckpoint{RunId: r.id, Phase: checkpointv1.Phase_PHASE_READY, Conversation: []*typev1.Message{answer}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if e := r.save(ctx, cp); e != nil {
		t.Fatalf("save ended the run: %+v", *e)
	}
	if ctx.Err() != nil {
		t.Fatal("save retried the checkpoint until the run's deadline")
	}
	if answer.GetContent() != "a\uFFFDb" {
		t.Errorf("the run's message is %q, want it repaired", answer.GetContent())
	}
	stored, _, err := store.Load(t.Context(), r.id)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.GetConversation(); stored.GetPhase() != checkpointv1.Phase_PHASE_READY || len(got) != 1 || got[0].GetContent() != "a\uFFFDb" {
		t.Errorf("stored %s with conversation %v, want READY with the repaired message", stored.GetPhase(), got)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "not UTF-8") {
		t.Errorf("the repair was not logged as an error:\n%s", logs.String())
	}
}
