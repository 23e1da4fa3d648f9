package auth_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"google.golang.org/grpc/metadata"
)

// received is the context of a call made with ctx, as its server sees it.
func received(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	return metadata.NewIncomingContext(context.Background(), md)
}

func TestForwardedUser(t *testing.T) {
	ann := auth.Principal{Tenant: "acme", User: "ann", Roles: []string{auth.RoleApprover, auth.RoleTenantAdmin}}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want auth.Principal
		ok   bool
	}{
		{"nobody", t.Context(), auth.Principal{}, false},
		{"a principal", auth.OutgoingPrincipal(t.Context(), ann), auth.Principal{Tenant: "acme", User: "ann", Roles: ann.Roles}, true},
		{"a user of no tenant", auth.OutgoingUser(t.Context(), "cli"), auth.Principal{User: "cli"}, true},
		{"an id that only starts with a slash", auth.OutgoingUser(t.Context(), "/x"), auth.Principal{User: "/x"}, true},
		{"a user replaces a principal, roles and all", auth.OutgoingUser(auth.OutgoingPrincipal(t.Context(), ann), "acme/bob"),
			auth.Principal{Tenant: "acme", User: "bob"}, true},
		{"forwarded by a stage", auth.ForwardUser(received(auth.OutgoingPrincipal(t.Context(), ann))), ann, true},
		{"forwarding nobody drops an earlier user", auth.ForwardUser(auth.OutgoingUser(t.Context(), "acme/bob")), auth.Principal{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := auth.IncomingUser(received(tc.ctx))
			if err != nil || ok != tc.ok || got.ID() != tc.want.ID() || !slices.Equal(got.Roles, tc.want.Roles) {
				t.Errorf("IncomingUser = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// TestOutgoingUserKeepsOtherMetadata: setting the user over metadata of the caller's own, with
// or without an earlier user, keeps that metadata and sends one user.
func TestOutgoingUserKeepsOtherMetadata(t *testing.T) {
	base := metadata.AppendToOutgoingContext(t.Context(), "x-trace-tag", "blue")
	for name, ctx := range map[string]context.Context{
		"no user before": auth.OutgoingUser(base, "acme/bob"),
		"a user before":  auth.OutgoingUser(auth.OutgoingUser(base, "acme/ann"), "acme/bob"),
	} {
		md, _ := metadata.FromOutgoingContext(ctx)
		if got := md.Get("x-trace-tag"); !slices.Equal(got, []string{"blue"}) {
			t.Errorf("%s: x-trace-tag = %q, want [blue]", name, got)
		}
		if got := md.Get(auth.UserMetadata); !slices.Equal(got, []string{"acme/bob"}) {
			t.Errorf("%s: %s = %q, want [acme/bob]", name, auth.UserMetadata, got)
		}
	}
}

func TestIncomingUserMalformed(t *testing.T) {
	for name, md := range map[string]metadata.MD{
		"two users":    metadata.Pairs(auth.UserMetadata, "a", auth.UserMetadata, "b"),
		"empty user":   metadata.Pairs(auth.UserMetadata, ""),
		"unknown role": metadata.Pairs(auth.UserMetadata, "a", auth.RolesMetadata, "approver,root"),
		"bad escape":   metadata.Pairs(auth.UserMetadata, "acme/50%zz"),
	} {
		if p, ok, err := auth.IncomingUser(metadata.NewIncomingContext(t.Context(), md)); err == nil || ok {
			t.Errorf("%s: IncomingUser = %+v, %v, %v; want an error", name, p, ok, err)
		}
	}
}

// TestUserOfAnyText: a user id of any text travels as metadata gRPC sends (printable ASCII) and
// arrives as it left, '%' and "%41" included; a printable ASCII id without '%' is itself.
func TestUserOfAnyText(t *testing.T) {
	for _, id := range []string{"acme/bob", "Société/José", "山田/太郎", "acme/50%", "acme/%41", "a\nb\x00c\x7f"} {
		md, _ := metadata.FromOutgoingContext(auth.OutgoingUser(t.Context(), id))
		for _, v := range md.Get(auth.UserMetadata) {
			for i := range len(v) {
				if v[i] < 0x20 || v[i] > 0x7E {
					t.Errorf("%q is sent as %q, not printable ASCII", id, v)
					break
				}
			}
		}
		p, ok, err := auth.IncomingUser(metadata.NewIncomingContext(t.Context(), md))
		if err != nil || !ok || p.ID() != id {
			t.Errorf("%q arrives as %q (%v, %v)", id, p.ID(), ok, err)
		}
	}
	if got := auth.EncodeUser("acme/bob"); got != "acme/bob" {
		t.Errorf("EncodeUser(acme/bob) = %q, want it unchanged", got)
	}
}

// TestUserAssertionTravels: the orchestrator's assertion travels beside the user it asserts,
// a stage forwards both unchanged, and naming another user drops it (it asserts the earlier
// one); a call with two assertions is an error.
func TestUserAssertionTravels(t *testing.T) {
	asserted := auth.OutgoingUserAssertion(auth.OutgoingUser(t.Context(), "acme/ann"), "token-of-ann")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
		ok   bool
	}{
		{"set by the orchestrator", asserted, "token-of-ann", true},
		{"set again", auth.OutgoingUserAssertion(asserted, "newer"), "newer", true},
		{"forwarded by a stage", auth.ForwardUser(received(asserted)), "token-of-ann", true},
		{"forwarding a call without one drops an earlier one",
			auth.ForwardUser(auth.OutgoingUserAssertion(t.Context(), "stale")), "", false},
		{"dropped by another user", auth.OutgoingUser(asserted, "acme/bob"), "", false},
		{"dropped by another principal",
			auth.OutgoingPrincipal(asserted, auth.Principal{User: "b"}), "", false},
		{"none", auth.OutgoingUser(t.Context(), "acme/ann"), "", false},
	} {
		got, ok, err := auth.IncomingUserAssertion(received(tc.ctx))
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("%s: IncomingUserAssertion = %q, %v, %v; want %q, %v",
				tc.name, got, ok, err, tc.want, tc.ok)
		}
	}
	two := metadata.Pairs(auth.UserAssertionMetadata, "a", auth.UserAssertionMetadata, "b")
	_, _, err := auth.IncomingUserAssertion(metadata.NewIncomingContext(t.Context(), two))
	if err == nil {
		t.Error("IncomingUserAssertion of a call with two assertions: no error")
	}
}
