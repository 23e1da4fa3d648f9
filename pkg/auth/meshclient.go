package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// serverRevokedErr is the cause of the close of a client connection whose server's
// certificate, or a CA certificate of its chain, the CRLs list since its handshake: err, which
// wraps ErrRevoked, naming the certificate, its serial and the CRL that lists it.
func serverRevokedErr(err error) error {
	return fmt.Errorf("the server's certificate was revoked after the connection was made, and the connection closed: %w", err)
}

// ClientCredentials are the gRPC transport credentials of a connection to another service,
// those of ClientConfig(peers...). With CRLs (MeshFiles.CRL) each connection they make is held
// for as long as it is open, as Hold holds a server's calls: once the CRLs, read again, list
// the server's certificate or a CA certificate of its chain, the connection is closed. The CRLs
// are read again at most every reload interval, while any connection or call is held (and at
// handshakes), and a connection is closed as soon as its server is found revoked, whoever read
// them. Nothing is checked per call: a call costs what it costs without CRLs.
//
// A closed connection is what a gRPC client knows how to get over: the calls in flight on it
// end UNAVAILABLE ("error reading from server: the server's certificate was revoked after the
// connection was made, …", naming the certificate and its serial), and those not yet committed
// are retried as UNAVAILABLE is; the balancer leaves that address, and connects to it again,
// whose handshake refuses the revoked server as a new connection's does (UNAVAILABLE,
// "certificate revoked: …"). So the calls of a target that other replicas serve go to those,
// and a target served by the revoked server alone fails its calls as a server that never had
// a connection would. UNAVAILABLE, not UNAUTHENTICATED: the caller's credentials are good, the
// server is not one to call, and the mesh retries UNAVAILABLE to another replica.
func (m *MeshTLS) ClientCredentials(peers ...string) credentials.TransportCredentials {
	peers = slices.Clone(peers)
	creds := credentials.NewTLS(m.clientConfig(peers, nil))
	if !m.Holds() {
		return creds
	}
	return &heldServers{TransportCredentials: creds, m: m, peers: peers}
}

// heldServers are the transport credentials of ClientCredentials with CRLs: the connections
// they make are held.
type heldServers struct {
	credentials.TransportCredentials // for Info, and for the handshakes of a server they do not make
	m                                *MeshTLS
	peers                            []string
}

// ClientHandshake makes the TLS handshake of ClientConfig and holds the connection it makes,
// with the verified chains of the server's certificate.
func (c *heldServers) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var chains [][]*x509.Certificate
	creds := credentials.NewTLS(c.m.clientConfig(c.peers, func(v [][]*x509.Certificate) { chains = v }))
	conn, info, err := creds.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	return c.m.held.holdConn(conn, chains), info, nil
}

// Clone returns credentials of their own, making the same connections.
func (c *heldServers) Clone() credentials.TransportCredentials {
	return &heldServers{TransportCredentials: c.TransportCredentials.Clone(), m: c.m, peers: c.peers}
}

// heldConn is a client connection that holds holds, closed when the CRLs list its server.
// It reads and writes as the connection it wraps, for one function call more; once closed for a
// revocation, its reads and writes fail with the revocation (the error the calls in flight end
// with), not with the error of a closed connection.
type heldConn struct {
	net.Conn
	h       *holds
	call    *heldCall
	revoked atomic.Pointer[error] // why it was closed, nil until it was for a revocation
}

// holdConn holds conn, whose server's certificate has the verified chains.
func (h *holds) holdConn(conn net.Conn, chains [][]*x509.Certificate) net.Conn {
	c := &heldConn{Conn: conn, h: h}
	c.call = &heldCall{chains: chains, server: true, cancel: func(cause error) {
		c.revoked.Store(&cause)
		_ = c.Conn.Close()
	}}
	h.add(c.call)
	return c
}

// Read reads from the connection.
func (c *heldConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		err = c.why(err)
	}
	return n, err
}

// Write writes to the connection.
func (c *heldConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		err = c.why(err)
	}
	return n, err
}

// why is the error of a read or a write that failed with err: the revocation that closed the
// connection, if one did, else err.
func (c *heldConn) why(err error) error {
	if revoked := c.revoked.Load(); revoked != nil {
		return *revoked
	}
	return err
}

// Close stops holding the connection, and closes it.
func (c *heldConn) Close() error {
	c.h.remove(c.call)
	return c.Conn.Close()
}
