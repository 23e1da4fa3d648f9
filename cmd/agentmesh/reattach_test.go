package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRunFollowsItsRunAcrossADeploy: `agentmesh run` follows its run on when the orchestrator
// replica running it drains (SIGTERM during a deploy) and hands it to another one. The stream
// failed UNAVAILABLE "moved to another orchestrator replica" and the CLI exited with it
// mid-run, though the run went on. It now re-attaches with WatchRun after the last event it
// received, through the same address: a relay in front of replicas a and b, as a load
// balancer, sends each connection to the first one that takes it. The run has executed its
// tool and waits for its final answer when a is stopped; the CLI must print the answer, exit
// 0, and show no event twice.
func TestRunFollowsItsRunAcrossADeploy(t *testing.T) {
	isolate(t)
	release := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "deploy", Match: "deploy: *", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, "deploy")}},
		{Content: "Followed across the deploy.", Hold: release},
	}})
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	addr := failover(t, a.Addr(), b.Addr())

	const msg = "deploy: follow me"
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(t.Context(), []string{"run", "--addr", addr, msg}, &stdout, &stderr)
	}()
	if !poll(t, runTimeout, func() bool { return tools.Count("deploy") == 1 && llmRequests(llm, msg, 1) > 0 }) {
		t.Fatal("the run never executed its tool and asked for its final answer")
	}
	if err := a.Stop(t); err != nil {
		t.Errorf("replica a did not exit cleanly on SIGTERM: %v", err)
	}
	close(release)

	var got int
	select {
	case got = <-code:
	case <-t.Context().Done():
		t.Fatal("the CLI never returned")
	}
	out, errOut := stdout.String(), stderr.String()
	if got != 0 || !strings.Contains(out, "Followed across the deploy.") {
		t.Fatalf("run across a deploy: exit %d, want 0 and the answer\nstdout: %s\nstderr: %s", got, out, errOut)
	}
	if !strings.Contains(errOut, "  ! the stream broke (") || !strings.Contains(errOut, "; following run ") {
		t.Errorf("the progress does not say the run is followed on\nstderr: %s", errOut)
	}
	for _, line := range []string{"▶ run ", "· turn 1\n"} {
		if n := strings.Count(errOut, line); n != 1 {
			t.Errorf("%q shown %d times, want once\nstderr: %s", line, n, errOut)
		}
	}
	if n := tools.Count("deploy"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// failover listens on an address of its own and relays each connection to the first of
// upstreams that accepts one, as a load balancer in front of orchestrator replicas sends new
// connections to a live one. It stops when the test ends.
func failover(t *testing.T, upstreams ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { relayConn(t, conn, upstreams) })
		}
	})
	return ln.Addr().String()
}

// relayConn copies conn to and from the first of upstreams that accepts a connection, until
// either side closes or the test ends; with none, it closes conn.
func relayConn(t *testing.T, conn net.Conn, upstreams []string) {
	defer conn.Close()
	var up net.Conn
	for _, addr := range upstreams {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			up = c
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(t.Context(), func() { _, _ = conn.Close(), up.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}
