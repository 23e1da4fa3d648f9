package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Roles a principal can hold. A principal without roles uses its own runs and memories only.
const (
	// RoleAdmin reads, watches, cancels and approves every run, and may start runs for any user
	// (impersonation, with a user_id in the request).
	RoleAdmin = "admin"
	// RoleTenantAdmin reads, watches, cancels, approves and answers every run of its tenant.
	RoleTenantAdmin = "tenant_admin"
	// RoleApprover reads, watches and approves (or rejects) the calls of every run of its tenant.
	RoleApprover = "approver"
)

// Roles are the roles a configuration may grant.
var Roles = []string{RoleAdmin, RoleTenantAdmin, RoleApprover}

// Method says how a principal was authenticated.
type Method string

// Authentication methods.
const (
	MethodAPIKey Method = "api_key"
	MethodMTLS   Method = "mtls"
)

// Principal is an authenticated caller.
type Principal struct {
	// Tenant groups users; empty for a principal of no tenant.
	Tenant string
	// User is the user within the tenant.
	User string
	// Roles are the principal's roles (RoleAdmin, RoleTenantAdmin, RoleApprover).
	Roles []string
	// Method is how the principal was authenticated.
	Method Method
	// Key names the credential for logs: the first characters of the API key's hash, or the
	// certificate's subject. It is never the secret.
	Key string
}

// MaxIDBytes is the longest user id the mesh takes: a principal's ID (a run's user is its
// principal's), and the user_id of every request and stage that names one (the README's
// "Limits").
const MaxIDBytes = 256

// ID is the user id the mesh knows the principal by, "tenant/user" (or "user" without a
// tenant): runs belong to it and memories are kept under it.
func (p Principal) ID() string {
	if p.Tenant == "" {
		return p.User
	}
	return p.Tenant + "/" + p.User
}

// Has reports whether the principal holds role.
func (p Principal) Has(role string) bool { return slices.Contains(p.Roles, role) }

// TenantOf returns the tenant of a user id made by Principal.ID ("" when it has none).
func TenantOf(userID string) string {
	tenant, _, ok := strings.Cut(userID, "/")
	if !ok {
		return ""
	}
	return tenant
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries; ok is false when the call was not
// authenticated (authentication is off).
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Action is what a principal does with a run.
type Action string

// Actions on a run.
const (
	ActionRead    Action = "read"    // GetRun, WatchRun
	ActionCancel  Action = "cancel"  // CancelRun
	ActionApprove Action = "approve" // ResolveApproval
	ActionAnswer  Action = "answer"  // Answer
)

// May reports whether p may do a with a run that acts for owner (a user id made by ID): its
// own runs always; every run as an admin; the runs of its tenant as a tenant admin, or, to read
// and approve them, as an approver (the run's question is its user's to answer).
func (p Principal) May(a Action, owner string) bool {
	if owner == p.ID() || p.Has(RoleAdmin) {
		return true
	}
	if p.Tenant == "" || TenantOf(owner) != p.Tenant {
		return false
	}
	return p.Has(RoleTenantAdmin) || (p.Has(RoleApprover) && (a == ActionRead || a == ActionApprove))
}

// HasControl reports whether s, a user or a tenant, holds a control character (ControlAt),
// which a request's user_id may not hold either. A principal's ID is its runs' user id, kept
// as text by the stores (PostgreSQL's hold no NUL) and shown in logs and results, where a
// terminal would obey it.
func HasControl(s string) bool {
	_, _, ok := ControlAt(s)
	return ok
}

// CheckControl is the INVALID_ARGUMENT error of a request's field whose value holds a control
// character (ControlAt), naming the field, the character and its byte; nil for any other. The
// user a request acts for is checked with it wherever it comes in: the orchestrator's API and
// the action stage's Execute (it goes to REST tools in a header, which holds none).
func CheckControl(field, value string) error {
	if r, at, ok := ControlAt(value); ok {
		return stageerr.Invalid("%s: must not contain a control character; got %q at byte %d", field, r, at)
	}
	return nil
}

// ControlAt returns the first control character of s, C0 (U+0000 to U+001F), DEL (U+007F) or
// C1 (U+0080 to U+009F: U+009B is CSI, as ESC [), and the byte it starts at; ok is false when
// s holds none. It reads bytes and allocates nothing, for a check every request makes: no byte
// of a multi-byte UTF-8 sequence is below 0x80, and a C1 control is the bytes 0xC2 0x80 to
// 0xC2 0x9F.
func ControlAt(s string) (r rune, at int, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return rune(c), i, true
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f:
			return rune(s[i+1]), i, true
		}
	}
	return 0, 0, false
}
