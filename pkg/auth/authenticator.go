package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Key is a configured API key: its hash (HashKey) and the principal it authenticates.
type Key struct {
	// Hash is "sha256:" and the hex digest of the key.
	Hash string
	// Principal is who the key's holder is (Method and Key are filled in).
	Principal Principal
}

// Authenticator turns a call's credentials into a Principal: an API key in the
// "authorization: Bearer <key>" (or "x-api-key") metadata, or a client certificate verified by
// the server's TLS configuration, whose subject names the principal (common name: user,
// organization: tenant, organizational units: roles, as its CertRoles say). A principal's ID
// is at most MaxIDBytes.
type Authenticator struct {
	keys  func() *keySet // the keys in use: fixed (New), or followed in a file (FollowKeys)
	certs *CertRoles     // the roles client certificates grant; nil: they authenticate no one
	crls  *crls          // the CRLs of client certificates (RefuseRevoked); nil for none
	held  *holds         // the calls Hold holds, of followed keys or CRLs; nil for fixed keys without CRLs
}

// keySet is a set of API keys by the SHA-256 of the key, each with its principal.
type keySet map[[sha256.Size]byte]Principal

// New returns an Authenticator of the keys; with certs, verified client certificates
// authenticate too, with the roles certs grants (nil: they authenticate no one). A malformed
// hash, a key without a user, a user or tenant with '/' or a control character (HasControl), a
// tenant/user over MaxIDBytes, a key configured twice or an unknown role is an error naming the
// key by its index.
func New(keys []Key, certs *CertRoles) (*Authenticator, error) {
	set, err := newKeySet(keys)
	if err != nil {
		return nil, err
	}
	return &Authenticator{keys: func() *keySet { return &set }, certs: certs}, nil
}

// FollowKeys returns an Authenticator of the keys that load reads from file, loaded again
// when the file's contents change: at most once per every (ReloadInterval when 0), at a call.
// A key taken out of the file (revoked) is refused from then on, without a restart, and the
// calls made with it that Hold holds (streams, long unary calls) end UNAUTHENTICATED within
// every. A file
// that changed but does not load keeps the keys in use, with a warning, until it changes
// again. The keys are checked as New checks them; with certs, verified client certificates
// authenticate too, with the roles certs grants.
func FollowKeys(file string, every time.Duration, load func() ([]Key, error), certs *CertRoles) (
	*Authenticator, error,
) {
	f, err := follow("API keys of "+file, []string{file}, every, func() (*keySet, error) {
		keys, err := load()
		if err != nil {
			return nil, err
		}
		set, err := newKeySet(keys)
		return &set, err
	})
	if err != nil {
		return nil, err
	}
	return &Authenticator{keys: f.get, certs: certs, held: newHolds(f, nil)}, nil
}

// RefuseRevoked makes a refuse the calls on a connection whose client certificate (or a CA
// certificate of its chain) the CRLs of s (ServerFiles.ClientCRL, auth.client_crl) revoke now,
// though they did not when the connection's handshake checked it: UNAUTHENTICATED, naming the
// certificate and its serial. The CRLs are those s's handshakes follow, read again at most
// every reload interval, and never at a call. The calls Hold holds on such a connection end
// UNAUTHENTICATED once a CRL read again lists their certificate. Without CRLs in s it changes
// nothing. Call it before a serves.
func (a *Authenticator) RefuseRevoked(s *ServerTLS) {
	c := s.clientCRLs()
	if c == nil {
		return
	}
	a.crls = c
	if a.held == nil {
		a.held = newHolds(nil, c)
		return
	}
	a.held.crls = c
}

