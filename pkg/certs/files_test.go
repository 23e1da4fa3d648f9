package certs_test

import (
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/certs"
)

// TestWriteCRL: the file WriteCRL writes is a CRL of the CA, of the number asked, listing the
// serials given and those of the certificate files, and a second write replaces the first.
func TestWriteCRL(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Write(dir, "intent", certs.Service("intent"))
	if err != nil {
		t.Fatal(err)
	}
	serial, err := certs.SerialOf(pair.Cert)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.crl")
	listed := func() *x509.RevocationList {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "X509 CRL" {
			t.Fatalf("%s holds no X509 CRL block", path)
		}
		l, err := x509.ParseRevocationList(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if err := ca.WriteCRL(path, certs.CRL{Number: 1, Revoked: []*big.Int{big.NewInt(7)}}, pair.Cert); err != nil {
		t.Fatal(err)
	}
	l := listed()
	if l.Number.Int64() != 1 || len(l.RevokedCertificateEntries) != 2 ||
		l.RevokedCertificateEntries[0].SerialNumber.Int64() != 7 ||
		l.RevokedCertificateEntries[1].SerialNumber.Cmp(serial) != 0 {
		t.Fatalf("the CRL is number %v listing %v, want number 1 listing 7 and %v", l.Number, l.RevokedCertificateEntries, serial)
	}
	if err := ca.WriteCRL(path, certs.CRL{Number: 2}); err != nil {
		t.Fatal(err)
	}
	if l := listed(); l.Number.Int64() != 2 || len(l.RevokedCertificateEntries) != 0 {
		t.Fatalf("the second CRL is number %v listing %d certificates, want number 2 listing none", l.Number, len(l.RevokedCertificateEntries))
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the file written beside the CRL is left: %v", err)
	}
	if err := ca.WriteCRL(path, certs.CRL{Number: 3}, filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("a CRL listing a certificate file that does not exist was written")
	}
}
