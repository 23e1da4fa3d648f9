package auth

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// MeshFiles name the PEM files of the mesh CA and of a service's certificate and key, and the
// file of the CRLs of the mesh CA, if any.
type MeshFiles struct {
	CA, Cert, Key string
	// CRL, when set, is a file of CRLs (ParseCRLs), each signed by a CA of CA: a certificate
	// they list, a service's or a CA's of its chain, is refused at the handshake, a client's by
	// the servers and a server's by the clients, and on a connection already open, a client's
	// calls by the server (MeshTLS.Admission, MeshTLS.Hold) and the connection to a server by
	// the client (MeshTLS.ClientCredentials).
	CRL string
}

// LoadMeshTLS returns the mutual TLS of the files, which follows them: at a
// new connection's handshake, at most once per every (ReloadInterval when 0), it looks whether
// a file changed and then loads them again (and while calls or connections are held,
// MeshTLS.Hold and MeshTLS.ClientCredentials, without a handshake to look). A new set that does not load, that the CA did not
// sign, whose certificate names another service, or whose CRLs do not parse or were not signed
// by a CA of the CA file is refused with a warning, and the current one stays in use until the
// files change again. An error of the CRL file is a *CRLError.
func LoadMeshTLS(files MeshFiles, every time.Duration) (*MeshTLS, error) {
	m := &MeshTLS{refusals: newRefusalLog(slog.Default())}
	load := func() (*meshState, error) {
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, err
		}
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, err
		}
		var revoked *revocations
		if files.CRL != "" {
			if revoked, err = loadRevocations(files.CRL, files.CA, caPEM); err != nil {
				return nil, err
			}
		}
		st, service, err := newMeshState(caPEM, cert, revoked)
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
	followed := []string{files.CA, files.Cert, files.Key}
	if files.CRL != "" {
		followed = append(followed, files.CRL)
	}
	f, err := follow("mesh certificate of "+files.Cert, followed, every, load)
	if err != nil {
		return nil, err
	}
	m.files = f
	if files.CRL != "" {
		m.crls = followedCRLs(f, func(st *meshState) *revocations { return st.revoked })
		m.held = newHolds(nil, m.crls)
		// New CRLs, whoever read them (a handshake, a call, the holds' watch), end at once
		// the calls and close the connections they revoke.
		f.loaded = func(st *meshState) { m.held.revokeCerts(st.revoked) }
	}
	return m, nil
}
