package deploy

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestLivesThroughANATSOutage runs each binary whose health follows NATS (healthFollows: the
// orchestrator, which cannot store run events without it, and action, which cannot read or
// write its call ledger and so runs no call) with the dev overlay's environment and
// configuration, and asks it its Deployment's probes as the kubelet would, while NATS is up and
// while it is down. Each is built to wait NATS out (NOT_SERVING, so that no call reaches it, and
// SERVING again once NATS is back): its readiness follows NATS, but its startup and liveness
// probes must not, or the kubelet restarts every replica once NATS has been gone for the
// liveness probe's failure threshold, and keeps them in CrashLoopBackOff, for up to five
// minutes, after NATS is back.
func TestLivesThroughANATSOutage(t *testing.T) {
	r := render(t, "k8s/overlays/dev")
	for name, follows := range healthFollows {
		if follows != "NATS" {
			continue
		}
		t.Run(name, func(t *testing.T) { checkLivesThroughANATSOutage(t, r, name) })
	}
}

// checkLivesThroughANATSOutage runs the binary of the Deployment name of r against an embedded
// NATS server, stops the server and starts it again, and checks its health and probes
// throughout (TestLivesThroughANATSOutage).
func checkLivesThroughANATSOutage(t *testing.T, r *rendered, name string) {
	port := grpctest.FreePort(t) // below the ephemeral range: nothing takes it while NATS is down
	store := t.TempDir()
	nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Shutdown)
	svc := startService(t, r, name, nats.ClientURL(), "")
	c, addr, health := svc.container, svc.addr, svc.health

	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	ask := func(kind string) error {
		return runProbe(t.Context(), probes[kind], c, addr, health, svc.bin, svc.env)
	}
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	for kind := range probes {
		if err := ask(kind); err != nil {
			t.Errorf("NATS up: the %s probe fails: %v", kind, err)
		}
	}

	nats.Shutdown()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	if err := ask("readiness"); err == nil {
		t.Errorf("NATS down: the readiness probe passes, so calls reach a %s replica that cannot serve them", name)
	}
	for _, kind := range []string{"startup", "liveness"} {
		if err := ask(kind); err != nil {
			t.Errorf("NATS down: the %s probe fails, and the kubelet restarts %s: %v", kind, name, err)
		}
	}

	nats, err = events.StartEmbedded(events.EmbeddedOptions{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Shutdown)
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	if err := ask("readiness"); err != nil {
		t.Errorf("NATS back: the readiness probe fails: %v", err)
	}
}

// runProbe runs the probe p of container c once, as the kubelet would, against the container's
// process serving on addr (its LISTEN_ADDR, the container's grpc port): a grpc probe asks
// health, the health service there, for p's service, a tcpSocket probe connects, an exec probe runs its command
// with bin for the image's /usr/local/bin/service and the process's env. It returns why the
// probe failed, nil when it passed.
func runProbe(ctx context.Context, p *corev1.Probe, c corev1.Container, addr string, health healthpb.HealthClient, bin string, env []string) error {
	if p == nil {
		return fmt.Errorf("no probe")
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second // the kubelet's default is 1 s
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	grpcPort := containerPort(c, "grpc")
	reaches := func(port intstr.IntOrString) error {
		if port.Type == intstr.String && containerPort(c, port.StrVal) != grpcPort || port.Type == intstr.Int && port.IntVal != grpcPort {
			return fmt.Errorf("port %s is not the grpc port %d, the only one this test serves", port.String(), grpcPort)
		}
		return nil
	}
	switch {
	case p.GRPC != nil:
		if err := reaches(intstr.FromInt32(p.GRPC.Port)); err != nil {
			return err
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("grpc probe: %s", resp.GetStatus())
		}
		return nil
	case p.TCPSocket != nil:
		if err := reaches(p.TCPSocket.Port); err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	case p.Exec != nil:
		if len(p.Exec.Command) == 0 || p.Exec.Command[0] != healthExec[0] {
			return fmt.Errorf("exec probe %v runs no service binary", p.Exec.Command)
		}
		cmd := exec.CommandContext(ctx, bin, p.Exec.Command[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("exec probe %v: %v: %s", p.Exec.Command, err, out)
		}
		return nil
	}
	return fmt.Errorf("a probe of a kind this test does not run: %+v", p.ProbeHandler)
}
