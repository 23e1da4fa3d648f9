package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ReloadInterval is how often, at most, TLS material and API keys loaded from files look
// whether they changed: at the handshakes of new connections (TLS), at calls (API keys, and
// CRLs where calls are checked against them), and while calls or connections that a
// revocation would end are held (Authenticator.Hold, MeshTLS.Hold, the connections of
// MeshTLS.ClientCredentials with CRLs), so a service with nothing open reads nothing.
const ReloadInterval = 10 * time.Second

// followed is a value loaded from files and loaded again when they change: at most once per
// every, when get is called, it reads the files (a few kilobytes of PEM) and when their
// contents changed (as a Kubernetes secret or cert-manager rotates them) it loads them again.
// Their contents, not their sizes and modification times: a new key has the size of the old,
// a certificate of the same CA and names often has, and files copied with the fixed time of a
// reproducible build have the old files' time too. A load that fails keeps the current value,
// with a warning, until the files change again.
//
// get is called by every authenticated call and every handshake: within the interval it
// reads two atomics and takes no lock, and once the interval has passed one caller looks at
// the files while the others go on with the current value.
type followed[T any] struct {
	what  string // what the files hold, for the log
	files []string
	every time.Duration
	load  func() (*T, error)
	value atomic.Pointer[T]
	// loaded, when set (before the value is shared), is called with each value loaded again,
	// once it is the current one, by the caller of get that loaded it.
	loaded func(*T)

	start   time.Time    // the origin of checked, on the monotonic clock
	checked atomic.Int64 // when the files were last looked at, in nanoseconds since start

	mu   sync.Mutex // held by the one caller that looks at the files
	last string     // the digest of their contents then
}

// follow loads the files with load and returns them followed; every 0 is ReloadInterval.
func follow[T any](what string, files []string, every time.Duration, load func() (*T, error)) (*followed[T], error) {
	f := &followed[T]{what: what, files: files, every: every, load: load, start: time.Now()}
	if f.every <= 0 {
		f.every = ReloadInterval
	}
	stamp, err := f.stamp()
	if err != nil {
		return nil, err
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	f.value.Store(v)
	f.last = stamp
	f.checked.Store(f.now())
	return f, nil
}

// get returns the current value, loaded again when the files changed.
func (f *followed[T]) get() *T {
	if f.untilCheck() > 0 {
		return f.value.Load()
	}
	if !f.mu.TryLock() {
		return f.value.Load() // another caller looks at the files: the current value meanwhile
	}
	defer f.mu.Unlock()
	if f.untilCheck() > 0 {
		return f.value.Load() // another caller looked while this one came to the lock
	}
	f.checked.Store(f.now())
	stamp, err := f.stamp()
	if err != nil || stamp == f.last {
		return f.value.Load() // a file missing for a moment (being replaced) is looked at again later
	}
	f.last = stamp
	v, err := f.load()
	if err != nil {
		slog.Warn("files changed but do not load; the current ones stay in use",
			"what", f.what, "err", err)
		return f.value.Load()
	}
	f.value.Store(v)
	slog.Info("files reloaded", "what", f.what)
	if f.loaded != nil {
		f.loaded(v)
	}
	return v
}

// now is the time on f's clock: nanoseconds since start, monotonic.
func (f *followed[T]) now() int64 { return int64(time.Since(f.start)) }

// untilCheck is how long until get looks at the files again, at least 0.
func (f *followed[T]) untilCheck() time.Duration {
	return max(f.every-time.Duration(f.now()-f.checked.Load()), 0)
}

// stamp is the SHA-256 of the files' contents, each after its length.
func (f *followed[T]) stamp() (string, error) {
	h := sha256.New()
	for _, name := range f.files {
		data, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%d:", len(data))
		h.Write(data)
	}
	return string(h.Sum(nil)), nil
}

// ServerFiles name the PEM files of a server's certificate and key and, for the certificates
// of its clients, of their CAs and CRLs.
type ServerFiles struct {
	Cert, Key string
	// ClientCA, when set, is the file of the CAs that client certificates are verified
	// against (auth.client_ca).
	ClientCA string
	// ClientCRL, when set, is a file of CRLs (ParseCRLs) of the CAs of ClientCA, each signed by
	// one of them (auth.client_crl): a client certificate they list, or a CA's of its chain, is
	// refused at the handshake.
	ClientCRL string
}

// serverState is the certificate, client CAs and CRLs a server of FollowServerTLS uses now.
type serverState struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool // nil: no client certificates
	revoked   *revocations   // nil: no CRLs
}

