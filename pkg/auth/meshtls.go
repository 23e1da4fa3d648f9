package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
)

// MeshTLS is one service's side of the mutual TLS between the services of the mesh: its
// certificate, which names its mesh identity (MeshID), and the mesh CA, which signed the
// certificates of every service. It follows the files it was loaded from (LoadMeshTLS): a rotated
// certificate or CA is used from the next connection on, without a restart.
type MeshTLS struct {
	service  string
	files    *followed[meshState]
	refusals *refusalLog // the clients refused for a revoked certificate
	crls     *crls       // the CRLs of the files (MeshFiles.CRL), nil without them
	held     *holds      // the calls Hold holds, nil without CRLs
}

// meshState is the certificate, the CA and the CRLs a MeshTLS uses now.
type meshState struct {
	cert    tls.Certificate
	roots   *x509.CertPool
	revoked *revocations // nil without CRLs
}

// current is the certificate and CA to use now.
func (m *MeshTLS) current() *meshState { return m.files.get() }

// newMeshState checks cert against the CA of caPEM and returns them, with the CRLs revoked
// (nil for none), and the service the certificate names. A certificate that the CRLs revoke is
// only warned about: the other services refuse it, and a CRL that revokes it, published before
// the certificate is rotated, still applies to the others.
func newMeshState(caPEM []byte, cert tls.Certificate, revoked *revocations) (*meshState, string, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, "", errors.New("the mesh CA holds no PEM certificate")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, "", fmt.Errorf("the certificate: %w", err)
		}
	}
	service, ok := MeshService(leaf)
	if !ok {
		return nil, "", fmt.Errorf("the certificate of %q names no mesh identity: it needs the one URI name %s<service>", leaf.Subject.String(), meshIDPrefix)
	}
	chains, err := verifyChain(roots, leaf, cert.Certificate[1:], x509.ExtKeyUsageAny)
	if err != nil {
		return nil, "", fmt.Errorf("the certificate of %s: %w", service, err)
	}
	if err := revoked.check(chains); err != nil {
		slog.Warn("this service's own certificate is revoked: the services it calls and that call it refuse it",
			"identity", MeshID(service), "err", err)
	}
	return &meshState{cert: cert, roots: roots, revoked: revoked}, service, nil
}

// Service is the service the certificate names.
func (m *MeshTLS) Service() string { return m.service }

// ServerConfig is the TLS configuration of a stage server: it presents the service's
// certificate and requires every client to present one the mesh CA signed. Which of those
// callers are mesh identities is the admission's concern (MeshAdmission), so that
// health stays open to every certificate of the mesh CA. With CRLs (MeshFiles.CRL) a client
// whose chain holds a certificate they revoke is refused in the handshake, a resumed session's
// too, and the refusal is logged (as MeshAdmission logs its own: a warning at most once per
// RefusalInterval for a peer and certificate).
func (m *MeshTLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			st := m.current()
			cfg := &tls.Config{
				Certificates: []tls.Certificate{st.cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    st.roots,
				MinVersion:   tls.VersionTLS13,
			}
			if st.revoked != nil {
				cfg.VerifyConnection = refuseRevoked(st.revoked, m.refusals, hello)
			}
			return cfg, nil
		},
	}
}

// refuseRevoked is the VerifyConnection of a server with the CRLs revoked, which refuses a
// client certificate they revoke and logs the refusal to refusals. VerifyConnection, not
// VerifyPeerCertificate: it is called at a resumed session's handshake too, whose client
// certificate was verified when the session began, maybe before the CRL listed it.
func refuseRevoked(revoked *revocations, refusals *refusalLog, hello *tls.ClientHelloInfo) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		err := revoked.check(cs.VerifiedChains)
		if err != nil {
			var addr net.Addr
			if hello != nil && hello.Conn != nil {
				addr = hello.Conn.RemoteAddr()
			}
			refusals.refusedHandshake(addr, err)
		}
		return err
	}
}

