package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id to drop a republished event.
const DuplicateWindow = 2 * time.Minute

// DefaultMaxAge is how long the stream keeps a run's events.
const DefaultMaxAge = 7 * 24 * time.Hour

// EnsureStream creates the stream AGENTMESH_RUNS on "agentmesh.run.>", or updates an existing
// one to this configuration: file storage, a DuplicateWindow de-duplication window and events
// kept for DefaultMaxAge.
func EnsureStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "agentmesh run events",
		Subjects:    []string{subjectPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      DefaultMaxAge,
		Duplicates:  DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamName, err)
	}
	return s, nil
}
