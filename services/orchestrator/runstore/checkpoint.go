package runstore

import (
	"context"
	"errors"
	"fmt"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Version is the RunCheckpoint format this build writes and reads.
const Version = 1

// Create stores the first checkpoint of a run and marks the run active; ErrExists when the
// run id is taken. It returns the checkpoint's revision.
func (s *Store) Create(ctx context.Context, cp *checkpointv1.RunCheckpoint) (uint64, error) {
	data, err := s.encode(ctx, cp)
	if err != nil {
		return 0, err
	}
	var rev uint64
	err = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if rev, err = b.checkpoints.Create(ctx, cp.GetRunId(), data); err != nil {
			return err
		}
		_, err = b.active.Put(ctx, cp.GetRunId(), []byte(cp.GetReplica()))
		return err
	})
	if err != nil {
		return 0, mapErr(err)
	}
	s.replacedBody(ctx, cp.GetRunId(), cp.GetBodyObject())
	return rev, nil
}

// Save replaces a run's checkpoint written at revision rev and returns the new revision;
// ErrConflict when rev is no longer the latest (another replica advanced the run). A
// checkpoint that the store lost (NATS restarted with an empty store) is created again.
func (s *Store) Save(ctx context.Context, cp *checkpointv1.RunCheckpoint, rev uint64) (uint64, error) {
	data, err := s.encode(ctx, cp)
	if err != nil {
		return 0, err
	}
	var next uint64
	err = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		next, err = b.checkpoints.Update(ctx, cp.GetRunId(), data, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if _, getErr := b.checkpoints.Get(ctx, cp.GetRunId()); isNotFound(getErr) {
				// The store lost the key: the owner's state is the only copy left.
				next, err = b.checkpoints.Create(ctx, cp.GetRunId(), data)
				if err == nil && cp.GetPhase() != checkpointv1.Phase_PHASE_FINISHED {
					_, err = b.active.Put(ctx, cp.GetRunId(), []byte(cp.GetReplica()))
				}
			}
		}
		return err
	})
	if err != nil {
		return 0, mapErr(err)
	}
	s.replacedBody(ctx, cp.GetRunId(), cp.GetBodyObject())
	return next, nil
}

// replacedBody records the body the run's checkpoint now uses ("" for none) and deletes the
// one it replaced.
func (s *Store) replacedBody(ctx context.Context, runID, current string) {
	s.mu.Lock()
	old := s.bodyNames[runID]
	if current == "" {
		delete(s.bodyNames, runID)
	} else {
		s.bodyNames[runID] = current
	}
	bodies := s.b.bodies
	s.mu.Unlock()
	if old != "" && old != current {
		_ = bodies.Delete(ctx, old) // a body left behind only costs space
	}
}

// Load returns a run's checkpoint and its revision; ErrNotFound when the store has none.
func (s *Store) Load(ctx context.Context, runID string) (*checkpointv1.RunCheckpoint, uint64, error) {
	var (
		cp  *checkpointv1.RunCheckpoint
		rev uint64
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		e, err := b.checkpoints.Get(ctx, runID)
		if err != nil {
			return err
		}
		cp = &checkpointv1.RunCheckpoint{}
		if err := proto.Unmarshal(e.Value(), cp); err != nil {
			return fmt.Errorf("runstore: checkpoint of run %s is corrupt: %w", runID, err)
		}
		rev = e.Revision()
		s.rememberBody(runID, cp.GetBodyObject())
		if name := cp.GetBodyObject(); name != "" {
			body, err := b.bodies.GetBytes(ctx, name)
			if err != nil {
				return fmt.Errorf("runstore: body %s of run %s: %w", name, runID, err)
			}
			cp = &checkpointv1.RunCheckpoint{}
			if err := proto.Unmarshal(body, cp); err != nil {
				return fmt.Errorf("runstore: checkpoint body of run %s is corrupt: %w", runID, err)
			}
			cp.BodyObject = name
		}
		return nil
	})
	if err != nil {
		return nil, 0, mapErr(err)
	}
	if cp.GetVersion() > Version {
		return nil, 0, fmt.Errorf("runstore: checkpoint of run %s has version %d; this build reads up to %d", runID, cp.GetVersion(), Version)
	}
	return cp, rev, nil
}

// rememberBody records the body a loaded checkpoint uses, so the next Save can delete it.
func (s *Store) rememberBody(runID, name string) {
	if name == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodyNames[runID] = name
}

// Retire removes a finished run from the index of active runs and drops its inputs.
func (s *Store) Retire(ctx context.Context, runID string) error {
	err := mapErr(s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if err := b.active.Delete(ctx, runID); err != nil && !isNotFound(err) {
			return err
		}
		return purgeInputs(ctx, b.inputs, runID)
	}))
	s.mu.Lock()
	delete(s.bodyNames, runID)
	s.mu.Unlock()
	return err
}

// HandedOff is the note of an active run whose owner handed it off (see NoteOf).
const HandedOff = "handed off"

// Active lists the runs not yet finished.
func (s *Store) Active(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.retry(ctx, func(ctx context.Context) error {
		lister, err := s.buckets().active.ListKeys(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = lister.Stop() }()
		ids = ids[:0]
		for k := range lister.Keys() {
			ids = append(ids, k)
		}
		return nil
	})
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return ids, mapErr(err)
}

// NoteOf returns the note of an active run; ErrNotFound when the run is not active.
func (s *Store) NoteOf(ctx context.Context, runID string) (string, error) {
	var note string
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().active.Get(ctx, runID)
		if err != nil {
			return err
		}
		note = string(e.Value())
		return nil
	})
	return note, mapErr(err)
}

// Note sets the note of an active run: the replica that owns it, or HandedOff.
func (s *Store) Note(ctx context.Context, runID, note string) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		_, err := s.buckets().active.Put(ctx, runID, []byte(note))
		return err
	}))
}

// encode marshals cp; a checkpoint too large for one entry goes to the object store under a
// fresh name and the entry holds a reference to it. The previous body is left to be replaced:
// names are unique per write, so a stale writer can never corrupt the current body.
func (s *Store) encode(ctx context.Context, cp *checkpointv1.RunCheckpoint) ([]byte, error) {
	cp.Version = Version
	cp.BodyObject = ""
	data, err := proto.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("runstore: encode checkpoint of run %s: %w", cp.GetRunId(), err)
	}
	if kvbody.Fits(s.nc, len(data)) {
		return data, nil
	}
	var name string
	err = s.retry(ctx, func(ctx context.Context) (err error) {
		name, err = kvbody.Put(ctx, s.buckets().bodies, cp.GetRunId(), data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runstore: store checkpoint body of run %s: %w", cp.GetRunId(), err)
	}
	cp.BodyObject = name
	ref := &checkpointv1.RunCheckpoint{Version: Version, RunId: cp.GetRunId(), Phase: cp.GetPhase(), UserId: cp.GetUserId(), BodyObject: name}
	return proto.Marshal(ref)
}
