package mesh_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc"
)

// TestTheOrchestratorsHandshakesLogToTheMesh: with mutual TLS, a failed handshake of the
// orchestrator with a stage (here one at an address of StageAddrs that speaks no TLS) is
// logged to the mesh's logger, as the orchestrator's ("service": "orchestrator"), as the other
// services' failed handshakes are; it went to slog's default logger, outside the mesh's log.
func TestTheOrchestratorsHandshakesLogToTheMesh(t *testing.T) {
	pki := meshproc.NewPKI(t, t.TempDir())
	own := pki.Issue(t, "orchestrator", certs.Service("orchestrator"))
	ln, err := net.Listen("tcp", "127.0.0.1:0") // takes connections, and closes them at once
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	cfg := config.Default()
	cfg.TLS = config.TLS{CA: pki.CAFile(), Cert: own.Cert, Key: own.Key}
	logs := &logtest.Buffer{}
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true,
		StoreDir: t.TempDir(), Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		StageAddrs: map[string]string{mesh.Intent: ln.Addr().String()}})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(m.Close)

	conn, err := grpc.NewClient(m.Addr(mesh.Orchestrator),
		grpc.WithTransportCredentials(pki.Client(t, certs.Pair{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() { // it waits for the intent stage until the log is read
		_, err := agentv1.NewAgentServiceClient(conn).Run(ctx, &agentv1.RunRequest{Message: "hello"})
		ran <- err
	}()
	for !strings.Contains(logs.String(), `"msg":"TLS handshake failed","service":"orchestrator"`) {
		select {
		case <-ctx.Done():
			t.Fatalf("no failed handshake of the orchestrator in the mesh's log:\n%s", logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	<-ran
}
