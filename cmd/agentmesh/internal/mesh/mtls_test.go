package mesh_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestStageTrafficIsMutualTLS (issue 12.3): with tls.ca the in-process mesh's services talk
// mutual TLS on every hop (orchestrator → stages, context and action → memory, memory →
// generation for embeddings), so a run that uses them all succeeds, while a stage refuses a
// plaintext client and a certificate of the mesh CA that names no mesh identity.
func TestStageTrafficIsMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	own, err := ca.Write(dir, "orchestrator", certs.Service("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	embeddings, _ := embeddingServer(t, http.StatusOK)
	llm := llmtest.New(t, llmtest.Scenario{Match: "what do the docs say about deploys?", Turns: []llmtest.Turn{
		call("knowledge_search", `{"query": "deploys"}`), text("The docs say nothing about deploys."),
	}})
	cfg := config.Default()
	cfg.TLS = config.TLS{CA: caFile, Cert: own.Cert, Key: own.Key}
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: llm.URL(), APIKey: "test-key"}
	cfg.Providers["embedder"] = config.Provider{Type: "openai", BaseURL: embeddings, APIKey: "test-key"}
	cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}}
	cfg.Memory.Embeddings = &config.Target{Provider: "embedder", Model: "embed-test"}
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(m.Close)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	dialTLS := func(service string, cfg *tls.Config) *grpc.ClientConn {
		conn, err := grpc.NewClient(m.Addr(service), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The public API is served over TLS with the orchestrator's certificate.
	res, err := agentv1.NewAgentServiceClient(dialTLS(mesh.Orchestrator, &tls.Config{RootCAs: roots})).
		Run(ctx, &agentv1.RunRequest{Message: "what do the docs say about deploys?"})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("Run: %v %s %s (%v), want a success", err, res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	embedded := 0
	for _, a := range res.GetAccounting() {
		switch a.GetType() {
		case typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING:
			embedded++ // memory → generation
		case typev1.AccountingType_ACCOUNTING_TYPE_TOOL: // action → memory
		default:
			continue
		}
		if a.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK {
			t.Errorf("accounting entry %v, want OK", a)
		}
	}
	if embedded == 0 {
		t.Errorf("the run has no embedding in its accounting: %v", res.GetAccounting())
	}

	for _, stage := range []string{mesh.Memory, mesh.Action, mesh.Generation, mesh.Intent} {
		conn, err := grpc.NewClient(m.Addr(stage), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		_ = conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a plaintext call to %s: %v, want UNAVAILABLE", stage, err)
		}
	}
	user, err := ca.Write(dir, "alice", certs.Subject{CommonName: "alice", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(user.Cert, user.Key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = memoryv1.NewMemoryServiceClient(dialTLS(mesh.Memory, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})).
		Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Query: "deploys"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Search with a certificate of the mesh CA that names no mesh identity: %v, want PERMISSION_DENIED", err)
	}
}
