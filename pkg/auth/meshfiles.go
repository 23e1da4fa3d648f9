package auth

import (
	"crypto/tls"
	"fmt"
	"os"
	"time"
)

// MeshFiles name the PEM files of the mesh CA and of a service's certificate and key.
type MeshFiles struct {
	CA, Cert, Key string
}

// LoadMeshTLS returns the mutual TLS of the files, which follows them: at a
// new connection's handshake, at most once per every (ReloadInterval when 0), it looks whether
// a file changed and then loads them again. A new set that does not load, that the CA did not
// sign, or whose certificate names another service is refused with a warning, and the current
// one stays in use until the files change again.
func LoadMeshTLS(files MeshFiles, every time.Duration) (*MeshTLS, error) {
	m := &MeshTLS{}
	load := func() (*meshState, error) {
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, err
		}
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, err
		}
		st, service, err := newMeshState(caPEM, cert)
		if err != nil {
			return nil, err
		}
		switch {
		case m.service == "": // the first load, before m is shared
			m.service = service
		case service != m.service:
			return nil, fmt.Errorf("the new certificate names %s, not %s", service, m.service)
		}
		return st, nil
	}
	f, err := follow("mesh certificate of "+files.Cert, []string{files.CA, files.Cert, files.Key}, every, load)
	if err != nil {
		return nil, err
	}
	m.files = f
	return m, nil
}
