package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// waitingAgent is an AgentService whose Run and GetRun wait until their call ends, telling
// held whether the call's context is a held one.
type waitingAgent struct {
	agentv1.UnimplementedAgentServiceServer
	started chan bool
}

func (a *waitingAgent) Run(ctx context.Context, _ *agentv1.RunRequest) (*typev1.RunResult, error) {
	a.started <- auth.Held(ctx)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (a *waitingAgent) GetRun(ctx context.Context, _ *agentv1.GetRunRequest) (*typev1.RunResult, error) {
	a.started <- auth.Held(ctx)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLongUnaryCallsEndWhenTheirKeyIsRevoked: a unary call of a method of Options.LongCalls
// (the orchestrator's Run, which waits on its run) made with an API key of auth.api_keys_file
// ends UNAUTHENTICATED, saying the key was revoked, once the key is taken out of the file;
// a unary call of another method is not held (a revocation refuses its next call).
func TestLongUnaryCallsEndWhenTheirKeyIsRevoked(t *testing.T) {
	key, hash := auth.NewKey()
	file := filepath.Join(t.TempDir(), "api-keys.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("api_keys:\n  - {hash: " + hash + ", user: alice}\n")
	authn, err := auth.FollowKeys(file, 50*time.Millisecond, config.Auth{APIKeysFile: file}.FileKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Name: "orchestrator", Addr: "127.0.0.1:0", Auth: authn, Logger: slog.New(slog.DiscardHandler),
		LongCalls: []string{agentv1.AgentService_Run_FullMethodName}})
	agent := &waitingAgent{started: make(chan bool, 2)}
	agentv1.RegisterAgentServiceServer(srv.GRPC(), agent)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := agentv1.NewAgentServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)

	ran := make(chan error, 1)
	go func() {
		_, err := client.Run(ctx, &agentv1.RunRequest{Message: "hold on"})
		ran <- err
	}()
	got := make(chan error, 1)
	getCtx, cancelGet := context.WithCancel(ctx)
	defer cancelGet()
	go func() {
		_, err := client.GetRun(getCtx, &agentv1.GetRunRequest{RunId: "r"})
		got <- err
	}()
	held := map[bool]int{}
	for range 2 {
		held[<-agent.started]++
	}
	if held[true] != 1 || held[false] != 1 {
		t.Fatalf("held calls: %v, want Run held and GetRun not", held)
	}

	write("api_keys: []\n")
	select {
	case err := <-ran:
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "revoked") {
			t.Errorf("Run of the revoked key ended %v, want UNAUTHENTICATED saying it was revoked", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run of the revoked key still runs 5s after it was revoked")
	}
	select {
	case err := <-got:
		t.Errorf("GetRun, not a long call, ended %v: it is not held", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := client.ListTools(ctx, &agentv1.ListToolsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a new call of the revoked key: %v, want UNAUTHENTICATED", err)
	}
}

// TestUnaryGateAllocatesNothingWithoutAuth: a unary call through the gate of a server without
// authentication (no keys file, no CRLs: nothing to hold) allocates nothing of its own.
func TestUnaryGateAllocatesNothingWithoutAuth(t *testing.T) {
	g := &gate{log: slog.New(slog.DiscardHandler), holdUnary: longCalls([]string{agentv1.AgentService_Run_FullMethodName})}
	info := &grpc.UnaryServerInfo{FullMethod: agentv1.AgentService_Run_FullMethodName}
	resp := &typev1.RunResult{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	ctx, req := t.Context(), &agentv1.RunRequest{}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := g.unary(ctx, req, info, handler); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a unary call through the gate without authentication allocates %v times, want none", n)
	}
}
