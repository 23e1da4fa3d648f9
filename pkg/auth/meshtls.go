package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// MeshTLS is one service's side of the mutual TLS between the services of the mesh: its
// certificate, which names its mesh identity (MeshID), and the mesh CA, which signed the
// certificates of every service. It follows the files it was loaded from (LoadMeshTLS): a rotated
// certificate or CA is used from the next connection on, without a restart.
type MeshTLS struct {
	service string
	files   *followed[meshState]
}

// meshState is the certificate and the CA a MeshTLS uses now.
type meshState struct {
	cert  tls.Certificate
	roots *x509.CertPool
}

// current is the certificate and CA to use now.
func (m *MeshTLS) current() *meshState { return m.files.get() }

// newMeshState checks cert against the CA of caPEM and returns them with the service the
// certificate names.
func newMeshState(caPEM []byte, cert tls.Certificate) (*meshState, string, error) {
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
	if err := verifyChain(roots, leaf, cert.Certificate[1:], x509.ExtKeyUsageAny); err != nil {
		return nil, "", fmt.Errorf("the certificate of %s: %w", service, err)
	}
	return &meshState{cert: cert, roots: roots}, service, nil
}

// Service is the service the certificate names.
func (m *MeshTLS) Service() string { return m.service }

// ServerConfig is the TLS configuration of a stage server: it presents the service's
// certificate and requires every client to present one the mesh CA signed. Which of those
// callers are mesh identities is the admission's concern (MeshAdmission), so that
// health stays open to every certificate of the mesh CA.
func (m *MeshTLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := m.current()
			return &tls.Config{
				Certificates: []tls.Certificate{st.cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    st.roots,
				MinVersion:   tls.VersionTLS13,
			}, nil
		},
	}
}

// ClientConfig is the TLS configuration of a connection to another service: it presents the
// service's certificate and accepts a server whose certificate the mesh CA signed and that names
// a mesh identity. As in SPIFFE, a server is verified by its identity, not by the host name the
// client dialled, so a service may be reached at any address (a pod IP, a load balancer, a name
// its certificate does not list).
func (m *MeshTLS) ClientConfig() *tls.Config {
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &m.current().cert, nil },
		MinVersion:           tls.VersionTLS13,
		// The standard verification checks the host name, which mesh identities replace:
		// VerifyConnection verifies the chain and the identity instead.
		InsecureSkipVerify: true,
		VerifyConnection:   m.verifyServer,
	}
}

// verifyServer accepts a server that presents a certificate of the mesh CA naming a mesh
// identity.
func (m *MeshTLS) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	var intermediates [][]byte
	for _, c := range cs.PeerCertificates[1:] {
		intermediates = append(intermediates, c.Raw)
	}
	if err := verifyChain(m.current().roots, leaf, intermediates, x509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("the server's certificate: %w", err)
	}
	if _, ok := MeshService(leaf); !ok {
		return fmt.Errorf("the server's certificate (%q) names no mesh identity", leaf.Subject.String())
	}
	return nil
}

// verifyChain checks that leaf, with the DER intermediates, chains to roots for usage.
func verifyChain(roots *x509.CertPool, leaf *x509.Certificate, intermediates [][]byte, usage x509.ExtKeyUsage) error {
	pool := x509.NewCertPool()
	for _, der := range intermediates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		pool.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: pool, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("not signed by the mesh CA for this use: %w", err)
	}
	return nil
}
