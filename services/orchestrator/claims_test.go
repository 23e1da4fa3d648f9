package orchestrator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

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
// replica's connection may not read the idempotency bucket, so that its read of the claim
// waits until the deadline, while the run's checkpoint is read at once (none).
func TestAKeyReadPastTheCallersDeadlineIsNoStorageError(t *testing.T) {
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
	if _, err := open("admin").Claim(t.Context(), "u", "k", runstore.KeyClaim{RunID: "not-yet-stored"}); err != nil {
		t.Fatal(err)
	}
	s := &Service{store: open("replica"), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = s.awaitStored(ctx, existingRun{id: "not-yet-stored", userID: "u", key: "k"})
	if code := stageerr.FromError(err).Code; code == typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("awaitStored past the caller's deadline = %v (%s); want the context's error", err, code)
	}
}
