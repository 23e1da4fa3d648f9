package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

// Mesh returns the mutual TLS between services that t configures, or nil when tls.ca is not set
// (the services talk plaintext). It follows the files: a rotated certificate or CA is used from
// the next connection on (auth.LoadMeshTLS). With tls.crl, a certificate its CRLs revoke is
// refused at the handshake, by servers and clients. tls.ca without a certificate, unreadable
// files, a certificate that names no mesh identity or that the CA did not sign, and a CRL that
// does not parse or that no CA of tls.ca signed are errors.
func (t TLS) Mesh() (*auth.MeshTLS, error) {
	if t.CA == "" {
		if t.CRL != "" {
			return nil, fmt.Errorf("%w: tls.crl: the CRLs of the mesh CA need it: set tls.ca (TLS_CA)", ErrInvalid)
		}
		return nil, nil
	}
	if t.Cert == "" || t.Key == "" {
		return nil, fmt.Errorf("%w: tls.ca: mutual TLS between services needs this process's certificate: set tls.cert and tls.key (TLS_CERT and TLS_KEY)", ErrInvalid)
	}
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: t.CA, Cert: t.Cert, Key: t.Key, CRL: t.CRL}, 0)
	if err == nil {
		return m, nil
	}
	// Name the setting at fault.
	if _, ferr := os.ReadFile(t.CA); ferr != nil {
		return nil, fmt.Errorf("%w: tls.ca: %w", ErrInvalid, ferr)
	}
	if _, ferr := tls.LoadX509KeyPair(t.Cert, t.Key); ferr != nil {
		return nil, fmt.Errorf("%w: tls.cert and tls.key: %w", ErrInvalid, ferr)
	}
	if _, ferr := os.ReadFile(t.CRL); t.CRL != "" && ferr != nil {
		return nil, fmt.Errorf("%w: tls.crl: %w", ErrInvalid, ferr)
	}
	if crlErr := (*auth.CRLError)(nil); errors.As(err, &crlErr) {
		return nil, fmt.Errorf("%w: tls.crl: %w", ErrInvalid, err)
	}
	return nil, fmt.Errorf("%w: tls: %w", ErrInvalid, err)
}
