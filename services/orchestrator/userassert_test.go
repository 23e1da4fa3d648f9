package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"google.golang.org/grpc/metadata"
)

// TestRunAssertsItsUserOncePerLifetime: the calls of a run to the stages carry the run's
// assertion of its user, signed once and kept while a call has half its lifetime left (the
// turns of a run sign nothing more), signed anew after (a run that waited for an approval),
// and for long enough for a tool call's timeout. Without a signing key, or without mutual TLS
// (where the memory stage believes every caller), calls carry none.
func TestRunAssertsItsUserOncePerLifetime(t *testing.T) {
	pub, priv := grant.GenerateKey()
	verifier := grant.NewVerifier(pub)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{grants: grant.NewSigner(priv), assertUsers: true,
		now: func() time.Time { return clock }}
	r := &run{svc: s, id: "run-1", userID: "acme/alice"}
	token := func(ctx context.Context) string {
		t.Helper()
		md, _ := metadata.FromOutgoingContext(ctx)
		v := md.Get(auth.UserAssertionMetadata)
		if len(v) != 1 {
			t.Fatalf("%s = %q, want one assertion", auth.UserAssertionMetadata, v)
		}
		return v[0]
	}
	ctx := auth.OutgoingUser(t.Context(), r.userID)
	first := token(r.asserted(ctx, 0))
	if err := verifier.VerifyUser(first, "acme/alice", clock); err != nil {
		t.Fatalf("the run's assertion: %v", err)
	}
	clock = clock.Add(grant.UserAssertionLifetime / 4)
	if again := token(r.asserted(ctx, time.Minute)); again != first {
		t.Error("a later turn signed another assertion, with three quarters of the first left")
	}
	clock = clock.Add(grant.UserAssertionLifetime / 2) // a pause for approval
	renewed := token(r.asserted(ctx, 0))
	if renewed == first {
		t.Error("a call with a quarter of the assertion left got it, not a new one")
	}
	half := clock.Add(grant.UserAssertionLifetime / 2)
	if err := verifier.VerifyUser(renewed, "acme/alice", half); err != nil {
		t.Errorf("the new assertion is not valid for half its lifetime: %v", err)
	}
	long := 3 * grant.UserAssertionLifetime // a tool call's timeout
	err := verifier.VerifyUser(token(r.asserted(ctx, long)), "acme/alice", clock.Add(long))
	if err != nil {
		t.Errorf("the assertion of a call of timeout %v ends before the call may: %v", long, err)
	}

	s.assertUsers = false
	md, _ := metadata.FromOutgoingContext((&run{svc: s, userID: "acme/alice"}).asserted(ctx, 0))
	if v := md.Get(auth.UserAssertionMetadata); len(v) != 0 {
		t.Errorf("without mutual TLS, the call carries %q", v)
	}
	s.grants, s.assertUsers = nil, true
	md, _ = metadata.FromOutgoingContext((&run{svc: s, userID: "acme/alice"}).asserted(ctx, 0))
	if v := md.Get(auth.UserAssertionMetadata); len(v) != 0 {
		t.Errorf("without a signing key, the call carries %q", v)
	}
}
