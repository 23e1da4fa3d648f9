package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// eavesdropper is a plaintext AgentService that keeps the authorization metadata its
// ListTools calls carry, as anyone on the path of a plaintext connection reads it.
type eavesdropper struct {
	agentv1.UnimplementedAgentServiceServer
	mu   sync.Mutex
	seen []string
}

func (e *eavesdropper) ListTools(
	ctx context.Context, _ *agentv1.ListToolsRequest,
) (*agentv1.ListToolsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, md.Get("authorization")...)
	return &agentv1.ListToolsResponse{}, nil
}

// heard returns the authorization metadata the eavesdropper read.
func (e *eavesdropper) heard() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.seen, " ")
}

// TestAPIKeyIsNotSentInClearTextToAnotherHost: the CLI sends AGENTMESH_API_KEY over TLS
// (AGENTMESH_CA) to an address of another host, and refuses, exit 4 naming AGENTMESH_CA, where
// it would cross the network in clear text, unless AGENTMESH_INSECURE=1 asks it to. A
// forgotten AGENTMESH_CA sent the key to anyone on the path (a server that speaks TLS fails
// the call only after an attacker in the middle has read it).
func TestAPIKeyIsNotSentInClearTextToAnotherHost(t *testing.T) {
	isolate(t)
	ip := nonLoopbackIP(t)
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	spy := &eavesdropper{}
	srv := grpc.NewServer()
	agentv1.RegisterAgentServiceServer(srv, spy)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	const key = "amk_secret-key-of-the-test"
	t.Setenv(envAPIKey, key)
	t.Setenv(envCA, "")
	t.Setenv("AGENTMESH_INSECURE", "")

	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"tools", "--addr", lis.Addr().String()}, &stdout, &stderr)
	if code != exitcode.Invalid || !strings.Contains(stderr.String(), envCA) {
		t.Errorf("exit %d, want %d naming %s; stderr: %s", code, exitcode.Invalid, envCA, stderr.String())
	}
	if heard := spy.heard(); strings.Contains(heard, key) {
		t.Errorf("the API key crossed the network in clear text: %q", heard)
	}

	t.Setenv("AGENTMESH_INSECURE", "1")
	stdout.Reset()
	stderr.Reset()
	code = run(t.Context(), []string{"tools", "--addr", lis.Addr().String()}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("with AGENTMESH_INSECURE=1: exit %d; stderr: %s", code, stderr.String())
	}
	if heard := spy.heard(); !strings.Contains(heard, key) {
		t.Errorf("with AGENTMESH_INSECURE=1 the key was not sent: %q", heard)
	}
}

// nonLoopbackIP returns an IPv4 address of this host that is not loopback, skipping the test
// on a host that has none.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("this host has no IPv4 address but loopback")
	return ""
}

// TestAPIKeyGoesInClearTextToThisHost: the addresses of this host take the API key in clear
// text, as `agentmesh dev` serves it: loopback, and every interface (the address a mesh that
// listens on ":7000" reports).
func TestAPIKeyGoesInClearTextToThisHost(t *testing.T) {
	t.Setenv("AGENTMESH_INSECURE", "")
	local := []string{"127.0.0.1:7000", "localhost:7000", "[::1]:7000", "0.0.0.0:7000", "[::]:7000",
		":7000"}
	for _, addr := range local {
		if err := keyInClear(addr); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if err := keyInClear("192.0.2.1:7000"); err == nil {
		t.Error("192.0.2.1:7000 takes the key in clear text")
	}
}
