package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestMutualTLSBetweenBinaries (issue 12.3): the nine binaries started with a mesh CA
// (tls.ca) and each its own certificate (TLS_CERT, TLS_KEY) serve a run through the public API
// over TLS with every hop between services over mutual TLS, while a stage refuses a plaintext client, a client
// without a certificate, one with a mesh identity of another CA, and one with the mesh CA's
// certificate of no mesh identity; the orchestrator's mesh identity is served. A client that
// calls the memory stage refuses the planning stage's certificate.
func TestMutualTLSBetweenBinaries(t *testing.T) {
	isolate(t)
	const message = "what do the docs say about deploys?"
	llm := llmtest.New(t, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "knowledge_search", Arguments: `{"query": "deploys"}`}}},
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression": "6*7"}`}}},
		{Content: "The docs say nothing about deploys; 6*7 is 42."},
	}})
	m := meshproc.Start(t, meshproc.Options{MTLS: true, Replicas: []string{meshproc.Orchestrator}, Config: meshproc.Config{LLM: llm.URL()}})
	pki := m.PKI()

	// orchestrator → intent, planning, context, generation, action, observation, memory,
	// recovery; context → memory (its memory search); action → memory (knowledge_search).
	t.Setenv(envCA, pki.CAFile())
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"run", "--json", "--addr", m.Replica(t, meshproc.Orchestrator).Addr(), message}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "COMPLETED_WITH_TOOLS") || strings.Contains(out, "ACCOUNTING_STATUS_FAILED") ||
		!strings.Contains(stderr.String(), "← calculator: 42") {
		t.Errorf("run output:\n%s%s", out, stderr.String())
	}
	if logs := m.Stage(t, "context").Logs(); strings.Contains(logs, "memory unavailable") {
		t.Errorf("the context stage could not search memory:\n%s", logs)
	}
	// The memory stage checks the orchestrator's assertions of the user (approvals.verify_key),
	// and context's and action's calls carried them.
	if logs := m.Stage(t, "memory").Logs(); strings.Contains(logs, "permission denied") ||
		strings.Contains(logs, "callers are believed") {
		t.Errorf("the memory stage refused a call or checks no user assertion:\n%s", logs)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := func(t *testing.T, addr string, creds credentials.TransportCredentials) grpc.ClientConnInterface {
		t.Helper()
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, s := range meshproc.Stages {
		_, err := healthpb.NewHealthClient(conn(t, m.Stage(t, s.Name).Addr(), insecure.NewCredentials())).Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a plaintext call to %s: %v, want UNAVAILABLE", s.Name, err)
		}
	}

	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := other.Write(t.TempDir(), "orchestrator", certs.Service("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	memory, action := m.Stage(t, "memory"), m.Stage(t, "action")
	search := func(c grpc.ClientConnInterface) error {
		_, err := memoryv1.NewMemoryServiceClient(c).Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Query: "deploys"})
		return err
	}
	for _, tc := range []struct {
		name string
		err  func(t *testing.T) error
		want codes.Code
	}{
		{"memory, no certificate", func(t *testing.T) error { return search(conn(t, memory.Addr(), pki.Client(t, certs.Pair{}))) }, codes.Unavailable},
		{"memory, another CA's mesh identity", func(t *testing.T) error { return search(conn(t, memory.Addr(), pki.Client(t, impostor))) }, codes.Unavailable},
		{"memory, the mesh CA's certificate of no mesh identity", func(*testing.T) error { return search(memory.Conn()) }, codes.PermissionDenied},
		{"action, the mesh CA's certificate of no mesh identity", func(*testing.T) error {
			args, _ := structpb.NewStruct(map[string]any{"expression": "6*7"})
			_, err := actionv1.NewActionServiceClient(action.Conn()).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: "r", CallId: "c1", ToolName: "calculator", Arguments: args,
			})
			return err
		}, codes.PermissionDenied},
		{"memory, the orchestrator's mesh identity", func(t *testing.T) error {
			return search(conn(t, memory.Addr(), pki.Client(t, pki.Service(meshproc.Orchestrator))))
		}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(t); status.Code(err) != tc.want {
				t.Errorf("%v, want %s", err, tc.want)
			}
		})
	}
	// One stage's certificate cannot answer the calls meant for another: the mesh's clients
	// expect the mesh identity of the stage they call (dial.WithPeer), as the run above did.
	own := pki.Service(meshproc.Orchestrator)
	orchestrator, err := auth.LoadMeshTLS(auth.MeshFiles{CA: pki.CAFile(), Cert: own.Cert, Key: own.Key}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for stage, want := range map[string]codes.Code{"memory": codes.OK, "planning": codes.Unavailable} {
		c, err := dial.New(m.Stage(t, stage).Addr(), dial.WithMesh(orchestrator), dial.WithPeer("memory"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		_ = c.Close()
		if status.Code(err) != want || want != codes.OK && !strings.Contains(err.Error(), "planning's") {
			t.Errorf("the %s stage called as the memory stage: %v, want %s", stage, err, want)
		}
	}
	if got, err := memory.Health(ctx); err != nil || got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("memory's health through a certificate of no mesh identity: %s, %v; want SERVING", got, err)
	}
	if !strings.Contains(memory.Logs(), "call refused") || !strings.Contains(memory.Logs(), "CN=meshproc") {
		t.Errorf("memory did not log the refusal with the caller's certificate:\n%s", memory.Logs())
	}
}
