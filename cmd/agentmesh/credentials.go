package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Environment of the CLI's credentials for the public API.
const (
	envAPIKey = "AGENTMESH_API_KEY" // sent as "authorization: Bearer <key>"
	envCA     = "AGENTMESH_CA"      // PEM file of the CA that signed the orchestrator's certificate: use TLS
	envCert   = "AGENTMESH_CERT"    // client certificate (PEM) for mTLS, with AGENTMESH_KEY
	envKey    = "AGENTMESH_KEY"     // the client certificate's private key (PEM)
)

// dialCredentials are the CLI's transport and call credentials for the orchestrator at addr,
// from the environment: TLS when AGENTMESH_CA is set (with a client certificate from
// AGENTMESH_CERT and AGENTMESH_KEY, which are refused without it), and the API key of
// AGENTMESH_API_KEY, which goes in clear text only to this host (keyInClear).
func dialCredentials(addr string) ([]grpc.DialOption, error) {
	transport, secure := insecure.NewCredentials(), false
	if os.Getenv(envCA) == "" && (os.Getenv(envCert) != "" || os.Getenv(envKey) != "") {
		return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s and %s need %s: a client certificate goes over TLS, which %s turns on (the CA of the orchestrator's certificate)",
			envCert, envKey, envCA, envCA))
	}
	if ca := os.Getenv(envCA); ca != "" {
		cfg, err := clientTLS(ca, os.Getenv(envCert), os.Getenv(envKey))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		transport, secure = credentials.NewTLS(cfg), true
	}
	// A result carries the whole conversation: accept what the mesh's servers send.
	opts := append(recordHandshakes(transport).dialOptions(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(dial.DefaultMaxMessageBytes)))
	if key := os.Getenv(envAPIKey); key != "" {
		if !secure {
			if err := keyInClear(addr); err != nil {
				return nil, err
			}
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(key)))
	}
	return opts, nil
}

// keyInClear is the error, exit 4, of AGENTMESH_API_KEY about to be sent in clear text to the
// orchestrator at addr, an address of another host, where anyone on the path would read it
// (a server that speaks TLS fails the call only once a machine in the middle has read it); nil
// for an address of this host (loopback, as `agentmesh dev` listens, or every interface), and
// when the CLI runs insecure (AGENTMESH_INSECURE=1, as for the service binaries).
func keyInClear(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || server.Loopback(addr) || server.Insecure() {
		return nil // an address that is not host:port is refused as such (newClient)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return nil
	}
	return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s would cross the network to %s in clear "+
		"text: set %s to the CA of the orchestrator's certificate, to speak TLS (or "+
		"AGENTMESH_INSECURE=1 to send it in clear text all the same)", envAPIKey, addr, envCA))
}

// authenticated reports whether the CLI sends credentials, so the server knows who calls
// and the CLI leaves user_id to it.
func authenticated() bool { return os.Getenv(envAPIKey) != "" || os.Getenv(envCert) != "" }

// clientTLS trusts the CAs of the PEM file ca and presents the certificate cert (key) when set,
// whenever the server asks for a client certificate: also when the CAs the server names in its
// request do not include the certificate's, where crypto/tls (with tls.Config.Certificates) sends
// none, and the call went on without it, UNAUTHENTICATED or as an API key's, never saying that
// the orchestrator does not take AGENTMESH_CERT. The server refuses it in the handshake then, and
// the CLI says so (handshakeError).
func clientTLS(ca, cert, key string) (*tls.Config, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", envCA, ca)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", envCert, envKey, err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return cfg, nil
}

// bearer sends an API key with every call. It is allowed without TLS, for `agentmesh dev` on
// loopback; anywhere else the CLI requires TLS (AGENTMESH_CA) first (keyInClear).
type bearer string

// GetRequestMetadata returns the authorization metadata.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: see bearer.
func (bearer) RequireTransportSecurity() bool { return false }

// stageCredentials are the transport credentials of a command that calls a stage directly, as
// `agentmesh ingest` calls the memory stage: mutual TLS between services, as the service whose
// certificate TLS_CERT and TLS_KEY name, when TLS_CA names the mesh CA (refusing a server whose
// certificate the CRLs of TLS_CRL, when set, revoke); plaintext otherwise.
// With mutual TLS the server must have the mesh identity of one of peers (the stage called)
// or the command's own (`agentmesh dev` serves every stage with one certificate), unless
// peers is empty: then any mesh identity.
func stageCredentials(peers ...string) (*handshakes, error) {
	m, err := config.TLS{CA: os.Getenv("TLS_CA"), Cert: os.Getenv("TLS_CERT"), Key: os.Getenv("TLS_KEY"),
		CRL: os.Getenv("TLS_CRL")}.Mesh()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	if m == nil {
		return recordHandshakes(insecure.NewCredentials()), nil
	}
	if len(peers) > 0 {
		peers = append(slices.Clone(peers), m.Service())
	}
	return recordHandshakes(credentials.NewTLS(m.ClientConfig(peers...))), nil
}

// handshakeError is the error of a call to the orchestrator at addr that failed UNAVAILABLE
// because the TLS handshake of its connection refused the CLI's credentials, or the server's
// (a *handshakeRefused: refusedCredentials); nil for any other failure. Such a failure is the
// CLI's configuration, exit 4, where it read as an orchestrator that does not run (exit 3):
// AGENTMESH_CA that did not sign the orchestrator's certificate, or a client certificate the
// orchestrator refused (certificateRefused), which the error names with its file.
func handshakeError(addr string, err error) error {
	var refused *handshakeRefused
	if !errors.As(err, &refused) {
		return nil
	}
	if certificateRefused(refused.cause) {
		if cert := os.Getenv(envCert); cert != "" {
			err = fmt.Errorf("the orchestrator at %s refused the client certificate of %s (%s) in the TLS "+
				"handshake: %v (check %s and %s: a certificate of its auth.client_ca, not expired, "+
				"not revoked by its auth.client_crl; the orchestrator logs why as \"TLS handshake refused\")",
				addr, envCert, cert, refused.cause, envCert, envKey)
		} else {
			err = fmt.Errorf("the orchestrator at %s refused the TLS handshake without a client certificate: %v "+
				"(set %s and %s to a certificate of its auth.client_ca and its key)", addr, refused.cause, envCert, envKey)
		}
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	const check = "check %s, the CA of the orchestrator's certificate, and %s and %s, " +
		"a client certificate of its auth.client_ca"
	err = fmt.Errorf("the TLS handshake with the orchestrator at %s failed: %s ("+check+")",
		addr, refused.reason(status.Convert(err).Message()), envCA, envCert, envKey)
	return exitcode.Wrap(exitcode.Invalid, err)
}
