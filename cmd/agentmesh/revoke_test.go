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
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
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
// StreamRun, whose CLI exits 4, a WatchRun of the run, and a unary Run waiting on a run of its
// own. A stream of a key that stays goes on to the run's end, and both runs go on to theirs,
// which the key that stays reads. The orchestrator refused new calls of a revoked key, but its
// open streams went on for as long as the run did, and a unary Run was never ended.
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

	// A unary Run of the key that leaks, which waits on its run (held by the model too).
	const unaryRun = "revoked-key-unary-run"
	unary := make(chan error, 1)
	go func() {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+leaked)
		_, err := agentv1.NewAgentServiceClient(conn).Run(ctx, &agentv1.RunRequest{RunId: unaryRun, Message: message})
		unary <- err
	}()
	if !poll(t, runTimeout, func() bool { return len(llm.Requests()) > 1 }) {
		t.Fatal("the unary Run never asked its model")
	}

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
	select {
	case err := <-unary:
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "revoked") {
			t.Errorf("the unary Run of the revoked key ended %v, want UNAUTHENTICATED saying it was revoked", err)
		}
	case <-time.After(max(bound-time.Since(revoked), 5*time.Second)):
		t.Fatalf("the unary Run of the revoked key still waits %v after it was revoked", bound)
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
	// The unary Run's run went on too: the key that stays reads its result.
	keptCtx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+kept)
	var res *typev1.RunResult
	if !poll(t, runTimeout, func() bool {
		var err error
		res, err = agentv1.NewAgentServiceClient(conn).GetRun(keptCtx, &agentv1.GetRunRequest{RunId: unaryRun})
		return err == nil && res.GetOutcome() == typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY
	}) {
		t.Errorf("the run of the unary Run ended by the revocation did not finish: %v", res)
	}
}

// TestRevokedClientCertificateEndsItsOpenCalls: a client certificate of auth.client_ca that a
// rewritten auth.client_crl lists ends the calls open with it, within about
// auth.ReloadInterval and while no other call or handshake comes to make the orchestrator read
// the file: a unary Run waiting on its run and a WatchRun of the run, both on a connection its
// handshake took before, end UNAUTHENTICATED saying the certificate was revoked and naming its
// serial. A watch of another certificate (the tenant's admin) goes on, and the run goes on to
// its end, which that certificate reads. The orchestrator refused the certificate at the next
// handshake only, and never ended the calls open with it.
func TestRevokedClientCertificateEndsItsOpenCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	isolate(t)
	clients := meshproc.NewPKI(t, t.TempDir())
	alice := clients.Issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	admin := clients.Issue(t, "admin", certs.Subject{CommonName: "admin", Organization: "acme",
		OrganizationalUnits: []string{auth.RoleTenantAdmin}, Client: true})
	clients.Revoke(t) // a CRL that lists nothing yet

	const message = "revoke the certificate: hold on"
	release := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "revoke-cert", Match: message,
		Turns: []llmtest.Turn{{Content: "Held to the end.", Hold: release}}})
	m := meshproc.Start(t, meshproc.Options{MTLS: true, PKI: clients, Replicas: []string{meshproc.Orchestrator},
		Config: meshproc.Config{LLM: llm.URL(), ClientCA: clients.CAFile(), ClientCRL: clients.CRLFile()}})
	replica := m.Replica(t, meshproc.Orchestrator)
	connect := func(pair certs.Pair) agentv1.AgentServiceClient {
		t.Helper()
		c, err := grpc.NewClient(replica.Addr(), grpc.WithTransportCredentials(m.PKI().Client(t, pair)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return agentv1.NewAgentServiceClient(c)
	}
	aliceAPI, adminAPI := connect(alice), connect(admin)

	const runID = "revoked-cert-run"
	ran := make(chan error, 1)
	go func() {
		_, err := aliceAPI.Run(t.Context(), &agentv1.RunRequest{RunId: runID, Message: message})
		ran <- err
	}()
	if !poll(t, runTimeout, func() bool { return len(llm.Requests()) > 0 }) {
		t.Fatal("the run never asked its model")
	}
	watch := func(api agentv1.AgentServiceClient) grpc.ServerStreamingClient[eventv1.RunEvent] {
		t.Helper()
		stream, err := api.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: runID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil { // run_started: the watch is open
			t.Fatalf("WatchRun: %v", err)
		}
		return stream
	}
	aliceWatch, adminWatch := watch(aliceAPI), watch(adminAPI)
	watched := make(chan error, 1)
	go func() {
		for {
			if _, err := aliceWatch.Recv(); err != nil {
				watched <- err
				return
			}
		}
	}()

	serial, err := certs.SerialOf(alice.Cert)
	if err != nil {
		t.Fatal(err)
	}
	want := `the certificate "CN=alice,O=acme", serial ` + auth.FormatSerial(serial) + ", is revoked"
	clients.Revoke(t, "alice")
	revoked := time.Now()
	bound := 2 * auth.ReloadInterval
	for _, call := range []struct {
		name  string
		ended chan error
	}{{"the unary Run", ran}, {"the WatchRun", watched}} {
		select {
		case err := <-call.ended:
			t.Logf("%s ended after %v", call.name, time.Since(revoked))
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(msg, "client certificate was revoked") ||
				!strings.Contains(msg, want) {
				t.Errorf("%s of alice's revoked certificate ended %v, want UNAUTHENTICATED saying the client certificate "+
					"was revoked and %q", call.name, err, want)
			}
		case <-time.After(max(bound-time.Since(revoked), 5*time.Second)):
			t.Fatalf("%s of alice's certificate is still open %v after the CRL listed it", call.name, bound)
		}
	}
	// The orchestrator logs the calls once it has ended them: the client may see the end first.
	if !poll(t, runTimeout, func() bool {
		return strings.Contains(replica.Logs(), "calls of a revoked client certificate ended")
	}) {
		t.Errorf("the orchestrator did not log the calls it ended:\n%s", replica.Logs())
	}

	close(release)
	for {
		ev, err := adminWatch.Recv()
		if err != nil {
			t.Fatalf("the admin's watch ended %v before the run finished", err)
		}
		if ev.GetRunFinished() != nil {
			break
		}
	}
	res, err := adminAPI.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Errorf("the run of alice's ended Run: %v, %v; want it completed", res.GetOutcome(), err)
	}
}
