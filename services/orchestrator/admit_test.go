package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// TestAdmitWaitsItsTurn: past maxStarting runs starting at once, the next waits until one
// of them gives its place back; it gives up when its caller does (the caller's error, not
// UNAVAILABLE) or when the replica drains (UNAVAILABLE).
func TestAdmitWaitsItsTurn(t *testing.T) {
	s := &Service{starts: make(chan struct{}, maxStarting), draining: make(chan struct{})}
	releases := make([]func(), maxStarting)
	for i := range releases {
		release, err := s.admit(t.Context())
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		releases[i] = release
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.admit(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a start past the limit whose caller gave up: %v, want its deadline", err)
	}

	admitted := make(chan error, 1)
	go func() {
		release, err := s.admit(t.Context())
		if err == nil {
			release()
		}
		admitted <- err
	}()
	select {
	case err := <-admitted:
		t.Fatalf("a start past the limit went on while every place was taken (%v)", err)
	case <-time.After(10 * time.Millisecond):
	}
	releases[0]()
	if err := <-admitted; err != nil {
		t.Fatalf("the waiting start, once a place was given back: %v", err)
	}

	// Every place is taken again; a drain refuses the start that waits.
	releases[0], _ = s.admit(t.Context())
	go func() {
		_, err := s.admit(t.Context())
		admitted <- err
	}()
	close(s.draining)
	if err := <-admitted; stageerr.As(err) == nil || stageerr.As(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE {
		t.Fatalf("a waiting start on a draining replica: %v, want UNAVAILABLE", err)
	}
	for _, release := range releases {
		release()
	}
}
