package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/nats-io/nats-server/v2/server"
)

// natsPassword is the password of the NATS servers of TestNATSCredentialsStayOutOfTheLogs.
const natsPassword = "s3cret-nats-password"

// TestNATSCredentialsStayOutOfTheLogs: NATS_URL is where the orchestrator and the action stage
// get their NATS credentials (nats://user:password@host, or a token as the URL's user), and
// the binaries never write them: not in the warning of a lost connection, nor in the error of
// a URL that does not parse. Both quoted the whole URL, password included, in the logs every
// process ships.
func TestNATSCredentialsStayOutOfTheLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the action stage and the orchestrator as separate processes")
	}
	isolate(t)
	bin := meshproc.Build(t)
	env := []string{"OTEL_SDK_DISABLED=true"}
	for _, creds := range []*server.Options{
		{Username: "agentmesh", Password: natsPassword},
		{Authorization: natsPassword}, // a token
	} {
		nats := startNATS(t, creds)
		userinfo := creds.Authorization
		if userinfo == "" {
			userinfo = creds.Username + ":" + creds.Password
		}
		url := fmt.Sprintf("nats://%s@%s", userinfo, nats.Addr())
		action := meshproc.External(t, "action", filepath.Join(bin, "action"), nil,
			append(env, "NATS_URL="+url), nil)
		nats.Shutdown() // the action stage loses its connection, and says so
		lost := func() bool { return strings.Contains(action.Logs(), "NATS disconnected") }
		if !poll(t, 20*time.Second, lost) {
			t.Fatalf("the action stage never logged that it lost NATS:\n%s", action.Logs())
		}
		if logs := action.Logs(); strings.Contains(logs, natsPassword) {
			t.Errorf("the action stage's logs hold the NATS credential of NATS_URL %s:\n%s", url, logs)
		}
		action.Kill(t)
	}

	malformed := "nats://agentmesh:" + natsPassword + "@[::1"
	orchestrator := meshproc.Launch(t, "orchestrator", filepath.Join(bin, "orchestrator"), nil,
		append(env, "NATS_URL="+malformed), nil)
	if err := orchestrator.Wait(t); err == nil {
		t.Fatalf("the orchestrator started with NATS_URL %s", malformed)
	}
	logs := orchestrator.Logs()
	if !strings.Contains(logs, "connect to NATS") {
		t.Fatalf("the orchestrator did not fail on NATS_URL:\n%s", logs)
	}
	if strings.Contains(logs, natsPassword) {
		t.Errorf("the orchestrator's error holds the NATS password:\n%s", logs)
	}
}

// startNATS starts a NATS server with JetStream on a free loopback port that asks clients for
// the credentials of creds (Username and Password, or the token Authorization); it stops when
// the test ends.
func startNATS(t *testing.T, creds *server.Options) *server.Server {
	t.Helper()
	opts := *creds
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server is not ready for connections")
	}
	return srv
}
