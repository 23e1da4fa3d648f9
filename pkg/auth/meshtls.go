package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// one of the mesh identities peers (the services the connection is to: the memory stage's to
// call it), or any mesh identity when peers is empty. As in SPIFFE, a server is verified by its
// identity, not by the host name the client dialled, so a service may be reached at any address
// (a pod IP, a load balancer, a name its certificate does not list); and by the identity the
// client expects, so that one service's certificate cannot pass for another's (a stage's
// certificate, stolen or its stage compromised, serving the calls meant for the memory stage).
func (m *MeshTLS) ClientConfig(peers ...string) *tls.Config {
	peers = slices.Clone(peers)
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &m.current().cert, nil },
		MinVersion:           tls.VersionTLS13,
		// The standard verification checks the host name, which mesh identities replace:
		// VerifyConnection verifies the chain and the identity instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return m.verifyServer(cs, peers)
		},
	}
}

// verifyServer accepts a server that presents a certificate of the mesh CA naming a mesh
// identity, one of peers unless it is empty.
func (m *MeshTLS) verifyServer(cs tls.ConnectionState, peers []string) error {
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
	service, ok := MeshService(leaf)
	if !ok {
		return fmt.Errorf("the server's certificate (%q) names no mesh identity", leaf.Subject.String())
	}
	if len(peers) > 0 && !slices.Contains(peers, service) {
		want := make([]string, len(peers))
		for i, p := range peers {
			want[i] = MeshID(p)
		}
		return fmt.Errorf("the server's certificate is %s's (%s), not the one of the service "+
			"called (%s): another service of the mesh may not answer its calls",
			service, MeshID(service), strings.Join(want, " or "))
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
