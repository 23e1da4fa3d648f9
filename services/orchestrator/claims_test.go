package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAKeyReadPastTheCallersDeadlineIsNoStorageError: a request whose idempotency key names a
// run not yet stored reads the key's claim; when the caller's deadline passes during that
// read, the request ends with the caller's own context error, as every other read of the
// store does (storeErr), not STORAGE_ERROR, which tells the caller the store failed. The
// replica's read of the claim waits until the deadline (keysUnread), while the run's
// checkpoint is read at once (none).
// keysUnread starts a NATS server and returns two stores on it: admin's, which may do
// anything, and a replica's, whose connection may not read the idempotency bucket (its reads
// of a key's claim wait until their context ends), and reads everything else.
func keysUnread(t *testing.T) (admin, replica *runstore.Store) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		DontListen: true, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{
			{Username: "admin", Password: "admin"},
			{Username: "replica", Password: "replica", Permissions: &server.Permissions{Publish: &server.SubjectPermission{
				Allow: []string{">"}, Deny: []string{"$JS.API.DIRECT.GET.KV_" + runstore.IdempotencyBucket + ".>"},
			}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS is not ready")
	}
	open := func(user string) *runstore.Store {
		t.Helper()
		nc, err := nats.Connect("", nats.InProcessServer(srv), nats.UserInfo(user, user), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		store, err := runstore.Open(t.Context(), nc, runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		return store
	}
	return open("admin"), open("replica")
}

func TestAKeyReadPastTheCallersDeadlineIsNoStorageError(t *testing.T) {
	admin, replica := keysUnread(t)
	if _, err := admin.Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "not-yet-stored"}); err != nil {
		t.Fatal(err)
	}
	s := &Service{store: replica, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := s.awaitStored(ctx, existingRun{id: "not-yet-stored", userID: "u", key: "k"})
	if code := stageerr.FromError(err).Code; code == typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("awaitStored past the caller's deadline = %v (%s); want the context's error", err, code)
	}
}

// TestARunWhoseKeyCouldNotBeReadIsDiscarded: a run created with an idempotency key reads the
// key again once stored (checkClaim); when that read fails, the caller is told the store
// failed, and the run must go: it stayed stored, owned by its replica, whose keeper resumed it
// as its own at its next pass, a run its caller was told had failed, which a retry with the
// key (freed meanwhile) would start a second time. It is discarded (or, when that fails
// too, refused, for the keeper to discard).
func TestARunWhoseKeyCouldNotBeReadIsDiscarded(t *testing.T) {
	admin, replica := keysUnread(t)
	s := &Service{store: replica, replica: "r1", log: slog.New(slog.DiscardHandler), refused: map[string]bool{}}
	req := &agentv1.RunRequest{IdempotencyKey: "k"}
	if _, err := admin.Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "unread"}); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Create(t.Context(), &checkpointv1.RunCheckpoint{RunId: "unread", Phase: checkpointv1.Phase_PHASE_STARTED, Replica: s.replica, Request: req}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := s.checkClaim(ctx, &run{id: "unread", userID: "u", req: req}); err == nil {
		t.Fatal("checkClaim whose read of the key failed = nil; want the failure")
	}
	if _, _, err := admin.Load(t.Context(), "unread"); !errors.Is(err, runstore.ErrNotFound) && !s.refused["unread"] {
		t.Errorf("the run whose key could not be read is still stored (Load = %v), and not refused", err)
	}
}
