package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// withClientCert is ctx of a call whose TLS handshake verified a client certificate of the
// subject acme/carol with the organizational units ous.
func withClientCert(ctx context.Context, ous ...string) context.Context {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "carol", Organization: []string{"acme"}, OrganizationalUnit: ous}}
	state := tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
	return peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: state}})
}

// TestCertRoles: by default every organizational unit of a client certificate that names a
// role grants it; NoCertRoles grants none; with a mapping only the OUs it maps grant roles,
// the roles it maps them to, and an OU that names a role grants nothing unless it is mapped.
func TestCertRoles(t *testing.T) {
	mapped, err := auth.CertRolesByOU(map[string]string{
		"agentmesh-admins": auth.RoleAdmin, "agentmesh-approvers": auth.RoleApprover, "approvers": auth.RoleApprover,
		auth.RoleTenantAdmin: auth.RoleTenantAdmin,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		roles *auth.CertRoles
		ous   []string
		want  []string
	}{
		{"default: OUs that name roles", &auth.CertRoles{}, []string{"admin", "engineering", "approver"}, []string{"admin", "approver"}},
		{"default: an OU of another case is no role", &auth.CertRoles{}, []string{"Admin"}, nil},
		{"none: an OU that names a role", auth.NoCertRoles(), []string{"admin", "approver"}, nil},
		{"mapped: a mapped OU", mapped, []string{"engineering", "agentmesh-admins"}, []string{"admin"}},
		{"mapped: an OU that names a role but is not mapped", mapped, []string{"admin", "approver"}, nil},
		{"mapped: an OU that names a role and is mapped to it", mapped, []string{"tenant_admin"}, []string{"tenant_admin"}},
		{"mapped: two OUs of one role grant it once", mapped, []string{"approvers", "agentmesh-approvers"}, []string{"approver"}},
		{"mapped: no OU", mapped, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := auth.New(nil, tc.roles)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Authenticate(withClientCert(t.Context(), tc.ous...))
			if err != nil {
				t.Fatalf("a client certificate of OUs %q: %v", tc.ous, err)
			}
			if p.ID() != "acme/carol" || p.Method != auth.MethodMTLS || !slices.Equal(p.Roles, tc.want) {
				t.Errorf("a client certificate of OUs %q: %s of roles %q (%s), want acme/carol of roles %q (mtls)",
					tc.ous, p.ID(), p.Roles, p.Method, tc.want)
			}
		})
	}
}

// TestNoCertRolesForNoCertificates: an Authenticator without CertRoles takes no client
// certificate, whatever its OUs.
func TestNoCertRolesForNoCertificates(t *testing.T) {
	a, err := auth.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(withClientCert(t.Context(), "admin")); status.Code(stageerr.ToStatus(err)) != codes.Unauthenticated {
		t.Errorf("a client certificate without CertRoles: %+v %v, want UNAUTHENTICATED", p, err)
	}
}

// TestCertRolesByOURefusesAnUnknownRole: a mapping to a role that is not one of auth.Roles, or
// of an empty OU, is an error naming the entry and the rule; an empty mapping grants no roles.
func TestCertRolesByOURefusesAnUnknownRole(t *testing.T) {
	for _, tc := range []struct {
		byOU map[string]string
		want string
	}{
		{map[string]string{"agentmesh-admins": "admin", "ops": "root"},
			`client_ou_roles["ops"]: unknown role "root" (want one of admin, tenant_admin, approver)`},
		{map[string]string{"ops": ""}, `client_ou_roles["ops"]: unknown role ""`},
		{map[string]string{"": "admin"}, "client_ou_roles: an organizational unit must not be empty"},
	} {
		if _, err := auth.CertRolesByOU(tc.byOU); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CertRolesByOU(%q): %v, want %s", tc.byOU, err, tc.want)
		}
	}
	empty, err := auth.CertRolesByOU(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(nil, empty)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(withClientCert(t.Context(), "admin")); err != nil || len(p.Roles) != 0 {
		t.Errorf("an empty mapping, a certificate of OU admin: roles %q, %v; want none", p.Roles, err)
	}
}
