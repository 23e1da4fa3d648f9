package orchestrator

import (
	"context"
	"errors"
	"strings"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// anonymous is the user of a run started without a user_id while authentication is off.
const anonymous = "anonymous"

// idempotencyKey scopes a request's idempotency key to its user, so two users' keys never
// name each other's runs.
type idempotencyKey struct{ user, key string }

// callerID is the user id a request (a run's, or Decide's) acts for, requested being its
// user_id. With authentication on it is the principal's (auth.Principal.ID): requested must
// then be empty or name the principal (its user or its id), unless the principal is an admin,
// who may act for any user a principal can be (principalShaped). With authentication off it
// is requested, or "anonymous".
func (s *Service) callerID(ctx context.Context, requested string) (string, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		if requested != "" {
			return requested, nil
		}
		return anonymous, nil
	}
	switch id := requested; {
	case id == "" || id == p.User || id == p.ID():
		return p.ID(), nil
	case p.Has(auth.RoleAdmin):
		if !principalShaped(id) {
			// Such an id would read as a run of its first part's tenant, for that tenant's admins.
			return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT,
				`user_id: must be "user" or "tenant/user", neither part empty nor holding '/', as a principal's id is; got %q`, id)
		}
		return id, nil
	default:
		s.denied(ctx, p, "act for user "+id, "")
		return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"user_id %q is not the authenticated principal %q; only an admin may act for another user", id, p.ID())
	}
}

// principalShaped reports whether id is one a principal can have (auth.Principal.ID): "user"
// or "tenant/user", with neither part empty nor holding a '/'.
func principalShaped(id string) bool {
	tenant, user, found := strings.Cut(id, "/")
	if !found {
		return id != ""
	}
	return tenant != "" && user != "" && !strings.Contains(user, "/")
}

// principalID is the id of the call's authenticated principal (auth.Principal.ID), recorded
// with what it hands a run (a decision, an answer, a cancellation); empty with authentication
// off.
func principalID(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok {
		return p.ID()
	}
	return ""
}

// authorizeRun returns nil when the call's principal may do a with the run, and the error
// authorize returns when it may not. With authentication off everyone may, and the run is
// not looked up.
func (s *Service) authorizeRun(ctx context.Context, a auth.Action, runID string) error {
	if _, ok := auth.FromContext(ctx); !ok {
		return nil
	}
	loc, err := s.locate(ctx, runID)
	return s.authorize(ctx, a, runID, loc, err)
}

// authorize decides whether the call's principal may do a with the run found at loc, or not
// found for err: nil when it may. A run the principal may not read is answered as one that
// does not exist, NOT_FOUND with the same message (noSuchRun), so that no caller can tell
// which run ids exist; one it may read, but not do a with, is PERMISSION_DENIED. Either refusal
// is logged with the principal. err, the reason the run could not be found, is returned
// otherwise. With authentication off it returns err.
func (s *Service) authorize(ctx context.Context, a auth.Action, runID string, loc located, err error) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return err
	}
	if err == nil {
		switch owner := loc.owner(); {
		case p.May(a, owner):
			return nil
		case p.May(auth.ActionRead, owner):
			s.denied(ctx, p, string(a), runID)
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "%q may not %s run %q", p.ID(), a, runID)
		}
		s.denied(ctx, p, string(a), runID)
		return noSuchRun(runID)
	}
	switch stageerr.FromError(err).Code {
	case typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED:
		// The memory stage does not show a finished run to a principal that may not read it.
		s.denied(ctx, p, string(a), runID)
		return noSuchRun(runID)
	case typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND:
		return noSuchRun(runID)
	}
	return err
}

// noSuchRun is the NOT_FOUND of an authenticated call about a run that does not exist, or
// that the caller may not read: one error for both, which tells them apart by nothing.
func noSuchRun(runID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q not found", runID)
}

// denied logs a refused call with who made it and how they authenticated, never the secret.
func (s *Service) denied(ctx context.Context, p auth.Principal, what, runID string) {
	s.log.WarnContext(ctx, "permission denied", "principal", p.ID(), "auth", string(p.Method), "credential", p.Key,
		"action", what, "run_id", runID)
}

// located is where a run was found: live on this replica, in the checkpoint store, or saved
// by the memory stage once finished; exactly one is set.
type located struct {
	live  *run
	cp    *checkpointv1.RunCheckpoint
	saved *memoryv1.GetRunResponse
}

// owner is the user the located run acts for.
func (l located) owner() string {
	switch {
	case l.live != nil:
		return l.live.userID
	case l.cp != nil:
		return l.cp.GetUserId()
	}
	return l.saved.GetUserId()
}

// locate finds a run wherever it is, reading each place at most once, so a caller can both
// authorise and answer from what it found.
func (s *Service) locate(ctx context.Context, runID string) (located, error) {
	if r := s.liveRun(runID); r != nil {
		return located{live: r}, nil
	}
	if s.store != nil {
		cp, _, err := s.store.Load(ctx, runID)
		switch {
		case err == nil:
			return located{cp: cp}, nil
		case !errors.Is(err, runstore.ErrNotFound):
			return located{}, storeErr(ctx, runID, err)
		}
	}
	resp, err := whenReady(actingForCaller(ctx), "memory", s.peers.Memory.GetRun, &memoryv1.GetRunRequest{RunId: runID})
	if err != nil {
		return located{}, stageerr.FromError(err)
	}
	return located{saved: resp}, nil
}

// actingForCaller returns the context of a public API call whose calls to the stages act for
// its authenticated caller (its id and roles), so that the memory stage shows it only the runs
// it may read; ctx itself when authentication is off.
func actingForCaller(ctx context.Context) context.Context {
	if p, ok := auth.FromContext(ctx); ok {
		return auth.OutgoingPrincipal(ctx, p)
	}
	return ctx
}
