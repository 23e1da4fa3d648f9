package meshproc

import (
	"context"
	"fmt"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startTimeout bounds how long a started service takes to report SERVING.
const startTimeout = 30 * time.Second

// checkTimeout bounds one health check of WaitHealth.
const checkTimeout = 2 * time.Second

// reconnect keeps a test's connection to a service coming back quickly after the service is
// restarted: gRPC's default backoff grows to two minutes.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: time.Second,
}

// Service is a gRPC process of a mesh, a stage or an orchestrator replica, listening on the same
// loopback address across restarts. A test's connection to it outlives restarts: an RPC made
// while the service is down fails with UNAVAILABLE.
type Service struct {
	*Process
	addr string
	conn *grpc.ClientConn
}

// newService returns a service listening on addr once started, whose connection has the
// transport credentials creds; the connection closes when the test ends.
func newService(t testing.TB, p *Process, addr string, creds credentials.TransportCredentials) *Service {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(reconnect))
	if err != nil {
		t.Fatalf("client of %s: %v", p.name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Service{Process: p, addr: addr, conn: conn}
}

// Addr returns the service's address, host:port.
func (s *Service) Addr() string { return s.addr }

// Conn returns the harness's connection to the service, for a client of any of its services.
func (s *Service) Conn() grpc.ClientConnInterface { return s.conn }

// Agent returns a client of AgentService on the service, an orchestrator replica.
func (s *Service) Agent() agentv1.AgentServiceClient { return agentv1.NewAgentServiceClient(s.conn) }

// Restart starts the service again, after Kill or Stop, and waits until it is SERVING.
func (s *Service) Restart(t testing.TB) {
	t.Helper()
	s.Start(t)
	s.WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
}

// Health returns the status the service reports for the whole server (service "").
func (s *Service) Health(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := healthpb.NewHealthClient(s.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return resp.GetStatus(), err
}

// WaitHealth polls the service's health until it reports want, failing t after startTimeout or
// when the process exits meanwhile.
func (s *Service) WaitHealth(t testing.TB, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	err := retry(ctx, s.Exited(t), func() error {
		got, err := s.check(t.Context()) // not cut short by the wait's own deadline
		switch {
		case err != nil:
			return err
		case got != want:
			return fmt.Errorf("it reports %s", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s did not report %s within %s: %v", s.name, want, startTimeout, err)
	}
}

// check is Health bounded by checkTimeout.
func (s *Service) check(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return s.Health(ctx)
}