// newKeySet returns the set of keys, checked as New says.
func newKeySet(keys []Key) (keySet, error) {
	set := make(keySet, len(keys))
	for i, k := range keys {
		sum, err := parseHash(k.Hash)
		if err != nil {
			return nil, fmt.Errorf("api_keys[%d].hash: %w", i, err)
		}
		if k.Principal.User == "" {
			return nil, fmt.Errorf("api_keys[%d].user: must be set", i)
		}
		if strings.Contains(k.Principal.User, "/") || strings.Contains(k.Principal.Tenant, "/") {
			return nil, fmt.Errorf("api_keys[%d]: user and tenant must not contain '/'", i)
		}
		if HasControl(k.Principal.User) || HasControl(k.Principal.Tenant) {
			return nil, fmt.Errorf("api_keys[%d]: user and tenant must not contain a control character", i)
		}
		if id := k.Principal.ID(); len(id) > MaxIDBytes {
			return nil, fmt.Errorf("api_keys[%d]: tenant/user is %d bytes; at most %d", i, len(id), MaxIDBytes)
		}
		for _, r := range k.Principal.Roles {
			if !slices.Contains(Roles, r) {
				return nil, fmt.Errorf("api_keys[%d].roles: unknown role %q (want one of %s)", i, r, strings.Join(Roles, ", "))
			}
		}
		if _, dup := set[sum]; dup {
			return nil, fmt.Errorf("api_keys[%d].hash: the same key is configured twice", i)
		}
		p := k.Principal
		p.Method, p.Key = MethodAPIKey, k.Hash[:len(hashPrefix)+12]
		set[sum] = p
	}
	return set, nil
}

// Authenticate returns the principal of the call in ctx, or an UNAUTHENTICATED error that says
// what is missing or wrong (never echoing a secret). An API key wins over a certificate.
func (a *Authenticator) Authenticate(ctx context.Context) (Principal, error) {
	key, err := apiKey(ctx)
	if err != nil {
		return Principal{}, err
	}
	if key != "" {
		if p, ok := (*a.keys())[sha256.Sum256([]byte(key))]; ok {
			return p, nil
		}
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code, "the API key is not valid")
	}
	if a.certs != nil {
		if cert := clientCert(ctx); cert != nil {
			return certPrincipal(cert, a.certs)
		}
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"authentication required: send an API key (authorization: Bearer <key>) or a client certificate")
	}
	return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code, "authentication required: send an API key (authorization: Bearer <key>)")
}

// apiKey returns the API key the call carries, or "".
func apiKey(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		scheme, token, ok := strings.Cut(v[0], " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
			return "", stageerr.Errorf(stageerr.ErrUnauthenticated.Code, `the authorization metadata must be "Bearer <key>"`)
		}
		return strings.TrimSpace(token), nil
	}
	if v := md.Get("x-api-key"); len(v) > 0 {
		return strings.TrimSpace(v[0]), nil
	}
	return "", nil
}

// clientCert returns the verified client certificate of the call, or nil.
func clientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// certPrincipal is the principal a client certificate names: the common name is the user, the
// first organization the tenant, and roles says which roles its organizational units grant.
// Neither user nor tenant may hold a '/', which separates them in the principal's ID. A
// certificate with a URI name of the mesh's trust domain is a service's (MeshID), never a
// user's, even where one CA signs the mesh's certificates and the public API's clients'.
func certPrincipal(cert *x509.Certificate, roles *CertRoles) (Principal, error) {
	for _, u := range cert.URIs {
		if strings.HasPrefix(u.String(), meshIDPrefix) {
			return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
				"the client certificate names the mesh identity %s: a service's certificate "+
					"authenticates no user", u)
		}
	}
	s := cert.Subject
	if s.CommonName == "" || strings.Contains(s.CommonName, "/") {
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"the client certificate's common name must name the user (without '/')")
	}
	p := Principal{User: s.CommonName, Method: MethodMTLS, Key: s.String()}
	if len(s.Organization) > 0 {
		p.Tenant = s.Organization[0]
	}
	if strings.Contains(p.Tenant, "/") {
		// The user id would read as a user of another tenant (TenantOf).
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"the client certificate's first organization must name the tenant (without '/')")
	}
	if HasControl(p.ID()) {
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"the client certificate's organization and common name must not contain a control character")
	}
	if id := p.ID(); len(id) > MaxIDBytes {
		return Principal{}, stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"the client certificate names the user %d bytes long (organization/common name); at most %d", len(id), MaxIDBytes)
	}
	p.Roles = roles.grant(s.OrganizationalUnit)
	return p, nil
}
