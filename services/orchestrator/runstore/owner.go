package runstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// A run is owned by the replica its entry in the index of active runs names (Create writes it,
// TakeOver moves it, HandOff gives it up); a replica is alive while its heartbeat (Beat) lives in
// the replicas' bucket, which forgets it LeaseTTL after its last beat. A run is free to adopt
// when its entry says HandedOff or names a replica that is not alive. Liveness thus costs one
// write a replica every beat, however many runs it owns: a lease a run, renewed every third
// of the TTL, cost 10,000 runs waiting a minute on their model some 3,000 writes a second, and
// a renewal pass that fell behind on a busy replica let leases expire (issue 15).

// HandedOff is the owner a run's entry names once its replica handed it off (see HandOff).
const HandedOff = "handed off"

// replicaName is what a replica's name may hold: it is a key of the replicas' bucket.
var replicaName = regexp.MustCompile(`^[-_=a-zA-Z0-9]+(\.[-_=a-zA-Z0-9]+)*$`)

// CheckReplica reports a replica name that cannot name a heartbeat.
func CheckReplica(name string) error {
	if !replicaName.MatchString(name) {
		return fmt.Errorf("replica name %q: must be letters, digits, '-', '_' and '=', in parts joined by single dots", name)
	}
	return nil
}

// ErrNameTaken is a heartbeat another process beat since this one's last beat: two replicas
// share a name, and each takes the other's runs for its own.
var ErrNameTaken = errors.New("another process beats this replica's heartbeat: replica names must be unique")

// Beat records that replica is alive, for LeaseTTL. rev is the revision of its previous
// beat, 0 for the first one: a first beat takes the replica's name whatever held it (the same
// replica before a restart). It returns the beat's revision; ErrConflict when the heartbeat at
// rev is gone: it lapsed (the replica or NATS stalled for a TTL), and other replicas may
// have adopted this one's runs meanwhile; ErrNameTaken when another process beat it since.
// Beat again with rev 0.
//
// Each heartbeat holds a value of this process's own, so that a beat stored after rev whose
// answer was lost (the request timed out, the beat landed) is told from another process's:
// this beat then goes after it, not a name taken. It is written, not taken for this one: the
// lease the caller counts from this beat's sending must not outlast the heartbeat.
func (s *Store) Beat(ctx context.Context, replica string, rev uint64) (uint64, error) {
	var next uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		var err error
		if rev == 0 {
			next, err = b.replicas.Put(ctx, replica, s.beat)
			return err
		}
		next, err = b.replicas.Update(ctx, replica, s.beat, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			switch e, getErr := b.replicas.Get(ctx, replica); {
			case getErr == nil && bytes.Equal(e.Value(), s.beat): // this process's own, its answer lost
				next, err = b.replicas.Update(ctx, replica, s.beat, e.Revision())
			case getErr == nil:
				return ErrNameTaken
			}
		}
		return err
	})
	return next, mapErr(err)
}

// drainingSuffix marks the heartbeat key of a replica that drains: a replica name holds no '/'.
const drainingSuffix = "/draining"

// MarkDraining records, for LeaseTTL, that replica drains: it hands its runs off, so other
// replicas read their owners again (see Alive). A draining replica marks itself again every
// beat.
func (s *Store) MarkDraining(ctx context.Context, replica string) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		_, err := s.buckets().replicas.Put(ctx, replica+drainingSuffix, nil)
		return err
	}))
}

// Leave removes replica's heartbeat and draining mark: it runs nothing any more, and the
// runs that still name it (their hand-off failed) are adopted at the other replicas' next
// pass, not once the heartbeat has expired. The keys are purged, not deleted, as Alive lists
// the subjects that hold a message.
func (s *Store) Leave(ctx context.Context, replica string) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		log := s.buckets().replicaLog
		for _, key := range []string{replica, replica + drainingSuffix} {
			if err := log.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(ReplicaBucket, key))); err != nil {
				return err
			}
		}
		return nil
	}))
}

// Alive returns the replicas whose heartbeat lives, and those of them that drain (marked by
// MarkDraining): the subjects of the replicas' bucket's stream, in one request.
func (s *Store) Alive(ctx context.Context) (alive, draining map[string]bool, err error) {
	alive, draining = map[string]bool{}, map[string]bool{}
	err = s.retry(ctx, func(ctx context.Context) error {
		keys, err := subjects(ctx, s.buckets().replicaLog, ReplicaBucket)
		for _, k := range keys {
			if name, ok := strings.CutSuffix(k, drainingSuffix); ok {
				alive[name], draining[name] = true, true
			} else {
				alive[k] = true
			}
		}
		return err
	})
	return alive, draining, mapErr(err)
}

// Beating reports whether replica's heartbeat is in the store now. Alive lists every replica's
// at once; a keeper that reads a run's owner after listing them asks again with Beating before
// it takes the run for its owner's death: a replica that started meanwhile, under the name of
// one that died, may have beaten and taken the run in between.
func (s *Store) Beating(ctx context.Context, replica string) (bool, error) {
	return s.has(ctx, func(b buckets) jetstream.KeyValue { return b.replicas }, replica)
}

// Owner returns the replica an active run's entry names (or HandedOff) and the entry's
// revision, for TakeOver; ErrNotFound when the run is not active.
func (s *Store) Owner(ctx context.Context, runID string) (string, uint64, error) {
	var (
		owner string
		rev   uint64
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().active.Get(ctx, runID)
		if err != nil {
			return err
		}
		owner, rev = string(e.Value()), e.Revision()
		return nil
	})
	return owner, rev, mapErr(err)
}

// TakeOver makes replica the owner of an active run whose entry is at revision rev (Owner);
// ErrConflict when another replica took it first.
func (s *Store) TakeOver(ctx context.Context, runID, replica string, rev uint64) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		_, err := s.buckets().active.Update(ctx, runID, []byte(replica), rev)
		return err
	}))
}

// HandOff gives up replica's ownership of a run, so that another replica (or replica itself)
// adopts it at once; ErrConflict when replica does not own it (it lost the run, or the run is
// no longer active).
func (s *Store) HandOff(ctx context.Context, runID, replica string) error {
	owner, rev, err := s.Owner(ctx, runID)
	switch {
	case errors.Is(err, ErrNotFound):
		return ErrConflict
	case err != nil:
		return err
	case owner != replica:
		return ErrConflict
	}
	return s.TakeOver(ctx, runID, HandedOff, rev)
}

// Active lists the runs not yet finished: the subjects of the active bucket's stream, which
// holds a message for each indexed run and none for a retired one (Retire purges its key).
// The stream's state names them in one paged answer; a key watch (the KV's ListKeys) would
// deliver a message per run through a consumer of its own, and the keeper lists them often.
func (s *Store) Active(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		ids, err = subjects(ctx, s.buckets().activeLog, ActiveBucket)
		return err
	})
	return ids, mapErr(err)
}

// subjects returns the keys bucket, kept in stream, holds a message for, sorted.
func subjects(ctx context.Context, stream jetstream.Stream, bucket string) ([]string, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(kvSubject(bucket, ">")))
	if err != nil {
		return nil, err
	}
	prefix := kvSubject(bucket, "")
	keys := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, prefix))
	}
	slices.Sort(keys)
	return keys, nil
}
