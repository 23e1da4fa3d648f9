package orchestrator

import (
	"context"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
)

// userAssertion is a run's signed assertion of its user (grant.Signer.SignUser) and when it
// expires.
type userAssertion struct {
	token   string
	expires time.Time
}

// asserted returns ctx whose calls carry the orchestrator's assertion of the run's user
// (auth.UserAssertionMetadata), for the stages that call the memory stage on the run's behalf
// (context assembly, the action stage) to forward: with mTLS, the memory stage believes them
// about the user only with it. A call that may take up to timeout gets an assertion valid for
// at least half of grant.UserAssertionLifetime more than that: the run keeps the one it minted
// and signs another only when less is left, so a run signs about one an hour, however many
// turns it takes, and a run that went on after waiting days for an approval gets a fresh one.
// ctx itself when the orchestrator has no signing key (approvals.signing_key: it then signs
// no approval grant either), or asserts no users (Options.AssertUsers: without mutual TLS).
func (r *run) asserted(ctx context.Context, timeout time.Duration) context.Context {
	signer := r.svc.grants
	if signer == nil || !r.svc.assertUsers {
		return ctx
	}
	now, need := r.svc.now(), timeout+grant.UserAssertionLifetime/2
	a := r.assertion.Load()
	if a == nil || a.expires.Sub(now) < need {
		expires := now.Add(max(grant.UserAssertionLifetime, need+grant.UserAssertionLifetime/2)).
			Truncate(time.Second) // as the assertion says it
		a = &userAssertion{token: signer.SignUser(r.userID, expires), expires: expires}
		r.assertion.Store(a) // calls made at once may each sign one: either does
	}
	return auth.OutgoingUserAssertion(ctx, a.token)
}
