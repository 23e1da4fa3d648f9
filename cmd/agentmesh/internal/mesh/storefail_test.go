package mesh_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
)

// TestARunWhoseStoringFailedNeverRuns: a run's first checkpoint and its entry among the active
// runs were stored, but the answer to the second write was lost with the connection (it
// dropped, and the client reconnected). The caller is told the store failed (UNAVAILABLE,
// STORAGE_ERROR) and retries; the run must not run anyway. It did: what it stored stayed,
// its replica's keeper found it among the runs its replica owned before a restart, adopted it
// and ran it, its tools too, besides the run the caller's retry started.
func TestARunWhoseStoringFailedNeverRuns(t *testing.T) {
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cutter := natstest.NewCutter(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	cfg := config.Default()
	cfg.NATS.URL = cutter.URL()
	cfg.Durability.LeaseTTLMS = time.Second.Milliseconds()
	const message = "stored, or not"
	h := startReplicas(t, cfg, 1, nil,
		llmtest.Scenario{Name: "unsure", Match: message, Turns: []llmtest.Turn{text("it ran")}})

	cutter.Arm("$KV." + runstore.ActiveBucket + ".")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = h.client.Run(ctx, &agentv1.RunRequest{RunId: "unsure-run", Message: message})
	<-cutter.Cut()
	wantCode(t, err, codes.Unavailable, "Run whose entry among the active runs went unanswered")

	js := natsJS(t, srv)
	gone := func(bucket string) bool {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kv.Get(ctx, "unsure-run")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}
	deadline := time.Now().Add(20 * time.Second)
	stored := func() bool { return !gone(runstore.CheckpointBucket) || !gone(runstore.ActiveBucket) }
	for stored() && len(h.llm.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refused run's checkpoint and entry are still stored after 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Fatalf("the run its caller was told the store refused ran anyway: %d requests to the model", n)
	}
}

// natsJS is a JetStream client on a connection of its own to srv.
func natsJS(t *testing.T, srv *events.Embedded) jetstream.JetStream {
	t.Helper()
	nc, err := events.Connect(srv.ClientURL(), "agentmesh-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
