package meshproc

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// External starts a program that is not one of the mesh's binaries, such as a stage written in
// another language, as a gRPC service on a free loopback port, which it is told in LISTEN_ADDR
// as the mesh's binaries are; env is the rest of its environment. The harness connects to it
// with creds (nil: plaintext), e.g. PKI.Client's for a stage that serves mutual TLS. External
// returns once the program reports SERVING on the gRPC health service; give its Addr to Start
// in Options.Replaced. The program runs in an empty working directory, is killed when the test
// ends, and its output is printed if the test fails.
func External(t testing.TB, name, path string, args, env []string, creds credentials.TransportCredentials) *Service {
	t.Helper()
	s := Launch(t, name, path, args, env, creds)
	s.WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
	return s
}

// Launch is External returning once the program is started, whatever its health: a service
// that starts NOT_SERVING (its database out of reach, say).
func Launch(t testing.TB, name, path string, args, env []string, creds credentials.TransportCredentials) *Service {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	addr := grpctest.FreeAddr(t)
	p := newProcess(t, name, path, t.TempDir(), args, slices.Concat(env, []string{"LISTEN_ADDR=" + addr}))
	s := newService(t, p, addr, creds)
	p.Start(t)
	return s
}
