package meshproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is the nats-server process of a mesh, with JetStream, on the same loopback port and
// store directory across restarts.
type NATS struct {
	*Process
	port  int
	store string
}

// newNATS returns a nats-server on a free loopback port with JetStream storing in a temporary
// directory; it is not started yet.
func newNATS(t testing.TB, bin, dir string) *NATS {
	t.Helper()
	port := grpctest.FreePort(t)
	store := filepath.Join(t.TempDir(), "jetstream")
	args := []string{"-js", "-sd", store, "-p", strconv.Itoa(port), "-a", "127.0.0.1", "-n", "meshproc"}
	return &NATS{Process: newProcess(t, "nats", filepath.Join(bin, natsServer), dir, args, os.Environ()), port: port, store: store}
}

// URL returns the URL clients connect to.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// Restart starts the server again, after Kill or Stop, with the store it had, and waits until
// JetStream answers.
func (n *NATS) Restart(t testing.TB) {
	t.Helper()
	n.Start(t)
	n.WaitReady(t)
}

// RestartEmpty starts the server again, after Kill or Stop, with an empty store: every stream,
// key-value bucket and message is gone. It waits until JetStream answers.
func (n *NATS) RestartEmpty(t testing.TB) {
	t.Helper()
	if n.Running() {
		t.Fatal("RestartEmpty: nats is running; Kill or Stop it first")
	}
	if err := os.RemoveAll(n.store); err != nil {
		t.Fatal(err)
	}
	n.Restart(t)
}

// WaitReady polls the server until JetStream answers, failing t after startTimeout or when the
// process exits meanwhile.
func (n *NATS) WaitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	if err := retry(ctx, n.Exited(t), func() error { return n.ping(ctx) }); err != nil {
		t.Fatalf("nats-server is not ready after %s: %v", startTimeout, err)
	}
}

// ping connects once and asks JetStream for the account's information.
func (n *NATS) ping(ctx context.Context) error {
	nc, err := nats.Connect(n.URL(), nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}
