package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

// Pair names the PEM files of a certificate and its private key.
type Pair struct {
	Cert, Key string
}

// Service is the subject of a mesh service's certificate: its mesh identity (auth.MeshID),
// valid for serving and for calling other services, on localhost, 127.0.0.1, the service's name,
// <service>.agentmesh.svc and hosts.
func Service(service string, hosts ...string) Subject {
	return Subject{
		CommonName: service,
		Hosts:      append([]string{"localhost", "127.0.0.1", service, service + ".agentmesh.svc"}, hosts...),
		URIs:       []string{auth.MeshID(service)},
		Server:     true,
		Client:     true,
	}
}

// WriteCert writes the CA's certificate to path (mode 0644); it does not replace a file.
func (ca *CA) WriteCert(path string) error { return create(path, ca.CertPEM(), 0o644) }

// Write issues a certificate for s and writes it to dir/<name>.pem (mode 0644) and its private
// key to dir/<name>-key.pem (mode 0600). It does not replace a file.
func (ca *CA) Write(dir, name string, s Subject) (Pair, error) {
	certPEM, keyPEM, err := ca.Issue(s)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if err := create(p.Key, keyPEM, 0o600); err != nil {
		return Pair{}, err
	}
	return p, create(p.Cert, certPEM, 0o644)
}

// create writes data to a new file path with mode perm; an existing file is an error.
func create(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// WriteCRL writes to path a CRL of the CA (RevocationList) that says c and lists, besides
// c.Revoked, the certificates of the PEM files certFiles (SerialOf). It writes a file beside
// path and renames it, as a secret update does, so that a service following path reads the CRL
// before or the CRL after, never part of one.
func (ca *CA) WriteCRL(path string, c CRL, certFiles ...string) error {
	c.Revoked = slices.Clone(c.Revoked)
	for _, file := range certFiles {
		s, err := SerialOf(file)
		if err != nil {
			return err
		}
		c.Revoked = append(c.Revoked, s)
	}
	data, err := ca.RevocationList(c)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SerialOf returns the serial number of the first certificate of the PEM file.
func SerialOf(file string) (*big.Int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", file)
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			return c.SerialNumber, nil
		}
	}
}
