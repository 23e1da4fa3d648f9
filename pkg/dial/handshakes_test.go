package dial_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// meshOf is the mutual TLS of service, with a certificate of ca written into dir, which
// holds ca's certificate, ca.pem.
func meshOf(t *testing.T, ca *certs.CA, dir, service string) *auth.MeshTLS {
	t.Helper()
	caFile := filepath.Join(dir, "ca.pem")
	pair, err := ca.Write(dir, service, certs.Service(service))
	if err != nil {
		t.Fatal(err)
	}
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: caFile, Cert: pair.Cert, Key: pair.Key}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// failingTarget is the address of a server of the mesh identity planning, whose handshake
// fails for a client that wants memory, and the client's mutual TLS (context's certificate of
// the same CA).
func failingTarget(t *testing.T) (addr string, client *auth.MeshTLS) {
	t.Helper()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.WriteCert(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(meshOf(t, ca, dir, "planning").ServerConfig())))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String(), meshOf(t, ca, dir, "context")
}

// checkUntilFailed makes a health check on a new connection to addr for memory with m, logging
// to log, waiting for the peer until the deadline of ctx, and fails the test if it succeeds.
// It may run in a goroutine of its own.
func checkUntilFailed(ctx context.Context, t *testing.T, addr string, m *auth.MeshTLS, log *slog.Logger) {
	t.Helper()
	conn, err := dial.New(addr, dial.WithMesh(m), dial.WithPeer("memory"), dial.WithLogger(log))
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err == nil {
		t.Error("a server of another mesh identity was taken")
	}
}

// handshakeLines are the lines of logs that log a failed TLS handshake, as warnings and as
// debug lines.
func handshakeLines(logs string) (warnings, debugs []string) {
	for line := range strings.Lines(logs) {
		switch {
		case !strings.Contains(line, `msg="TLS handshake failed"`):
		case strings.Contains(line, "level=WARN"):
			warnings = append(warnings, line)
		case strings.Contains(line, "level=DEBUG"):
			debugs = append(debugs, line)
		}
	}
	return warnings, debugs
}

// TestAFailingHandshakeIsLoggedOnce: a connection whose TLS handshake fails at every try, to a
// server of another mesh identity, while a call waits for it, logs the failure once as a
// warning naming the target and the cause, and its other tries as debug lines. Neither the
// connection nor gRPC said anything at the mesh's log level: gRPC logs each try twice, as
// warnings of its own logger, off by default.
func TestAFailingHandshakeIsLoggedOnce(t *testing.T) {
	addr, m := failingTarget(t)
	var logs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	checkUntilFailed(ctx, t, addr, m, log)
	warnings, debugs := handshakeLines(logs.String())
	if len(warnings) != 1 || !strings.Contains(warnings[0], "target="+addr) ||
		!strings.Contains(warnings[0], "spiffe://agentmesh/planning") {
		t.Errorf("%d tries logged %d warnings, want one naming the target and the server's identity:\n%s",
			len(debugs)+len(warnings), len(warnings), logs.String())
	}
	if len(debugs) == 0 {
		t.Errorf("the handshake was not tried again in 3 s:\n%s", logs.String())
	}
}

// TestConnectionsToOneTargetLogItsFailureOnce: the connections of a process to one target
// (the orchestrator's clients of stages served at one address, pools, replicas), logging to
// one logger, whose handshakes fail for one cause log it once as a warning within
// HandshakeLogInterval, not once per connection: each one's tries are debug lines. A
// connection logging to another logger logs it as a warning there.
func TestConnectionsToOneTargetLogItsFailureOnce(t *testing.T) {
	addr, m := failingTarget(t)
	var logs, otherLogs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { checkUntilFailed(ctx, t, addr, m, log) })
	}
	wg.Go(func() {
		checkUntilFailed(ctx, t, addr, m, slog.New(slog.NewTextHandler(&otherLogs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	})
	wg.Wait()
	warnings, debugs := handshakeLines(logs.String())
	if len(warnings) != 1 || !strings.Contains(warnings[0], "target="+addr) {
		t.Errorf("3 connections tried %d times and logged %d warnings, want one naming the target:\n%s",
			len(debugs)+len(warnings), len(warnings), logs.String())
	}
	if len(debugs) < 2 {
		t.Errorf("3 connections logged %d debug lines, want a try of every one but the first at least:\n%s", len(debugs), logs.String())
	}
	if warnings, _ := handshakeLines(otherLogs.String()); len(warnings) != 1 {
		t.Errorf("a connection logging to another logger logged %d warnings, want one:\n%s", len(warnings), otherLogs.String())
	}
}
