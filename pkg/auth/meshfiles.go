package auth

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ReloadInterval is how often, at most, a MeshTLS loaded from files looks whether they
// changed: at the handshakes of new connections, so an idle service reads nothing.
const ReloadInterval = 10 * time.Second

// MeshFiles name the PEM files of the mesh CA and of a service's certificate and key.
type MeshFiles struct {
	CA, Cert, Key string
}

// LoadMeshTLS returns the mutual TLS of the files (see NewMeshTLS), which follows them: at a
// new connection's handshake, at most once per every (ReloadInterval when 0), it looks whether
// a file changed (its size or modification time, as a Kubernetes secret or cert-manager
// rotates it) and then loads them again. A new pair that does not load, that the CA did not
// sign, or that names another service is refused with a warning, and the current one stays
// in use until the files change again.
func LoadMeshTLS(files MeshFiles, every time.Duration) (*MeshTLS, error) {
	f := &meshFiles{MeshFiles: files, every: every}
	if f.every <= 0 {
		f.every = ReloadInterval
	}
	stamp, err := f.stamp()
	if err != nil {
		return nil, err
	}
	st, service, err := f.load()
	if err != nil {
		return nil, err
	}
	f.last, f.checked = stamp, time.Now()
	m := &MeshTLS{service: service, files: f}
	m.state.Store(st)
	return m, nil
}

// meshFiles are the files a MeshTLS follows.
type meshFiles struct {
	MeshFiles
	every time.Duration

	mu      sync.Mutex
	checked time.Time // when the files were last looked at
	last    string    // their stamp then
}

// current is the certificate and CA to use now, loaded again when the files changed.
func (m *MeshTLS) current() *meshState {
	if m.files != nil {
		m.files.refresh(m)
	}
	return m.state.Load()
}

// refresh loads the files into m when they changed since they were last looked at, at most
// once per f.every.
func (f *meshFiles) refresh(m *MeshTLS) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < f.every {
		return
	}
	f.checked = time.Now()
	stamp, err := f.stamp()
	if err != nil || stamp == f.last {
		return // a file missing for a moment (being replaced) is looked at again later
	}
	f.last = stamp
	st, service, err := f.load()
	if err == nil && service != m.service {
		err = fmt.Errorf("the new certificate names %s, not %s", service, m.service)
	}
	if err != nil {
		slog.Warn("the mesh TLS files changed but do not load; the current certificate stays in use", "service", m.service, "err", err)
		return
	}
	m.state.Store(st)
	slog.Info("the mesh TLS certificate was reloaded", "service", m.service)
}

// load reads the files.
func (f *meshFiles) load() (*meshState, string, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, "", err
	}
	return newMeshState(caPEM, cert)
}

// stamp is the files' sizes and modification times.
func (f *meshFiles) stamp() (string, error) {
	var b strings.Builder
	for _, name := range []string{f.CA, f.Cert, f.Key} {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}
