package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestDevResumesPausedRuns stops `agentmesh dev` while a run waits for approval and starts it
// again on the same data directory: the new process adopts the run, and an approval given to
// it finishes the run.
func TestDevResumesPausedRuns(t *testing.T) {
	isolate(t)
	names := []string{"orchestrator", "intent", "planning", "context", "generation", "action", "observation", "memory", "recovery"}
	addrs := map[string]string{}
	var yaml strings.Builder
	yaml.WriteString("tools: {require_approval: [calculator]}\nservices:\n")
	for _, n := range names {
		addrs[n] = freeAddr(t)
		fmt.Fprintf(&yaml, "  %s: %q\n", n, addrs[n])
	}
	if err := os.WriteFile("agentmesh.yaml", []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	dev := func() (stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		var logs bytes.Buffer
		exited := make(chan int, 1)
		go func() { exited <- run(ctx, []string{"dev", "--data", data}, &bytes.Buffer{}, &logs) }()
		waitServing(t, addrs["orchestrator"])
		return func() {
			cancel()
			if code := <-exited; code != 0 {
				t.Errorf("dev exited %d\n%s", code, logs.String())
			}
		}
	}

	stop := dev()
	code, out, errOut := cli("run", "--addr", addrs["orchestrator"], "What is 6 times 7?")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	m := regexp.MustCompile(`run (\S+) is waiting for approval of call (\S+) \(calculator\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the run did not pause:\n%s", out)
	}
	stop()

	stop = dev()
	defer stop()
	if code, out, errOut := cli("approve", "--addr", addrs["orchestrator"], m[1], m[2]); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("approve after the restart: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := cli("watch", "--addr", addrs["orchestrator"], m[1]); code != 0 || !strings.Contains(errOut, "← calculator: 42") || !strings.Contains(errOut, "⟳ resumed on ") {
		t.Fatalf("watch: exit %d\n%s", code, errOut)
	}
	if code, out, _ := cli("get", "--addr", addrs["orchestrator"], m[1]); code != 0 || !strings.Contains(out, "OUTCOME_COMPLETED_WITH_TOOLS") || !strings.Contains(out, "RUN_STATE_RESUMED") {
		t.Errorf("get: exit %d\n%s", code, out)
	}
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// waitServing polls a server's health until it reports SERVING.
func waitServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(fmt.Errorf("%s never became healthy: %v", addr, err))
		}
	}
}
