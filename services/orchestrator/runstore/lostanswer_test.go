package runstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestASaveWhoseAnswerWasLost: a checkpoint write that NATS stored but whose answer the
// connection lost (it dropped, and the client reconnected) fails; the owner saves again from
// the same head, and that save must go on after its own write, not take it for another
// replica's and report a conflict, which stopped the run on its own replica as one taken over.
func TestASaveWhoseAnswerWasLost(t *testing.T) {
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	proxy := natstest.NewCutter(t, srv.ClientURL()[len("nats://"):])
	nc, err := nats.Connect(proxy.URL(),
		nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := runstore.Open(t.Context(), nc, runstore.Config{
		Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := t.Context()
	h, err := s.Create(ctx, checkpoint("lost", checkpointv1.Phase_PHASE_STARTED, 0))
	if err != nil {
		t.Fatal(err)
	}

	proxy.Arm("$KV." + runstore.CheckpointBucket + ".")
	short, cancel := context.WithTimeout(ctx, time.Second)
	err = s.Save(short, checkpoint("lost", checkpointv1.Phase_PHASE_READY, 1), h)
	cancel()
	<-proxy.Cut()
	if err == nil {
		t.Fatal("Save whose answer was lost = nil, want an error")
	}
	eventually(t, "the write whose answer was lost is stored", func() bool {
		cp, err := s.State(ctx, "lost")
		return err == nil && cp.GetTurns() == 1
	})

	if err := s.Save(ctx, checkpoint("lost", checkpointv1.Phase_PHASE_READY, 2), h); err != nil {
		if errors.Is(err, runstore.ErrConflict) {
			t.Fatalf("Save after its own write whose answer was lost = %v: "+
				"its own write taken for another replica's", err)
		}
		t.Fatalf("Save after its own write whose answer was lost = %v, want nil", err)
	}
	cp, got, err := s.Load(ctx, "lost")
	if err != nil || cp.GetTurns() != 2 || got.Revision() != h.Revision() {
		t.Fatalf("Load = turn %d at rev %d, %v; want turn 2 at rev %d",
			cp.GetTurns(), got.Revision(), err, h.Revision())
	}
	// A replica that took the run over meanwhile still conflicts with the owner's next save.
	_, stale, err := s.Load(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, checkpoint("lost", checkpointv1.Phase_PHASE_READY, 3), stale); err != nil {
		t.Fatal(err)
	}
	err = s.Save(ctx, checkpoint("lost", checkpointv1.Phase_PHASE_READY, 9), h)
	if !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Save over another writer's checkpoint = %v, want ErrConflict", err)
	}
}
