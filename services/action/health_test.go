package action_test

import (
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/action"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestNotServingWithoutTheLedger: every call reads and writes the call ledger before its tool
// runs, so an action stage whose ledger's NATS server is down runs no call (each is refused
// UNAVAILABLE). Its gRPC health says so, NOT_SERVING, for callers' balancers and readiness
// probes to move to replicas that can run calls, and SERVING again once NATS is back.
func TestNotServingWithoutTheLedger(t *testing.T) {
	port := grpctest.FreePort(t) // below the ephemeral range: nothing takes it while NATS is down
	store := t.TempDir()
	nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Shutdown)
	svc, err := action.New(action.Options{Ledger: kvLedger(t, nats, action.KVLedgerOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Name: "action", Addr: "127.0.0.1:0", Health: svc, Logger: slog.New(slog.DiscardHandler)})
	svc.Register(srv.GRPC())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	health := grpctest.HealthClient(t, srv.Addr())

	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	nats.Shutdown()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	nats, err = events.StartEmbedded(events.EmbeddedOptions{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Shutdown)
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
}
