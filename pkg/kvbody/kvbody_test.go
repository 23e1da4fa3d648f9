package kvbody_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFitsAndPut(t *testing.T) {
	nc := natstest.Connect(t)

	limit := int(nc.MaxPayload()) - kvbody.Margin
	if !kvbody.Fits(nc, limit) || kvbody.Fits(nc, limit+1) {
		t.Errorf("Fits(%d) and Fits(%d) with a max payload of %d: want true, false", limit, limit+1, nc.MaxPayload())
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := js.CreateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: "BODIES", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("x", 3<<20))
	first, err := kvbody.Put(t.Context(), nc, objects, "run-1", data)
	if err != nil {
		t.Fatal(err)
	}
	second, err := kvbody.Put(t.Context(), nc, objects, "run-1", data)
	if err != nil {
		t.Fatal(err)
	}
	if first == second || !strings.HasPrefix(first, "run-1.") || !strings.HasPrefix(second, "run-1.") {
		t.Errorf("names %q and %q: want two names starting with the key and a dot", first, second)
	}
	got, err := objects.GetBytes(t.Context(), first)
	if err != nil || string(got) != string(data) {
		t.Errorf("GetBytes(%q) = %d bytes, %v; want the 3 MiB stored", first, len(got), err)
	}
}

// TestPutUnderASmallMaxPayload: a server whose max_payload is below the object store's default
// chunk (128 KiB) refused every chunk of every body: with such an external nats-server, every
// checkpoint, log segment and call record too large for one entry failed to store. Put now
// chunks a body to fit the connection's max payload.
func TestPutUnderASmallMaxPayload(t *testing.T) {
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), Port: -1,
		MaxPayload: 64 << 10, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := js.CreateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: "BODIES", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("y", 300<<10))
	name, err := kvbody.Put(t.Context(), nc, objects, "run-1", data)
	if err != nil {
		t.Fatalf("Put of 300 KiB under a max payload of 64 KiB: %v", err)
	}
	if got, err := objects.GetBytes(t.Context(), name); err != nil || string(got) != string(data) {
		t.Errorf("GetBytes(%q) = %d bytes, %v; want the 300 KiB stored", name, len(got), err)
	}
}
