package server

import (
	"log/slog"
	"strings"
	"testing"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestRefusalsDoNotFloodTheLogs: a caller without credentials that calls again and again (a
// port scanner, a misconfigured client, a probe every second) gets every call refused, but the
// log shows its first refusal for each reason only, not one line a call; health, open to
// probes, logs nothing. Every refusal was logged at warning level, so anyone who reached the
// port could fill the logs.
func TestRefusalsDoNotFloodTheLogs(t *testing.T) {
	key, hash := auth.NewKey()
	authn, _, err := PublicSecurity(config.Auth{APIKeys: []config.APIKey{{Hash: hash, User: "alice"}}},
		config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	srv := New(Options{Name: "orchestrator", Addr: "127.0.0.1:0", Auth: authn,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	actionv1.RegisterActionServiceServer(srv.GRPC(), actionv1.UnimplementedActionServiceServer{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := actionv1.NewActionServiceClient(conn)
	health := healthpb.NewHealthClient(conn)

	const calls = 50
	wrongKey := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer not-"+key)
	for range calls {
		_, err := client.Execute(t.Context(), &actionv1.ExecuteRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a call without credentials: %v, want UNAUTHENTICATED", err)
		}
		_, err = client.Execute(wrongKey, &actionv1.ExecuteRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a call with a wrong key: %v, want UNAUTHENTICATED", err)
		}
		if _, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health: %v", err)
		}
	}
	text := logs.String()
	if n := strings.Count(text, `"msg":"call refused"`); n != 2 {
		t.Errorf("%d refused calls of two reasons logged %d refusals, want the first of each:\n%s",
			2*calls, n, text)
	}
	for _, reason := range []string{"authentication required", "the API key is not valid"} {
		if !strings.Contains(text, reason) {
			t.Errorf("the log does not show the first refusal for %q:\n%s", reason, text)
		}
	}
	if strings.Contains(text, "Health") {
		t.Errorf("health calls were logged:\n%s", text)
	}
}