// ServerTLS is the TLS of a server that FollowServerTLS follows: its configuration, and the
// CRLs of its clients' certificates, which an Authenticator checks again at every call
// (Authenticator.RefuseRevoked).
type ServerTLS struct {
	config *tls.Config
	files  *followed[serverState]
	crl    bool // files.ClientCRL is set
}

// Config is the server's TLS configuration.
func (s *ServerTLS) Config() *tls.Config { return s.config }

// clientCRLs are the CRLs of the client certificates, nil without them.
func (s *ServerTLS) clientCRLs() *crls {
	if s == nil || !s.crl {
		return nil
	}
	return followedCRLs(s.files, func(st *serverState) *revocations { return st.revoked })
}

// FollowServerTLS returns the TLS of a server that presents the certificate and key of
// files.Cert and files.Key and, when files.ClientCA is set, verifies the certificates clients
// present against its CAs (a client without one may still connect, to authenticate another
// way), refusing one that the CRLs of files.ClientCRL revoke (a resumed session's too), with a
// warning at most once per RefusalInterval for a peer and certificate. It follows the files as
// LoadMeshTLS does: a rotated set is used from the next connection on; a rewritten CRL, from
// the next handshake on, and from the next call on for the connections already open when an
// Authenticator checks the calls (Authenticator.RefuseRevoked). Its errors name the setting at
// fault for the client CAs (auth.client_ca) and CRLs (auth.client_crl).
func FollowServerTLS(files ServerFiles, every time.Duration) (*ServerTLS, error) {
	if files.ClientCRL != "" && files.ClientCA == "" {
		return nil, errors.New("auth.client_crl: the CRLs of client certificates need their CAs: set auth.client_ca")
	}
	followed := []string{files.Cert, files.Key}
	for _, f := range []string{files.ClientCA, files.ClientCRL} {
		if f != "" {
			followed = append(followed, f)
		}
	}
	f, err := follow("certificate of "+files.Cert, followed, every, func() (*serverState, error) {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: loading the certificate: %w", err)
		}
		st := &serverState{cert: cert}
		if files.ClientCA == "" {
			return st, nil
		}
		pem, err := os.ReadFile(files.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("auth.client_ca: %w", err)
		}
		st.clientCAs = x509.NewCertPool()
		if !st.clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("auth.client_ca: %s holds no PEM certificate", files.ClientCA)
		}
		if files.ClientCRL != "" {
			if st.revoked, err = loadRevocations(files.ClientCRL, files.ClientCA, pem); err != nil {
				return nil, fmt.Errorf("auth.client_crl: %w", err)
			}
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	refusals := newRefusalLog(slog.Default())
	return &ServerTLS{files: f, crl: files.ClientCRL != "", config: &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			st := f.get()
			cfg := &tls.Config{Certificates: []tls.Certificate{st.cert}, MinVersion: tls.VersionTLS12}
			if st.clientCAs != nil {
				cfg.ClientCAs, cfg.ClientAuth = st.clientCAs, tls.VerifyClientCertIfGiven
			}
			if st.revoked != nil {
				cfg.VerifyConnection = refuseRevoked(st.revoked, refusals, hello)
			}
			return cfg, nil
		},
	}}, nil
}
