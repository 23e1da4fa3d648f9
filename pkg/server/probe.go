package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probeTimeout bounds the health command's check.
const probeTimeout = 5 * time.Second

// HealthCommand is the argument that makes a service binary check the health of the server it
// would run instead of running it (`planning health`): a probe for container healthchecks and
// Kubernetes exec probes, in images with no shell and no grpc_health_probe.
const HealthCommand = "health"

// probe runs the health command: it asks the gRPC health service on LISTEN_ADDR (else
// defaultAddr; an address of every interface is asked on loopback) whether the server serves,
// speaking mutual TLS with the process's certificate when the configuration sets tls.ca, and,
// for the public API, TLS without a client certificate (which auth.client_ca would refuse; its
// health needs no authentication), as Main would serve. It writes what it found to out and
// returns 0 when SERVING, 1 when the server answers anything else, 3 when it cannot be reached
// and 4 when the configuration is invalid.
func probe(defaultAddr string, public bool, out io.Writer) int {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(out, "configuration:", err)
		return exitcode.Invalid
	}
	mesh, err := cfg.TLS.Mesh()
	if err != nil {
		fmt.Fprintln(out, "configuration:", err)
		return exitcode.Invalid
	}
	creds := insecure.NewCredentials()
	switch {
	case public && mesh != nil:
		c := mesh.ClientConfig()
		c.GetClientCertificate = nil // no client certificate: the public API's health is open
		creds = credentials.NewTLS(c)
	case public && cfg.TLS.Cert != "":
		// The public API's certificate names its public host, not loopback; the probe sends
		// nothing and only reads the health of its own process's server.
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // see above
	case mesh != nil:
		creds = credentials.NewTLS(mesh.ClientConfig())
	}
	addr := loopbackOf(Env("LISTEN_ADDR", defaultAddr))
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(out, "health:", err)
		return exitcode.Invalid
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Fprintf(out, "health of %s: %v\n", addr, err)
		return exitcode.Unavailable
	}
	fmt.Fprintf(out, "%s: %s\n", addr, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return exitcode.Failed
	}
	return exitcode.OK
}

// loopbackOf returns the listen address addr with an unspecified host (":7001", "0.0.0.0:7001",
// "[::]:7001") replaced by loopback, the address a probe in the same network namespace dials.
func loopbackOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