// ClientConfig is the TLS configuration of a connection to another service: it presents the
// service's certificate and accepts a server whose certificate the mesh CA signed and that names
// one of the mesh identities peers (the services the connection is to: the memory stage's to
// call it), or any mesh identity when peers is empty. As in SPIFFE, a server is verified by its
// identity, not by the host name the client dialled, so a service may be reached at any address
// (a pod IP, a load balancer, a name its certificate does not list); and by the identity the
// client expects, so that one service's certificate cannot pass for another's (a stage's
// certificate, stolen or its stage compromised, serving the calls meant for the memory stage).
func (m *MeshTLS) ClientConfig(peers ...string) *tls.Config {
	return m.clientConfig(slices.Clone(peers), nil)
}

// clientConfig is ClientConfig(peers...), which gives the verified chains of the server's
// certificate to verified, when set, at a handshake that accepts it.
func (m *MeshTLS) clientConfig(peers []string, verified func([][]*x509.Certificate)) *tls.Config {
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &m.current().cert, nil },
		MinVersion:           tls.VersionTLS13,
		// The standard verification checks the host name, which mesh identities replace:
		// VerifyConnection verifies the chain and the identity instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			chains, err := m.verifyServer(cs, peers)
			if err == nil && verified != nil {
				verified(chains)
			}
			return err
		},
	}
}

// ServerCertError is the error of a TLS handshake of ClientConfig that refused the server's
// certificate: none, one the mesh CA did not sign, one that names no mesh identity, or one
// that names another identity than the service called. crypto/tls returns it from the
// handshake as it is, so a client tells it by its type (errors.As) from a network failure.
type ServerCertError struct {
	// Service is the service whose mesh identity the certificate names, "" when it names none
	// (or was not verified).
	Service string
	err     error
}

// Error says why the certificate was refused.
func (e *ServerCertError) Error() string { return e.err.Error() }

// Unwrap returns the verification's error (an x509 error), if any.
func (e *ServerCertError) Unwrap() error { return errors.Unwrap(e.err) }

// verifyServer accepts a server that presents a certificate of the mesh CA naming a mesh
// identity, one of peers unless it is empty, and that no CRL revokes; it refuses any other
// with a *ServerCertError. It returns the verified chains of the certificate it accepts.
func (m *MeshTLS) verifyServer(cs tls.ConnectionState, peers []string) ([][]*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, &ServerCertError{err: errors.New("the server presented no certificate")}
	}
	leaf := cs.PeerCertificates[0]
	var intermediates [][]byte
	for _, c := range cs.PeerCertificates[1:] {
		intermediates = append(intermediates, c.Raw)
	}
	st := m.current()
	chains, err := verifyChain(st.roots, leaf, intermediates, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, &ServerCertError{err: fmt.Errorf("the server's certificate: %w", err)}
	}
	if err := st.revoked.check(chains); err != nil {
		return nil, &ServerCertError{err: fmt.Errorf("the server's certificate: %w", err)}
	}
	service, ok := MeshService(leaf)
	if !ok {
		return nil, &ServerCertError{err: fmt.Errorf("the server's certificate (%q) names no mesh identity", leaf.Subject.String())}
	}
	if len(peers) > 0 && !slices.Contains(peers, service) {
		want := make([]string, len(peers))
		for i, p := range peers {
			want[i] = MeshID(p)
		}
		return nil, &ServerCertError{Service: service, err: fmt.Errorf("the server's certificate is %s's (%s), not the one of the service "+
			"called (%s): another service of the mesh may not answer its calls",
			service, MeshID(service), strings.Join(want, " or "))}
	}
	return chains, nil
}

// verifyChain checks that leaf, with the DER intermediates, chains to roots for usage, and
// returns its verified chains.
func verifyChain(roots *x509.CertPool, leaf *x509.Certificate, intermediates [][]byte, usage x509.ExtKeyUsage) ([][]*x509.Certificate, error) {
	pool := x509.NewCertPool()
	for _, der := range intermediates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		pool.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: pool, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return nil, fmt.Errorf("not signed by the mesh CA for this use: %w", err)
	}
	return chains, nil
}
