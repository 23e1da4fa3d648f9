package events

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/pkg/config"
)

func TestStreamOptionsFromConfig(t *testing.T) {
	defaults := config.Default().NATS
	memory := defaults
	memory.Replicas, memory.Storage, memory.StreamMaxAgeMS, memory.StreamMaxBytes = 3, config.StorageMemory, 3_600_000, 1<<30
	tests := []struct {
		name string
		nats config.NATS
		want StreamOptions
	}{
		{"defaults", defaults, StreamOptions{Replicas: 1, Storage: jetstream.FileStorage, MaxAge: DefaultMaxAge}},
		{"memory, limited", memory, StreamOptions{Replicas: 3, Storage: jetstream.MemoryStorage, MaxAge: time.Hour, MaxBytes: 1 << 30}},
	}
	for _, tt := range tests {
		if got := StreamOptionsFromConfig(tt.nats); got != tt.want {
			t.Errorf("%s: StreamOptionsFromConfig = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestEnsureStreamAppliesItsOptions(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name string
		opts StreamOptions
		want jetstream.StreamConfig
	}{
		{"zero value", StreamOptions{}, jetstream.StreamConfig{Replicas: 1, Storage: jetstream.FileStorage, MaxAge: DefaultMaxAge, MaxBytes: -1}},
		{"limits", StreamOptions{MaxAge: time.Hour, MaxBytes: 1 << 20}, jetstream.StreamConfig{Replicas: 1, Storage: jetstream.FileStorage, MaxAge: time.Hour, MaxBytes: 1 << 20}},
	}
	for _, tt := range tests {
		s, err := EnsureStream(t.Context(), env.js, tt.opts)
		if err != nil {
			t.Fatalf("%s: EnsureStream: %v", tt.name, err)
		}
		got := s.CachedInfo().Config
		if got.Replicas != tt.want.Replicas || got.Storage != tt.want.Storage || got.MaxAge != tt.want.MaxAge ||
			got.MaxBytes != tt.want.MaxBytes || got.Duplicates != DuplicateWindow || got.Subjects[0] != "agentmesh.run.>" {
			t.Errorf("%s: stream config = %+v, want replicas %d, storage %v, max age %v, max bytes %d",
				tt.name, got, tt.want.Replicas, tt.want.Storage, tt.want.MaxAge, tt.want.MaxBytes)
		}
	}

	memory, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(memory.Shutdown)
	nc, err := memory.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := NewPublisher(t.Context(), nc, WithStream(StreamOptions{Storage: jetstream.MemoryStorage}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pub.JetStream().Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Errorf("NewPublisher(WithStream(memory)) made a stream with %v storage", got)
	}
}

func TestEnsureStreamConcurrently(t *testing.T) {
	// Replicas that start together, or probe one NATS that lost its store, all create the
	// stream at once; during a rolling change of the configuration, with other settings.
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	errs := make(chan error, 16)
	start := make(chan struct{})
	for i := range cap(errs) {
		opts := StreamOptions{MaxAge: time.Duration(i%2+1) * time.Hour}
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			<-start
			_, err := EnsureStream(t.Context(), js, opts)
			errs <- err
		}()
	}
	close(start)
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent EnsureStream: %v", err)
		}
	}
}
