package auth_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

func TestMay(t *testing.T) {
	alice := auth.Principal{Tenant: "acme", User: "alice"}
	approver := auth.Principal{Tenant: "acme", User: "ann", Roles: []string{auth.RoleApprover}}
	tenantAdmin := auth.Principal{Tenant: "acme", User: "tom", Roles: []string{auth.RoleTenantAdmin}}
	admin := auth.Principal{User: "root", Roles: []string{auth.RoleAdmin}}
	noTenant := auth.Principal{User: "bob", Roles: []string{auth.RoleTenantAdmin}}
	for _, tc := range []struct {
		name  string
		p     auth.Principal
		a     auth.Action
		owner string
		want  bool
	}{
		{"own run", alice, auth.ActionCancel, "acme/alice", true},
		{"another user's run", alice, auth.ActionRead, "acme/bob", false},
		{"the same user name in another tenant", alice, auth.ActionRead, "globex/alice", false},
		{"a user of no tenant", alice, auth.ActionRead, "alice", false},
		{"approver reads", approver, auth.ActionRead, "acme/bob", true},
		{"approver approves", approver, auth.ActionApprove, "acme/bob", true},
		{"approver cannot cancel", approver, auth.ActionCancel, "acme/bob", false},
		{"approver cannot answer the user's question", approver, auth.ActionAnswer, "acme/bob", false},
		{"own run's question", alice, auth.ActionAnswer, "acme/alice", true},
		{"tenant admin answers", tenantAdmin, auth.ActionAnswer, "acme/bob", true},
		{"approver of another tenant", approver, auth.ActionApprove, "globex/bob", false},
		{"tenant admin cancels", tenantAdmin, auth.ActionCancel, "acme/bob", true},
		{"tenant admin of another tenant", tenantAdmin, auth.ActionRead, "globex/bob", false},
		{"tenant admin without a tenant", noTenant, auth.ActionRead, "carol", false},
		{"admin", admin, auth.ActionCancel, "globex/bob", true},
	} {
		if got := tc.p.May(tc.a, tc.owner); got != tc.want {
			t.Errorf("%s: %s may %s a run of %q = %v, want %v", tc.name, tc.p.ID(), tc.a, tc.owner, got, tc.want)
		}
	}
}

func TestControlAt(t *testing.T) {
	for _, tc := range []struct {
		s      string
		r      rune
		at     int
		wantOK bool
	}{
		{"alice", 0, 0, false},
		{"héllo wörld ¡", 0, 0, false}, // 0xC2 0xA1 is ¡, no control
		{"a\tb", '\t', 1, true},
		{"ab\x7f", 0x7f, 2, true},
		{"é\u0085", 0x85, 2, true},
		{"x\u009b31m", 0x9b, 1, true},
	} {
		r, at, ok := auth.ControlAt(tc.s)
		if r != tc.r || at != tc.at || ok != tc.wantOK {
			t.Errorf("ControlAt(%q) = %q, %d, %v; want %q, %d, %v", tc.s, r, at, ok, tc.r, tc.at, tc.wantOK)
		}
	}
}
