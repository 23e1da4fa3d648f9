package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// PublicSecurity is the authentication of the public API from the configuration: the
// authenticator of auth.api_keys (or auth.api_keys_file) and auth.client_ca (nil when none is
// set: the API is open) and the TLS configuration of tls.cert and tls.key (nil without them),
// which verifies client certificates against auth.client_ca when it is set, refusing those
// that the CRLs of auth.client_crl revoke; the authenticator refuses the calls, and ends the
// calls it holds, on a connection whose certificate they revoke since its handshake
// (auth.Authenticator.RefuseRevoked).
func PublicSecurity(a config.Auth, t config.TLS) (*auth.Authenticator, *tls.Config, error) {
	srvTLS, err := serverTLS(t, a.ClientCA, a.ClientCRL)
	if err != nil {
		return nil, nil, err
	}
	var tlsCfg *tls.Config
	if srvTLS != nil {
		tlsCfg = srvTLS.Config()
	}
	if !a.Enabled() {
		return nil, tlsCfg, nil
	}
	authn, err := a.Authenticator()
	if err != nil {
		return nil, nil, fmt.Errorf("auth.%w", err)
	}
	if srvTLS != nil {
		authn.RefuseRevoked(srvTLS)
	}
	return authn, tlsCfg, nil
}

// serverTLS is the TLS configuration of a server with the certificate t, verifying client
// certificates against the CAs in the PEM file clientCA when it is set (a client without a
// certificate may still connect, and authenticate with an API key) and refusing those that
// the CRLs of clientCRL, when it is set, revoke. It follows the files: a rotated certificate
// or CRL is used from the next connection on (auth.FollowServerTLS).
func serverTLS(t config.TLS, clientCA, clientCRL string) (*auth.ServerTLS, error) {
	if t.Cert == "" {
		return nil, nil
	}
	c, err := auth.FollowServerTLS(auth.ServerFiles{Cert: t.Cert, Key: t.Key, ClientCA: clientCA, ClientCRL: clientCRL}, 0)
	if err == nil {
		return c, nil
	}
	// Name the setting at fault, as config.TLS.Mesh does: a missing file was only "stat PATH".
	if _, ferr := tls.LoadX509KeyPair(t.Cert, t.Key); ferr != nil {
		return nil, fmt.Errorf("tls.cert and tls.key: %w", ferr)
	}
	if _, ferr := os.ReadFile(clientCA); clientCA != "" && ferr != nil {
		return nil, fmt.Errorf("auth.client_ca: %w", ferr)
	}
	if _, ferr := os.ReadFile(clientCRL); clientCRL != "" && ferr != nil {
		return nil, fmt.Errorf("auth.client_crl: %w", ferr)
	}
	return nil, err
}

// ErrExposed is the error of a server that would listen beyond loopback without
// authentication.
var ErrExposed = errors.New("refusing to listen without authentication on an address other hosts can reach")

// CheckExposure returns ErrExposed, with what to do about it, when addr can be reached from
// other hosts (any address but loopback: ":7000" listens on every interface) and the server does
// not authenticate its callers, unless insecure says the operator wants it so.
func CheckExposure(addr string, authenticated, insecure bool) error {
	if authenticated || insecure || Loopback(addr) {
		return nil
	}
	return fmt.Errorf("%w: %s; configure auth (README, \"Security\"), listen on 127.0.0.1, or start with --insecure (AGENTMESH_INSECURE=1)", ErrExposed, addr)
}

// ErrPlaintextKeys is the error of a public API that would take API keys in clear text on an
// address other hosts can reach.
var ErrPlaintextKeys = errors.New(
	"refusing to take API keys in clear text on an address other hosts can reach")

// CheckPlaintextKeys returns ErrPlaintextKeys, with what to do about it, when the public API
// at addr takes API keys (auth.api_keys or auth.api_keys_file) without TLS (tlsCfg is nil:
// no tls.cert and tls.key) on an address other hosts can reach, where anyone on the path
// would read them, unless auth.allow_plaintext_keys says a proxy or sidecar in front of it
// terminates TLS.
func CheckPlaintextKeys(addr string, a config.Auth, tlsCfg *tls.Config) error {
	if !a.HasKeys() || tlsCfg != nil || a.AllowPlaintextKeys || Loopback(addr) {
		return nil
	}
	keys := "auth.api_keys are"
	if a.APIKeysFile != "" {
		keys = "auth.api_keys_file is"
	}
	return fmt.Errorf("%w: %s; %s set without tls.cert and tls.key: set them, "+
		"listen on 127.0.0.1, or set auth.allow_plaintext_keys: true when a proxy or sidecar "+
		"in front of the server terminates TLS", ErrPlaintextKeys, addr, keys)
}

// Loopback reports whether the listen address addr only accepts connections from this host.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secure sets up the authentication of a service binary's server. A stage serves mutual TLS
// between services when tls.ca, tls.cert and tls.key are set (TLS_CA, TLS_CERT and TLS_KEY
// override them: each process has its own certificate, and TLS_CRL tls.crl), taking calls only
// from mesh identities.
// The public API authenticates its callers as the auth section configures, over TLS with
// tls.cert and tls.key. A server that other hosts can reach without authentication refuses to
// start unless the binary runs insecure (Insecure); a public API they can reach that takes API
// keys without TLS refuses to start unless auth.allow_plaintext_keys (CheckPlaintextKeys).
func secure(opts *Options, public bool, cfg *config.Config, log *slog.Logger) error {
	mesh, err := cfg.TLS.Mesh() // the orchestrator's clients use it too: refuse a bad one here
	if err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	authenticated := false
	if public {
		authn, tlsCfg, err := PublicSecurity(cfg.Auth, cfg.TLS)
		if err != nil {
			return exitcode.Wrap(exitcode.Invalid, err)
		}
		if err := CheckPlaintextKeys(opts.Addr, cfg.Auth, tlsCfg); err != nil {
			return exitcode.Wrap(exitcode.Invalid, err)
		}
		opts.Auth, opts.TLS = authn, tlsCfg
		authenticated = authn != nil
	} else {
		opts.Mesh = mesh
		authenticated = mesh != nil
	}
	if err := CheckExposure(opts.Addr, authenticated, Insecure()); err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	switch {
	case !authenticated && !Loopback(opts.Addr):
		log.Warn("serving without authentication on an address other hosts can reach, as --insecure asks", "addr", opts.Addr)
	case public && opts.TLS == nil && cfg.Auth.HasKeys() && !Loopback(opts.Addr):
		log.Info("API keys arrive in clear text: auth.allow_plaintext_keys says TLS ends "+
			"in front of the server", "addr", opts.Addr)
	}
	if mesh != nil {
		log.Info("mutual TLS between services", "identity", auth.MeshID(mesh.Service()))
	}
	return nil
}

// Insecure reports whether the process runs insecure: started with --insecure, or with
// AGENTMESH_INSECURE set to 1 or true. An insecure server may listen beyond loopback without
// authenticating its callers.
func Insecure() bool {
	if slices.Contains(os.Args[1:], "--insecure") {
		return true
	}
	v, _ := strconv.ParseBool(os.Getenv("AGENTMESH_INSECURE"))
	return v
}
