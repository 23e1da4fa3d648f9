package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/pkg/config"
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id to drop a republished event.
const DuplicateWindow = config.EventDuplicateWindowMS * time.Millisecond

// DefaultMaxAge is how long the stream keeps a run's events unless StreamOptions say otherwise.
const DefaultMaxAge = config.DefaultStreamMaxAgeMS * time.Millisecond

// StreamOptions are the settings of the stream AGENTMESH_RUNS. The zero value is one replica,
// file storage, events kept for DefaultMaxAge and no size limit.
type StreamOptions struct {
	// Replicas is the stream's replication factor (1 for a single server, 3 for a three-node
	// cluster); 0 means 1.
	Replicas int
	// Storage is where JetStream keeps the events: jetstream.FileStorage (the zero value,
	// survives a NATS restart) or jetstream.MemoryStorage.
	Storage jetstream.StorageType
	// MaxAge is how long the stream keeps an event; 0 means DefaultMaxAge.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size, the oldest events going first; 0 means unlimited.
	MaxBytes int64
}

// StreamOptionsFromConfig returns the stream settings of the configuration's nats section
// (replicas, storage, stream_max_age_ms, stream_max_bytes).
func StreamOptionsFromConfig(n config.NATS) StreamOptions {
	return StreamOptions{
		Replicas: n.Replicas,
		Storage:  Storage(n),
		MaxAge:   time.Duration(n.StreamMaxAgeMS) * time.Millisecond,
		MaxBytes: n.StreamMaxBytes,
	}
}

// Storage is the JetStream storage the configuration's nats.storage names, for the stream and
// for every key-value bucket of the mesh: file unless it says memory.
func Storage(n config.NATS) jetstream.StorageType {
	if n.Storage == config.StorageMemory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// config returns the JetStream configuration of the stream with these settings.
func (o StreamOptions) config() jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:        StreamName,
		Description: "agentmesh run events",
		Subjects:    []string{subjectPrefix + ">"},
		Storage:     o.Storage,
		Replicas:    max(o.Replicas, 1),
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.MaxAge,
		MaxBytes:    o.MaxBytes,
		Duplicates:  DuplicateWindow,
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = -1
	}
	return cfg
}

// EnsureStream creates the stream AGENTMESH_RUNS on "agentmesh.run.>" with the settings of
// opts, or updates an existing one to them. The stream de-duplicates by Nats-Msg-Id within
// DuplicateWindow and drops its oldest events when a limit is reached.
func EnsureStream(ctx context.Context, js jetstream.JetStream, opts StreamOptions) (jetstream.Stream, error) {
	cfg := opts.config()
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another publisher (a replica starting too, or probing the same NATS after it lost its
		// store) created the stream, with other settings, between this update and create.
		s, err = js.UpdateStream(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamName, err)
	}
	return s, nil
}
