package auth

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// crls are the CRLs of a server's client certificates (auth.client_crl, tls.crl), followed
// with the server's TLS files: the ones its handshakes check, checked again at every call
// (refuse) and for the calls held (holds), so that a connection opened before a CRL listed its
// certificate serves no call once it does.
type crls struct {
	current    func() *revocations  // the CRLs now, read again when due (followed.get)
	untilCheck func() time.Duration // how long until current reads the files again
}

// followedCRLs are the CRLs that of picks out of the value of the followed files f.
func followedCRLs[T any](f *followed[T], of func(*T) *revocations) *crls {
	return &crls{current: func() *revocations { return of(f.get()) }, untilCheck: f.untilCheck}
}

// peerChains returns the chains of the call's client certificate that its connection's TLS
// handshake verified, nil for a call without one. It allocates nothing.
func peerChains(ctx context.Context) [][]*x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return info.State.VerifiedChains
}

// refuse returns the UNAUTHENTICATED error of a call whose connection's client certificate,
// or a CA certificate of its chain, the CRLs now revoke, naming it, its serial and the CRL
// that lists it as the handshake's refusal does (and wrapping ErrRevoked); nil for a call
// without a client certificate or of one they do not revoke. It reads no file (the CRLs are
// those the handshakes use, read again at most every reload interval) and allocates nothing
// unless it refuses: a map lookup per certificate of the chains.
func (c *crls) refuse(ctx context.Context) error {
	chains := peerChains(ctx)
	if chains == nil {
		return nil
	}
	if err := c.current().listed(chains); err != nil {
		return stageerr.Errorf(stageerr.ErrUnauthenticated.Code,
			"the client certificate of this connection was revoked after the connection was made: %w", err)
	}
	return nil
}
