package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEmbeddedListensOnALoopbackPort(t *testing.T) {
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("ClientURL() = %q, want a nats://127.0.0.1:<port> URL", url)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect over TCP: %v", err)
	}
	defer nc.Close()
	if _, err := NewPublisher(t.Context(), nc); err != nil {
		t.Fatalf("NewPublisher over TCP: %v", err)
	}
}

func TestEmbeddedInProcessOnly(t *testing.T) {
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	if url := srv.ClientURL(); url != "" {
		t.Errorf("ClientURL() = %q for an in-process server, want empty", url)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Error("in-process connection is not connected")
	}
}

func TestStartEmbeddedRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    EmbeddedOptions
		wantErr string
	}{
		{"no store dir", EmbeddedOptions{}, "store directory must not be empty"},
		{"bad port", EmbeddedOptions{StoreDir: t.TempDir(), Port: -2}, "port -2 is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := StartEmbedded(tt.opts)
			if err == nil {
				srv.Shutdown()
				t.Fatalf("StartEmbedded succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestEmbeddedRestartsOnItsPortWithItsEvents(t *testing.T) {
	dir := t.TempDir()
	port := grpctest.FreePort(t) // below the ephemeral range: no connection takes it while the server is down
	first, err := StartEmbedded(EmbeddedOptions{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(first.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	emitAll(t, pub.Run("run-kept"), runStarted("go"))
	nc.Close()
	first.Shutdown()

	again, err := StartEmbedded(EmbeddedOptions{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Shutdown)
	if again.Port() != port {
		t.Fatalf("restarted on port %d, want %d", again.Port(), port)
	}
	nc, err = nats.Connect(again.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LastPosition(t.Context(), js, "run-kept"); err != nil || got.Seq != 1 {
		t.Fatalf("LastPosition after the restart = %+v, %v; want the stored event's seq 1", got, err)
	}
	inProcess, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inProcess.Shutdown()
	if got := inProcess.Port(); got != 0 {
		t.Errorf("Port() of an in-process server = %d, want 0", got)
	}
}

func TestNewPublisherSaysNATSIsUnreachable(t *testing.T) {
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	srv.Shutdown() // nothing listens on url any more
	nc, err := Connect(url, "events-test")
	if err != nil {
		t.Fatalf("Connect retries a first connection that fails, want no error: %v", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = NewPublisher(ctx, nc)
	if err == nil || !strings.Contains(err.Error(), "not connected to NATS at "+url) {
		t.Fatalf("NewPublisher without NATS = %v, want an error naming %s", err, url)
	}
}
