package kvbody_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/agentmesh/agentmesh/pkg/natstest"
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
	first, err := kvbody.Put(t.Context(), objects, "run-1", data)
	if err != nil {
		t.Fatal(err)
	}
	second, err := kvbody.Put(t.Context(), objects, "run-1", data)
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
