package dial_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
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

// TestAFailingHandshakeIsLoggedOnce: a connection whose TLS handshake fails at every try, to a
// server of another mesh identity, while a call waits for it, logs the failure once as a
// warning naming the target and the cause, and its other tries as debug lines. Neither the
// connection nor gRPC said anything at the mesh's log level: gRPC logs each try twice, as
// warnings of its own logger, off by default.
func TestAFailingHandshakeIsLoggedOnce(t *testing.T) {
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
	defer g.Stop()

	var logs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	conn, err := dial.New(lis.Addr().String(), dial.WithMesh(meshOf(t, ca, dir, "context")),
		dial.WithPeer("memory"), dial.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err == nil {
		t.Fatal("a server of another mesh identity was taken")
	}
	var warnings, debugs []string
	for line := range strings.Lines(logs.String()) {
		switch {
		case !strings.Contains(line, `msg="TLS handshake failed"`):
		case strings.Contains(line, "level=WARN"):
			warnings = append(warnings, line)
		case strings.Contains(line, "level=DEBUG"):
			debugs = append(debugs, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "target="+lis.Addr().String()) ||
		!strings.Contains(warnings[0], "spiffe://agentmesh/planning") {
		t.Errorf("%d tries logged %d warnings, want one naming the target and the server's identity:\n%s",
			len(debugs)+len(warnings), len(warnings), logs.String())
	}
	if len(debugs) == 0 {
		t.Errorf("the handshake was not tried again in 3 s:\n%s", logs.String())
	}
}
