package events

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
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
