package runstore

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// The buckets an earlier release kept ownership in: its index of active runs and a lease a
// run, which its replicas renewed every third of the TTL; this release creates neither. An
// earlier replica adopts every run of its index whose lease is missing, so runs of this release
// never go there; a run an earlier replica started moves to this release's index (AdoptLegacy)
// once its lease is gone, when its replica died or handed it off. During a rolling deploy each
// release thus runs its own runs, and the earlier one's move over as its replicas go away.
const (
	// LegacyActiveBucket is the earlier release's index of active runs.
	LegacyActiveBucket = "AGENTMESH_ACTIVE_RUNS"
	// LegacyLeaseBucket holds the earlier release's run leases.
	LegacyLeaseBucket = "AGENTMESH_LEASES"
)

// AdoptLegacy moves to replica every run of an earlier release's index whose lease is gone (or
// held by replica, before a restart), and returns why each was free: HandedOff, or "lease
// expired". Each run is moved while replica holds its old lease, so that neither an older
// replica nor another mover takes it meanwhile: its entry in this release's index names
// replica, then its old entry and lease go. A run this release's index holds already (a
// mover stopped halfway) is left to the index's own adoption. Without an earlier release's
// buckets it does nothing.
func (s *Store) AdoptLegacy(ctx context.Context, replica string) (map[string]string, error) {
	active, err := s.js.KeyValue(ctx, LegacyActiveBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	leases, err := s.js.KeyValue(ctx, LegacyLeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	activeLog, err := s.js.Stream(ctx, "KV_"+LegacyActiveBucket)
	if err != nil {
		return nil, err
	}
	ids, err := subjects(ctx, activeLog, LegacyActiveBucket)
	if err != nil {
		return nil, err
	}
	adopted := map[string]string{}
	for _, id := range ids {
		if why, ok := s.moveLegacy(ctx, active, activeLog, leases, id, replica); ok {
			adopted[id] = why
		}
	}
	return adopted, nil
}

// moveLegacy moves the run id of an earlier release's index to this release's, owned by
// replica, when its lease is gone; ok reports that replica owns it now.
func (s *Store) moveLegacy(ctx context.Context, active jetstream.KeyValue, activeLog jetstream.Stream, leases jetstream.KeyValue, id, replica string) (why string, ok bool) {
	if e, err := leases.Get(ctx, id); err == nil {
		if string(e.Value()) != replica || leases.Delete(ctx, id, jetstream.LastRevision(e.Revision())) != nil {
			return "", false // held by a live replica
		}
	} else if !isNotFound(err) {
		return "", false
	}
	rev, err := leases.Create(ctx, id, []byte(replica))
	if err != nil {
		return "", false // another mover, or an earlier replica, was faster
	}
	defer func() { _ = leases.Delete(ctx, id, jetstream.LastRevision(rev)) }()
	why = "lease expired"
	if e, err := active.Get(ctx, id); err == nil && string(e.Value()) == HandedOff {
		why = HandedOff
	}
	// A run this release's index holds already is left to the index's own adoption; either way
	// it leaves the earlier index.
	_, err = s.buckets().active.Create(ctx, id, []byte(replica))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return "", false
	}
	purged := activeLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(LegacyActiveBucket, id)))
	if err != nil || purged != nil {
		return "", false // a new entry that names replica: the index's adoption takes it from here
	}
	return why, true
}
