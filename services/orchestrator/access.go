package orchestrator

import (
	"context"
	"errors"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
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

// callerID is the user id a run request acts for. With authentication on it is the
// principal's (auth.Principal.ID): a request's user_id must then be empty or name the
// principal (its user or its id), unless the principal is an admin, who may act for any user.
// With authentication off it is the request's user_id, or "anonymous".
func (s *Service) callerID(ctx context.Context, req *agentv1.RunRequest) (string, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		if id := req.GetUserId(); id != "" {
			return id, nil
		}
		return anonymous, nil
	}
	switch id := req.GetUserId(); {
	case id == "" || id == p.User || id == p.ID():
		return p.ID(), nil
	case p.Has(auth.RoleAdmin):
		return id, nil
	default:
		s.denied(ctx, p, "act for user "+id, "")
		return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"user_id %q is not the authenticated principal %q; only an admin may act for another user", id, p.ID())
	}
}

// authorizeRun returns nil when the call's principal may do a with the run, and
// PERMISSION_DENIED (logged with the principal) when it may not. With authentication off
// everyone may, and the run is not looked up.
func (s *Service) authorizeRun(ctx context.Context, a auth.Action, runID string) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return nil
	}
	owner, err := s.ownerOf(ctx, runID)
	if err == nil && p.May(a, owner) {
		return nil
	}
	// The memory stage does not show a finished run to a principal that may not read it.
	if err != nil && stageerr.FromError(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED {
		return err
	}
	s.denied(ctx, p, string(a), runID)
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "%q may not %s run %q", p.ID(), a, runID)
}

// denied logs a refused call with who made it and how they authenticated, never the secret.
func (s *Service) denied(ctx context.Context, p auth.Principal, what, runID string) {
	s.log.WarnContext(ctx, "permission denied", "principal", p.ID(), "auth", string(p.Method), "credential", p.Key,
		"action", what, "run_id", runID)
}

// ownerOf returns the user a run acts for, wherever the run is: live on this replica, in the
// checkpoint store, or saved by the memory stage once finished.
func (s *Service) ownerOf(ctx context.Context, runID string) (string, error) {
	if r := s.liveRun(runID); r != nil {
		return r.userID, nil
	}
	if s.store != nil {
		cp, _, err := s.store.Load(ctx, runID)
		switch {
		case err == nil:
			return cp.GetUserId(), nil
		case !errors.Is(err, runstore.ErrNotFound):
			return "", storeErr(runID, err)
		}
	}
	resp, err := s.peers.Memory.GetRun(actingForCaller(ctx), &memoryv1.GetRunRequest{RunId: runID})
	if err != nil {
		return "", stageerr.FromError(err)
	}
	return resp.GetUserId(), nil
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
