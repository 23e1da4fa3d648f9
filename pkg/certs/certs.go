// Package certs makes the X.509 certificates of a development or test mesh: a CA, server
// certificates for the services, and client certificates that name a principal (common name:
// user, organization: tenant, organizational units: roles, as auth.CertRoles grants them) or
// a mesh identity. Production deployments bring certificates from their own PKI
// (cert-manager, Vault, SPIFFE); these are for `agentmesh certs` and the tests, made with the
// standard library's crypto/x509.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// Validity is how long the certificates this package makes are valid.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority that issues certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) { return newCA(name, nil) }

// newCA makes a CA named name that parent signs, or a self-signed one when parent is nil.
func newCA(name string, parent *CA) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM is the CA's certificate, PEM encoded: what peers trust.
func (ca *CA) CertPEM() []byte { return ca.pem }

// Subject says whom a certificate names and where it is used.
type Subject struct {
	// CommonName is the user of a client certificate, or the service of a server one.
	CommonName string
	// Organization is the tenant of a client certificate.
	Organization string
	// OrganizationalUnits are the organizational units of a client certificate, which grant
	// its roles (auth.CertRoles: by default, an OU that names a role grants it).
	OrganizationalUnits []string
	// Hosts are the DNS names and IP addresses a server certificate is valid for.
	Hosts []string
	// URIs are URI names, e.g. a mesh identity "spiffe://agentmesh/orchestrator".
	URIs []string
	// Server and Client say what the certificate may be used for (both for a service that
	// serves and calls other services).
	Server, Client bool
}

// Issue makes a certificate for s, signed by the CA, and returns it and its private key, PEM
// encoded.
func (ca *CA) Issue(s Subject) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.CommonName},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if s.Organization != "" {
		tmpl.Subject.Organization = []string{s.Organization}
	}
	tmpl.Subject.OrganizationalUnit = s.OrganizationalUnits
	for _, h := range s.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	for _, u := range s.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			return nil, nil, fmt.Errorf("URI %q: %w", u, err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	if s.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand never fails
	}
	return n
}

// Intermediate makes a CA named name that this one signs: the certificates it issues chain to
// this CA through its certificate (CertPEM), which a peer presents after its own.
func (ca *CA) Intermediate(name string) (*CA, error) { return newCA(name, ca) }

// Serial is the serial number of the CA's certificate.
func (ca *CA) Serial() *big.Int { return new(big.Int).Set(ca.cert.SerialNumber) }

// CRL is what a certificate revocation list of a CA says.
type CRL struct {
	// Number is the CRL's number, which a newer CRL of the CA makes larger; 0 is 1.
	Number int64
	// ThisUpdate is when the CRL was issued; zero is now.
	ThisUpdate time.Time
	// NextUpdate is when the next CRL is due; zero is CRLValidity after ThisUpdate.
	NextUpdate time.Time
	// Revoked are the serial numbers of the certificates revoked, each at ThisUpdate.
	Revoked []*big.Int
}

// CRLValidity is how long after its issue a CRL that names no NextUpdate says the next one is
// due.
const CRLValidity = 7 * 24 * time.Hour

// RevocationList makes the certificate revocation list c, signed by the CA, PEM encoded (an
// "X509 CRL" block).
func (ca *CA) RevocationList(c CRL) ([]byte, error) {
	if c.Number == 0 {
		c.Number = 1
	}
	if c.ThisUpdate.IsZero() {
		c.ThisUpdate = time.Now()
	}
	if c.NextUpdate.IsZero() {
		c.NextUpdate = c.ThisUpdate.Add(CRLValidity)
	}
	tmpl := &x509.RevocationList{
		Number:     big.NewInt(c.Number),
		ThisUpdate: c.ThisUpdate,
		NextUpdate: c.NextUpdate,
	}
	for _, s := range c.Revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: c.ThisUpdate})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.cert, ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), nil
}
