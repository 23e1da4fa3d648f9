package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// A run started with an idempotency key claims the key (reserve), then stores its first
// checkpoint (Create): two writes, between which its replica may fail (it crashes, or the
// claim's answer is lost and its caller is told the store failed). The key then names a run
// that never stored anything, and every retry with the key, the very thing keys are for,
// would wait on it until its deadline for the key's whole lifetime. A key that has named such
// a run for the store's ClaimTimeout (durability.claim_timeout_ms, a minute: far longer than
// a live replica takes between the two writes, each bounded by the store's attempt timeout,
// and than the clocks of a replica and NATS, whose time the claim carries, drift apart) is
// freed, and the retry starts its run again, claiming the key anew.

// maxClaims bounds how many times a request starts again after freeing a key (or finding it
// freed): each claim it found named a run that never stored anything.
const maxClaims = 3

// errKeyFreed is awaitStored's answer when the key no longer names the run: start again.
var errKeyFreed = errors.New("the idempotency key no longer names the run")

// awaitStored waits until the run an idempotency key names (existing) has stored its first
// checkpoint, or is live here, and returns nil; errKeyFreed when the key no longer names it,
// or named it for the store's ClaimTimeout with nothing stored, and is now freed.
func (s *Service) awaitStored(ctx context.Context, existing existingRun) error {
	if s.store == nil {
		return nil // the key and the run are this replica's, created together
	}
	for {
		if r := s.liveRun(existing.id); r != nil {
			return s.keysOwn(ctx, existing, r.userID)
		}
		switch cp, err := s.store.State(ctx, existing.id); {
		case err == nil:
			return s.keysOwn(ctx, existing, cp.GetUserId()) // its checkpoint, or its tombstone once retired
		case !errors.Is(err, runstore.ErrNotFound):
			return storeErr(ctx, existing.id, err)
		}
		c, err := s.store.Claimed(ctx, existing.userID, existing.key)
		switch {
		case errors.Is(err, runstore.ErrNotFound) || err == nil && c.RunID != existing.id:
			return errKeyFreed
		case err != nil:
			return storeErr(ctx, existing.id, fmt.Errorf("reading idempotency key: %w", err))
		}
		wait := time.Until(c.At.Add(s.store.ClaimTimeout()))
		if wait <= 0 {
			if err := s.store.Unclaim(ctx, existing.userID, existing.key, existing.id); err != nil {
				return storeErr(ctx, existing.id, fmt.Errorf("freeing idempotency key: %w", err))
			}
			s.log.WarnContext(ctx, "an idempotency key named a run that never stored anything; freed it for this request's run",
				"run_id", existing.id, "claimed_at", c.At)
			return errKeyFreed
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err = s.store.AwaitStored(wctx, existing.id)
		cancel()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err == nil {
			return nil
		}
		// The wait ended with nothing stored, or the watch failed: look again.
	}
}

// keysOwn returns nil when the run an idempotency key names (existing) acts for owner, the
// key's user, and otherwise frees the key and returns errKeyFreed: a key names only its own
// user's runs. A request whose run_id is another user's run claims its key before it finds
// the id taken, and frees it then; a replica that failed between the two left the key naming
// that run, whose result every retry with the key was answered with. An owner that is not
// known (empty) is taken as the key's.
func (s *Service) keysOwn(ctx context.Context, existing existingRun, owner string) error {
	if owner == "" || owner == existing.userID {
		return nil
	}
	if err := s.store.Unclaim(ctx, existing.userID, existing.key, existing.id); err != nil {
		return storeErr(ctx, existing.id, fmt.Errorf("freeing idempotency key: %w", err))
	}
	s.log.WarnContext(ctx, "an idempotency key named a run of another user; freed it for this request's run",
		"run_id", existing.id, "user_id", existing.userID)
	return errKeyFreed
}

// checkClaim makes sure the idempotency key of r, a run just created, still names it, and
// returns an error otherwise, having discarded r: existingRun for the run the key now names,
// errKeyFreed, or the failure of the key's read. A replica that stalled for the ClaimTimeout
// between claiming the key and storing the run finds the key freed, or another request's run
// in its place, and must not run a second run for one key. A run whose key could not be read
// goes too: its caller is told the store failed, and a run kept stored would be resumed by
// this replica's keeper as its own.
func (s *Service) checkClaim(ctx context.Context, r *run) error {
	key := r.req.GetIdempotencyKey()
	c, err := s.store.Claimed(ctx, r.userID, key)
	if err == nil && c.RunID == r.id {
		return nil
	}
	if derr := s.store.Discard(context.WithoutCancel(ctx), r.id); derr != nil {
		s.log.WarnContext(ctx, "discarding a run whose idempotency key was freed, or could not be read, failed; the keeper discards it later", "run_id", r.id, "err", derr)
		s.refuse(r.id)
	}
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		return fmt.Errorf("%w: run %s", errKeyFreed, r.id)
	case err != nil:
		return err
	}
	return foundRun(r, keyClaim(r), c)
}
