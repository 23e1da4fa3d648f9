package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestRevokedKeyEndsItsOpenStreams: a key taken out of auth.api_keys_file ends the streams
// already open with it, UNAUTHENTICATED saying it was revoked, within about auth.ReloadInterval
// and while no other call comes to make the orchestrator read the file: `agentmesh run`'s
// StreamRun, whose CLI exits 4, and a WatchRun of the run. A stream of a key that stays goes on
// to the run's end. The orchestrator refused new calls of a revoked key, but its open streams
// went on for as long as the run did.
func TestRevokedKeyEndsItsOpenStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	isolate(t)
	leaked, leakedHash := auth.NewKey()
	kept, keptHash := auth.NewKey()
	file := filepath.Join(t.TempDir(), "api-keys.yaml")
	write := func(entries ...string) {
		t.Helper()
		if err := os.WriteFile(file, []byte("api_keys:\n"+strings.Join(entries, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leakedEntry := fmt.Sprintf("  - {hash: %q, tenant: acme, user: alice}\n", leakedHash)
	keptEntry := fmt.Sprintf("  - {hash: %q, tenant: acme, user: admin, roles: [tenant_admin]}\n", keptHash)
	write(leakedEntry, keptEntry)

	const message = "revoke: hold on"
	release := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "revoke", Match: message,
		Turns: []llmtest.Turn{{Content: "Held to the end.", Hold: release}}})
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"},
		Config: meshproc.Config{LLM: llm.URL(), APIKeysFile: file}})
	addr := m.Replica(t, "a").Addr()

	// The CLI streams the run with the key that leaks.
	t.Setenv(envAPIKey, leaked)
	var stdout, stderr logtest.Buffer
	code := make(chan int, 1)
	go func() { code <- run(t.Context(), []string{"run", "--addr", addr, message}, &stdout, &stderr) }()
	var runID string
	if !poll(t, runTimeout, func() bool {
		m := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(stderr.String())
		if m != nil {
			runID = m[1]
		}
		return runID != "" && len(llm.Requests()) > 0
	}) {
		t.Fatalf("the run never asked its model\nstderr: %s", stderr.String())
	}

	conn := dialService(t, addr)
	watch := func(key string) grpc.ServerStreamingClient[eventv1.RunEvent] {
		t.Helper()
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
		stream, err := agentv1.NewAgentServiceClient(conn).WatchRun(ctx, &agentv1.WatchRunRequest{RunId: runID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil { // run_started: the watch is open
			t.Fatalf("WatchRun: %v", err)
		}
		return stream
	}
	leakedWatch, keptWatch := watch(leaked), watch(kept)

	write(keptEntry)
	revoked := time.Now()
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := leakedWatch.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	bound := 2 * auth.ReloadInterval
	select {
	case err := <-ended:
		t.Logf("ended after %v", time.Since(revoked))
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "revoked") {
			t.Errorf("the watch of the revoked key ended %v, want UNAUTHENTICATED saying it was revoked", err)
		}
	case <-time.After(bound):
		t.Fatalf("the watch of the revoked key is still open %v after it was revoked", bound)
	}
	select {
	case got := <-code:
		if got != 4 || !strings.Contains(stderr.String(), "revoked") {
			t.Errorf("agentmesh run of the revoked key: exit %d, want 4 saying it was revoked\nstderr: %s", got, stderr.String())
		}
	case <-time.After(max(bound-time.Since(revoked), 5*time.Second)):
		t.Fatalf("agentmesh run of the revoked key still streams %v after it was revoked", bound)
	}

	close(release)
	for {
		ev, err := keptWatch.Recv()
		if err != nil {
			t.Fatalf("the watch of the key kept ended %v before the run finished", err)
		}
		if ev.GetRunFinished() != nil {
			break
		}
	}
}
