package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// TestClientRolesAreValidated: auth.client_roles is "ou" or "none"; auth.client_ou_roles maps
// OUs to known roles and is not set beside it; either needs auth.client_ca. Each problem is
// an error of the configuration (exit 4) naming the setting, or the entry, and the rule.
func TestClientRolesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth Auth
		want string // "" when valid
	}{
		{"the default", Auth{ClientCA: "clients-ca.pem"}, ""},
		{"ou", Auth{ClientCA: "clients-ca.pem", ClientRoles: "ou"}, ""},
		{"none", Auth{ClientCA: "clients-ca.pem", ClientRoles: "none"}, ""},
		{"a mapping", Auth{ClientCA: "clients-ca.pem", ClientOURoles: map[string]string{"agentmesh-admins": "admin"}}, ""},
		{"another value", Auth{ClientCA: "clients-ca.pem", ClientRoles: "mapped"},
			`auth.client_roles: must be "ou" (the default: an organizational unit that names a role grants it) or "none" (client certificates grant no roles); got "mapped"`},
		{"a mapping to an unknown role", Auth{ClientCA: "clients-ca.pem",
			ClientOURoles: map[string]string{"agentmesh-admins": "admin", "agentmesh-ops": "superuser"}},
			`auth.client_ou_roles["agentmesh-ops"]: unknown role "superuser" (want one of admin, tenant_admin, approver)`},
		{"a mapping of an empty OU", Auth{ClientCA: "clients-ca.pem", ClientOURoles: map[string]string{"": "admin"}},
			"auth.client_ou_roles: an organizational unit must not be empty"},
		{"a mapping beside none", Auth{ClientCA: "clients-ca.pem", ClientRoles: "none",
			ClientOURoles: map[string]string{"agentmesh-admins": "admin"}},
			"auth.client_ou_roles: only the organizational units it maps grant roles, which auth.client_roles: none contradicts; set one of them, not both"},
		{"a mapping beside ou", Auth{ClientCA: "clients-ca.pem", ClientRoles: "ou",
			ClientOURoles: map[string]string{"agentmesh-admins": "admin"}}, "which auth.client_roles: ou contradicts"},
		{"client_roles without the client CA", Auth{ClientRoles: "none"},
			"auth.client_roles: the roles of client certificates need their CAs; set auth.client_ca"},
		{"client_ou_roles without the client CA", Auth{ClientOURoles: map[string]string{"agentmesh-admins": "admin"}},
			"auth.client_ou_roles: the roles of client certificates need their CAs; set auth.client_ca"},
	} {
		c := Default()
		c.TLS = TLS{Cert: "api.pem", Key: "api-key.pem"}
		c.Auth = tc.auth
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: Validate() = %v, want an invalid configuration with %q", tc.name, err, tc.want)
		}
	}
}

// TestClientRolesReachTheAuthenticator: the authenticator of the public API grants a client
// certificate the roles auth.client_roles and auth.client_ou_roles, loaded from a file, say:
// those its OUs name by default, none with client_roles: none, and only those of the OUs the
// mapping holds with client_ou_roles.
func TestClientRolesReachTheAuthenticator(t *testing.T) {
	const base = "tls: {cert: api.pem, key: api-key.pem}\nauth:\n  client_ca: clients-ca.pem\n"
	for _, tc := range []struct {
		name, yaml string
		ous, want  []string
	}{
		{"the default", "", []string{"admin", "approver", "ops"}, []string{"admin", "approver"}},
		{"ou", "  client_roles: ou\n", []string{"admin"}, []string{"admin"}},
		{"none", "  client_roles: none\n", []string{"admin", "approver"}, nil},
		{"a mapping, a mapped OU", "  client_ou_roles: {agentmesh-admins: admin}\n", []string{"agentmesh-admins"}, []string{"admin"}},
		{"a mapping, an OU that names a role", "  client_ou_roles: {agentmesh-admins: admin}\n", []string{"admin", "approver"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			writeFile(t, path, base+tc.yaml)
			cfg := mustLoad(t, []Layer{{Name: "explicit", Path: path, Required: true}})
			a, err := cfg.Auth.Authenticator()
			if err != nil {
				t.Fatal(err)
			}
			cert := &x509.Certificate{Subject: pkix.Name{CommonName: "carol", Organization: []string{"acme"}, OrganizationalUnit: tc.ous}}
			ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
				State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
			p, err := a.Authenticate(ctx)
			if err != nil || !slices.Equal(p.Roles, tc.want) {
				t.Errorf("a certificate of OUs %q: roles %q, %v; want %q", tc.ous, p.Roles, err, tc.want)
			}
		})
	}
}
