package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// OrchestratorIdentity is the mesh identity (Options.MeshIdentity) of the orchestrator, the only
// caller that may write runs (SaveRun, AppendTranscript) when callers are identified.
const OrchestratorIdentity = "orchestrator"

// DefaultCallers are the mesh identities the memory stage serves by default (Options.Callers,
// memory.callers): the orchestrator, and context assembly and the action stage, which search
// for the user of a run (memories, and knowledge_search). The other stages never call it.
var DefaultCallers = []string{OrchestratorIdentity, "context", "action"}

// actor returns the user the call in ctx acts for, from its auth.UserMetadata: ok is false when
// it names none, which is UNAUTHENTICATED when isolation is enforced (Options.RequireUser). Every
// caller is believed when the transport does not identify callers (Options.MeshIdentity is nil);
// otherwise only the services of the mesh are served at all, and the roles are believed from
// the orchestrator only: they are a public API caller's, whose credentials only it sees, so
// another service (a team's own stage) that claims them acts for the user alone. For the same
// reason another service is believed about the user only with the orchestrator's assertion of
// it (asserted), when Options.UserAssertions can check one.
func (s *Service) actor(ctx context.Context) (p auth.Principal, ok bool, err error) {
	caller, err := s.meshCaller(ctx)
	if err != nil {
		return auth.Principal{}, false, err
	}
	p, ok, err = auth.IncomingUser(ctx)
	if err != nil {
		return auth.Principal{}, false, stageerr.Invalid("%v", err)
	}
	if s.meshIdentity != nil && caller != OrchestratorIdentity {
		p.Roles = nil
		if err := s.asserted(ctx, caller, p, ok); err != nil {
			return auth.Principal{}, false, err
		}
	}
	if !ok && s.requireUser {
		return auth.Principal{}, false, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED,
			"memory isolation is enforced: the call must name the user it acts for in the %s metadata", auth.UserMetadata)
	}
	return p, ok, nil
}

// asserted returns nil when the call in ctx, of caller (a mesh service other than the
// orchestrator), carries the orchestrator's valid assertion (auth.UserAssertionMetadata) of p,
// the user it names (ok false: none), or when no verifier is configured. A call without its
// user, or without a valid assertion of it, is PERMISSION_DENIED: a stage that names a user it
// was never given one for (its certificate stolen, say) is refused, and one that names none
// would act for any request's user_id.
func (s *Service) asserted(ctx context.Context, caller string, p auth.Principal, ok bool) error {
	if s.assertions == nil {
		return nil
	}
	token, found, err := auth.IncomingUserAssertion(ctx)
	switch {
	case err != nil:
		return stageerr.Invalid("%v", err)
	case !ok:
		err = fmt.Errorf("%q must name the user it acts for in the %s metadata, with the "+
			"orchestrator's assertion of that user in the %s metadata",
			caller, auth.UserMetadata, auth.UserAssertionMetadata)
	case !found:
		err = fmt.Errorf("%q acts for user %q without the orchestrator's assertion of that user "+
			"in the %s metadata", caller, p.ID(), auth.UserAssertionMetadata)
	default:
		if err = s.assertions.VerifyUser(token, p.ID(), s.now()); err != nil {
			err = fmt.Errorf("%q acts for user %q, which the %s metadata does not assert: %w",
				caller, p.ID(), auth.UserAssertionMetadata, err)
		}
	}
	if err == nil {
		return nil
	}
	s.log.WarnContext(ctx, "permission denied", "caller", caller, "acting_for", p.ID(), "err", err)
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "%v", err)
}

// meshCaller returns the mesh service that made the call in ctx ("" when the transport does
// not identify callers), and PERMISSION_DENIED for a caller that is no mesh service or not one
// of the callers (Options.Callers).
func (s *Service) meshCaller(ctx context.Context) (string, error) {
	if s.meshIdentity == nil {
		return "", nil
	}
	id, ok := s.meshIdentity(ctx)
	if !ok {
		return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"the memory stage serves the services of the mesh only: the caller presented no mesh certificate")
	}
	if !slices.Contains(s.callers, id) {
		return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"the memory stage serves %s only (memory.callers), not %q", strings.Join(s.callers, ", "), id)
	}
	return id, nil
}

// owner returns the user whose memories a call on requested (a request's user_id) reads or
// changes: actingUser's, which must be a valid user id.
func (s *Service) owner(ctx context.Context, requested string) (string, error) {
	user, err := s.actingUser(ctx, requested)
	if err != nil {
		return "", err
	}
	return user, checkUser(user)
}

// actingUser returns the user a call about requested (a request's user_id) acts for: the user
// its metadata names, which requested must name too (or be empty); without one, when isolation
// is not enforced, requested. A request about another user is PERMISSION_DENIED naming both.
func (s *Service) actingUser(ctx context.Context, requested string) (string, error) {
	p, ok, err := s.actor(ctx)
	switch {
	case err != nil:
		return "", err
	case !ok || requested == p.ID():
		return requested, nil
	case requested == "":
		return p.ID(), nil
	}
	s.log.WarnContext(ctx, "permission denied", "user_id", requested, "acting_for", p.ID())
	return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		"user_id %q is not the user this call acts for (%q)", requested, p.ID())
}

// mayRead refuses to show the run of owner to a call acting for p unless p may read it
// (auth.Principal.May: its own runs, or others' by role); a call acting for nobody (ok false)
// passes, as actor let it.
func (s *Service) mayRead(ctx context.Context, p auth.Principal, ok bool, runID, owner string) error {
	if !ok || p.May(auth.ActionRead, owner) {
		return nil
	}
	s.log.WarnContext(ctx, "permission denied", "run_id", runID, "owner", owner, "acting_for", p.ID())
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		"a call acting for %q may not read run %q", p.ID(), runID)
}

// orchestratorOnly refuses a call that writes runs unless it comes from the orchestrator, when
// the transport identifies callers.
func (s *Service) orchestratorOnly(ctx context.Context, method string) error {
	id, err := s.meshCaller(ctx)
	if err != nil || s.meshIdentity == nil || id == OrchestratorIdentity {
		return err
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		"%s is served to the orchestrator only, not to %q", method, id)
}
