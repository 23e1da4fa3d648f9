// Package natstest starts an embedded NATS server with JetStream for tests, as the mesh in
// one process embeds one (events.StartEmbedded), and connects to it in process; its Cutter
// loses the answer to a chosen request, as a connection that drops at the wrong moment does.
package natstest

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/nats-io/nats.go"
)

// Connect starts an embedded NATS server with JetStream, its store in a temporary directory of
// t, listening in process only, and returns an in-process connection to it. Connection and
// server stop when the test ends.
func Connect(t testing.TB) *nats.Conn {
	t.Helper()
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
