package auth

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
)

// Metadata keys that carry the user a call acts for between the services of the mesh. The
// orchestrator sets them on its calls to the stages (the run's user, or the authenticated
// caller of the public API); the stages forward them on their calls to the memory stage, which
// keeps every user's memories apart by them. They are never taken from a caller of the public
// API.
const (
	// UserMetadata is the id (Principal.ID) of the user a call acts for, percent-encoded as
	// grpc-message is (EncodeUser): gRPC sends metadata values of printable ASCII only, and a
	// user id is any text.
	UserMetadata = "agentmesh-user"
	// RolesMetadata lists the roles of that user, comma-separated, when it is an authenticated
	// principal with roles.
	RolesMetadata = "agentmesh-roles"
	// UserAssertionMetadata is the orchestrator's signed assertion (grant.Signer.SignUser) that
	// the call acts for the user UserMetadata names. The orchestrator sets it on the calls of a
	// run to the stages that call the memory stage, which forward it; the memory stage, with
	// mTLS between the services, believes a caller other than the orchestrator about the user
	// only with it.
	UserAssertionMetadata = "agentmesh-user-assertion"
)

// OutgoingUser returns ctx whose outgoing gRPC calls act for the user id, without roles,
// replacing any user an earlier OutgoingUser, OutgoingPrincipal or ForwardUser set, and
// dropping its assertion (OutgoingUserAssertion).
func OutgoingUser(ctx context.Context, id string) context.Context {
	return outgoing(ctx, id, nil)
}

// OutgoingPrincipal returns ctx whose outgoing gRPC calls act for p (its ID and roles),
// replacing any user set earlier and dropping its assertion.
func OutgoingPrincipal(ctx context.Context, p Principal) context.Context {
	return outgoing(ctx, p.ID(), p.Roles)
}

// ForwardUser returns ctx whose outgoing gRPC calls act for the user the incoming call of
// ctx acts for, as its metadata says, with the orchestrator's assertion of that user (the
// values are copied unchecked: the memory stage checks them); without one, outgoing calls act
// for nobody.
func ForwardUser(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out, _ := metadata.FromOutgoingContext(ctx)
	out = out.Copy()
	for _, k := range []string{UserMetadata, RolesMetadata, UserAssertionMetadata} {
		if v := in.Get(k); len(v) > 0 {
			out.Set(k, v...)
		} else {
			delete(out, k)
		}
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// outgoing returns ctx whose outgoing calls carry the user id and roles.
func outgoing(ctx context.Context, id string, roles []string) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx) // a copy of its own
	if !ok {
		// Nothing to replace: appended pairs are a slice, not a map of their own, which a
		// run's context would hold for as long as the run (issue 15).
		kv := []string{UserMetadata, EncodeUser(id)}
		if len(roles) > 0 {
			kv = append(kv, RolesMetadata, strings.Join(roles, ","))
		}
		return metadata.AppendToOutgoingContext(ctx, kv...)
	}
	md.Set(UserMetadata, EncodeUser(id))
	delete(md, RolesMetadata)
	delete(md, UserAssertionMetadata) // it asserts the user replaced
	if len(roles) > 0 {
		md.Set(RolesMetadata, strings.Join(roles, ","))
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// OutgoingUserAssertion returns ctx whose outgoing gRPC calls carry token, the orchestrator's
// assertion of the user they act for (set with OutgoingUser first), replacing any earlier one.
func OutgoingUserAssertion(ctx context.Context, token string) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx) // a copy of its own
	if !ok {
		return metadata.AppendToOutgoingContext(ctx, UserAssertionMetadata, token)
	}
	md.Set(UserAssertionMetadata, token)
	return metadata.NewOutgoingContext(ctx, md)
}

// IncomingUserAssertion returns the assertion of its user (UserAssertionMetadata) the
// incoming call of ctx carries, unchecked: grant.Verifier.VerifyUser checks it. ok is false
// when it carries none; several are an error.
func IncomingUserAssertion(ctx context.Context) (token string, ok bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	switch v := md.Get(UserAssertionMetadata); len(v) {
	case 0:
		return "", false, nil
	case 1:
		return v[0], true, nil
	default:
		return "", false, fmt.Errorf("the %s metadata holds %d assertions, want one",
			UserAssertionMetadata, len(v))
	}
}

// IncomingUser returns the principal the incoming call of ctx acts for, as its metadata says:
// the user id's tenant and user (see TenantOf) and its roles. ok is false when the call names
// no user. A call that names several users, an empty one, or an unknown role is an error:
// whoever sent it is not the mesh. Only a trusted caller's metadata may be believed: the
// memory stage decides whom it trusts.
func IncomingUser(ctx context.Context) (p Principal, ok bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get(UserMetadata)
	switch {
	case len(ids) == 0:
		return Principal{}, false, nil
	case len(ids) > 1:
		return Principal{}, false, fmt.Errorf("the %s metadata names %d users, want one", UserMetadata, len(ids))
	case ids[0] == "":
		return Principal{}, false, fmt.Errorf("the %s metadata is empty", UserMetadata)
	}
	id, err := url.PathUnescape(ids[0])
	if err != nil {
		return Principal{}, false, fmt.Errorf("the %s metadata is not percent-encoded: %v", UserMetadata, err)
	}
	p.User = id
	if tenant, user, found := strings.Cut(id, "/"); found && tenant != "" {
		p.Tenant, p.User = tenant, user
	}
	for _, v := range md.Get(RolesMetadata) {
		for r := range strings.SplitSeq(v, ",") {
			if !slices.Contains(Roles, r) {
				return Principal{}, false, fmt.Errorf("the %s metadata names an unknown role %q", RolesMetadata, r)
			}
			p.Roles = append(p.Roles, r)
		}
	}
	return p, true, nil
}

// EncodeUser is a user id as the UserMetadata carries it: each byte that is not printable
// ASCII, and '%', as %XX (the percent-encoding of grpc-message), so that a user id of any text
// ("Société/José") can be sent, where gRPC refused the call. A printable ASCII id without '%'
// is itself. IncomingUser decodes it.
func EncodeUser(id string) string {
	plain := func(c byte) bool { return c >= 0x20 && c <= 0x7E && c != '%' }
	i := 0
	for i < len(id) && plain(id[i]) {
		i++
	}
	if i == len(id) {
		return id
	}
	const hex = "0123456789ABCDEF"
	b := []byte(id[:i])
	for ; i < len(id); i++ {
		if c := id[i]; plain(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&0xF])
		}
	}
	return string(b)
}
