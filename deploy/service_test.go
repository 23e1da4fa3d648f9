package deploy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
)

// service is a binary of the mesh running as its Deployment's container would.
type service struct {
	container corev1.Container
	bin       string   // the binary, the image's /usr/local/bin/service
	env       []string // its environment
	addr      string   // its LISTEN_ADDR
	health    healthpb.HealthClient
}

// startService builds the binary of the Deployment name of r and runs it with the container's
// environment and mounted configuration, but with loopback addresses of the test's:
// LISTEN_ADDR, METRICS_ADDR (metrics; none when it is ""), NATS_URL (natsURL), and no span
// exporter (there is no Jaeger here). The process gets SIGTERM when the test ends, and its
// output is logged when the test failed.
func startService(t *testing.T, r *rendered, name, natsURL, metrics string) *service {
	t.Helper()
	d := r.deployments[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	root, _ := mountConfig(t, r, d.Name, pod, c)

	work := t.TempDir()
	bin := filepath.Join(work, name)
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := grpctest.FreeAddr(t)
	env := []string{"HOME=" + work, "OTEL_SDK_DISABLED=true"}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil, strings.HasPrefix(e.Name, "OTEL_"):
		case e.Name == "METRICS_ADDR":
			if metrics != "" {
				env = append(env, "METRICS_ADDR="+metrics)
			}
		case e.Name == "LISTEN_ADDR":
			env = append(env, "LISTEN_ADDR="+addr)
		case e.Name == "NATS_URL":
			env = append(env, "NATS_URL="+natsURL)
		case e.Name == "AGENTMESH_CONFIG":
			env = append(env, "AGENTMESH_CONFIG="+filepath.Join(root, e.Value))
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = work, env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	health := grpctest.HealthClient(t, addr)
	return &service{container: c, bin: bin, env: env, addr: addr, health: health}
}
