package meshproc

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/certs"
	"google.golang.org/grpc/credentials"
)

// PKI is the mesh CA of a Mesh started with Options.MTLS, and the files of its certificates,
// made as `agentmesh certs` makes them.
type PKI struct {
	ca        *certs.CA
	dir       string
	crlNumber int64 // the number of the last CRL Revoke wrote
}

// NewPKI makes a mesh CA, writing its certificate to dir/ca.pem, where Issue writes the
// certificates it signs. Give it to Start in Options.PKI to start a mesh with a stage that
// needs its certificate before the mesh starts (an External one).
func NewPKI(t testing.TB, dir string) *PKI {
	t.Helper()
	ca, err := certs.NewCA("meshproc mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{ca: ca, dir: dir}
	if err := ca.WriteCert(p.CAFile()); err != nil {
		t.Fatal(err)
	}
	return p
}

// CAFile is the PEM file of the mesh CA's certificate (tls.ca).
func (p *PKI) CAFile() string { return filepath.Join(p.dir, "ca.pem") }

// Service returns the files of service's certificate.
func (p *PKI) Service(service string) certs.Pair {
	return certs.Pair{Cert: filepath.Join(p.dir, service+".pem"), Key: filepath.Join(p.dir, service+"-key.pem")}
}

// Issue writes a certificate of the mesh CA for s, named name, and returns its files.
func (p *PKI) Issue(t testing.TB, name string, s certs.Subject) certs.Pair {
	t.Helper()
	pair, err := p.ca.Write(p.dir, name, s)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// CRLFile is the file of the mesh CA's CRL that Revoke writes (tls.crl with Options.CRL).
func (p *PKI) CRLFile() string { return filepath.Join(p.dir, "ca.crl") }

// Revoke writes CRLFile anew, by a rename as a secret update does: a CRL of the CA, newer than
// the last, that lists the certificates Issue wrote under the names (and no other: name every
// certificate to keep revoked).
func (p *PKI) Revoke(t testing.TB, names ...string) {
	t.Helper()
	p.crlNumber++
	files := make([]string, len(names))
	for i, name := range names {
		files[i] = p.Service(name).Cert
	}
	if err := p.ca.WriteCRL(p.CRLFile(), certs.CRL{Number: p.crlNumber}, files...); err != nil {
		t.Fatal(err)
	}
}

// Client returns TLS credentials that trust the mesh CA's servers by host name and present
// the certificate pair, if it is not the zero Pair.
func (p *PKI) Client(t testing.TB, pair certs.Pair) credentials.TransportCredentials {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.ca.CertPEM())
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if pair != (certs.Pair{}) {
		cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg)
}
