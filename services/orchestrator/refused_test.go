package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestARunRefusedAtItsStartIsNeverResumed: a run created with its caller's id is refused when
// its id's tombstone cannot be read. Its records are discarded even when its caller has gone
// (the request's context ended), and when discarding fails too (the store is out of reach),
// this replica's keeper discards the run instead of resuming it as one of its own. Before, a
// run refused so was resumed later, though its caller was told the store failed.
func TestARunRefusedAtItsStartIsNeverResumed(t *testing.T) {
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	open := func() (*runstore.Store, func()) {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		store, err := runstore.Open(t.Context(), nc, runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return store, func() { store.Close(); nc.Close() }
	}
	store, closeStore := open()
	t.Cleanup(closeStore)
	var logs bytes.Buffer
	s := &Service{store: store, replica: "r1", log: slog.New(slog.NewTextHandler(&logs, nil)), refused: map[string]bool{}}
	create := func(runID string) {
		t.Helper()
		cp := &checkpointv1.RunCheckpoint{RunId: runID, Phase: checkpointv1.Phase_PHASE_STARTED, Replica: s.replica, Request: &agentv1.RunRequest{RunId: runID}}
		if _, err := store.Create(t.Context(), cp); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(runID string) bool {
		_, _, err := store.Load(t.Context(), runID)
		return errors.Is(err, runstore.ErrNotFound)
	}

	create("run-caller-gone")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.checkRetired(ctx, "run-caller-gone"); err == nil {
		t.Fatal("checkRetired with the caller gone = nil, want the failed read of the tombstone")
	}
	if !gone("run-caller-gone") || s.refused["run-caller-gone"] {
		t.Fatalf("a run refused after its caller had gone is still stored (refused %v); logs:\n%s", s.refused, logs.String())
	}

	create("run-store-down")
	down, closeDown := open()
	closeDown() // a store whose every request fails
	s.store = down
	if err := s.checkRetired(t.Context(), "run-store-down"); err == nil {
		t.Fatal("checkRetired with the store out of reach = nil, want an error")
	}
	if gone("run-store-down") || !s.refused["run-store-down"] {
		t.Fatalf("after a refusal whose discarding failed: gone %v, refused %v; want the run stored and refused", gone("run-store-down"), s.refused)
	}
	s.store = store // the store is back: the keeper finds the run among this replica's
	if err := s.resume(t.Context(), "run-store-down", "replica restarted"); err != nil {
		t.Fatalf("resume of the refused run: %v", err)
	}
	if !gone("run-store-down") || s.refused["run-store-down"] {
		t.Fatalf("the keeper did not discard the refused run: gone %v, refused %v; logs:\n%s", gone("run-store-down"), s.refused, logs.String())
	}
}

// TestARunWhoseKeyWasFreedIsDiscarded: a replica that stalled between claiming a run's
// idempotency key and storing the run finds, once it has stored it, that a retry freed the
// key (it had named a run that stored nothing for the claim timeout) and claimed it for a run
// of its own: it discards its run and answers with the one the key names, so one key never
// has two runs.
func TestARunWhoseKeyWasFreedIsDiscarded(t *testing.T) {
	store, err := runstore.Open(t.Context(), natstest.Connect(t), runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Service{store: store, replica: "r1", log: slog.New(slog.DiscardHandler), refused: map[string]bool{}}
	req := &agentv1.RunRequest{RunId: "slow", IdempotencyKey: "k"}
	r := &run{id: "slow", userID: "u", req: req}
	if _, err := store.Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "slow"}); err != nil {
		t.Fatal(err)
	}
	// Meanwhile a retry freed the key and claimed it for its own run.
	if err := store.Unclaim(t.Context(), "u", "k", "slow"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "retried"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(t.Context(), &checkpointv1.RunCheckpoint{RunId: "slow", Phase: checkpointv1.Phase_PHASE_STARTED, Replica: s.replica, Request: req}); err != nil {
		t.Fatal(err)
	}
	var found existingRun
	if err := s.checkClaim(t.Context(), r); !errors.As(err, &found) || found.id != "retried" {
		t.Fatalf("checkClaim of a run whose key names another = %v, want the run the key names", err)
	}
	if _, _, err := store.Load(t.Context(), "slow"); !errors.Is(err, runstore.ErrNotFound) {
		t.Errorf("the run whose key was freed is still stored: Load = %v", err)
	}
	// A run whose key still names it goes on.
	if _, err := store.Create(t.Context(), &checkpointv1.RunCheckpoint{RunId: "retried", Phase: checkpointv1.Phase_PHASE_STARTED, Replica: s.replica, Request: req}); err != nil {
		t.Fatal(err)
	}
	if err := s.checkClaim(t.Context(), &run{id: "retried", userID: "u", req: req}); err != nil {
		t.Errorf("checkClaim of a run its key names = %v", err)
	}
}
