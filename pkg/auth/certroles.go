package auth

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CertRoles says which roles a verified client certificate grants, by the organizational units
// (OUs) of its subject. Its zero value is the default: every OU that names a role (Roles)
// grants that role. NoCertRoles grants none, and CertRolesByOU only the roles a mapping gives
// the OUs it maps: a CA that issues certificates for other purposes too (a corporate CA, whose
// OU=admin means nothing to the mesh) then grants no role the mapping does not say.
type CertRoles struct {
	none bool
	byOU map[string]string // nil: an OU that names a role grants it
}

// NoCertRoles returns the CertRoles of certificates that grant no roles: they authenticate
// their user and tenant only.
func NoCertRoles() *CertRoles { return &CertRoles{none: true} }

// CertRolesByOU returns the CertRoles of the mapping byOU from an OU (exactly as the
// certificate writes it) to the role it grants: only the OUs it maps grant roles, and an OU
// that names a role grants nothing unless it is mapped. An empty OU or a role that is not one
// of Roles is an error naming the entry.
func CertRolesByOU(byOU map[string]string) (*CertRoles, error) {
	for _, ou := range slices.Sorted(maps.Keys(byOU)) {
		if ou == "" {
			return nil, fmt.Errorf("client_ou_roles: an organizational unit must not be empty")
		}
		if role := byOU[ou]; !slices.Contains(Roles, role) {
			return nil, fmt.Errorf("client_ou_roles[%q]: unknown role %q (want one of %s)", ou, role, strings.Join(Roles, ", "))
		}
	}
	m := make(map[string]string, len(byOU)) // not nil, even for no OU: nil is the default
	maps.Copy(m, byOU)
	return &CertRoles{byOU: m}, nil
}

// grant returns the roles of a certificate of the organizational units ous, each once.
func (r *CertRoles) grant(ous []string) []string {
	if r.none {
		return nil
	}
	var roles []string
	for _, ou := range ous {
		role, ok := ou, slices.Contains(Roles, ou)
		if r.byOU != nil {
			role, ok = r.byOU[ou]
		}
		if ok && !slices.Contains(roles, role) {
			roles = append(roles, role)
		}
	}
	return roles
}
