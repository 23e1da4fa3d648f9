package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// stages are the service binaries and the variable that names each one's address.
var stages = []struct{ name, env string }{
	{"orchestrator", ""}, {"intent", "INTENT_ADDR"}, {"planning", "PLANNING_ADDR"}, {"context", "CONTEXT_ADDR"},
	{"generation", "GENERATION_ADDR"}, {"action", "ACTION_ADDR"}, {"observation", "OBSERVATION_ADDR"},
	{"memory", "MEMORY_ADDR"}, {"recovery", "RECOVERY_ADDR"},
}

// TestSeparateBinaries runs the mesh as nine processes wired only by the variables
// docker-compose.yml sets, makes a run through the CLI, and stops each process with SIGTERM,
// which must drain and exit 0.
func TestSeparateBinaries(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir() // built before isolate(t): its HOME would leave Go's caches cold
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin+string(os.PathSeparator))
	for _, s := range stages {
		build.Args = append(build.Args, "./cmd/"+s.name)
	}
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	isolate(t)
	nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Shutdown)

	addrs := map[string]string{}
	env := append(os.Environ(), "NATS_URL="+nats.ClientURL(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_TRACES_EXPORTER=none")
	for _, s := range stages {
		addrs[s.name] = freeAddr(t)
		if s.env != "" {
			env = append(env, s.env+"="+addrs[s.name])
		}
	}
	var procs []*exec.Cmd
	for _, s := range stages {
		cmd := exec.Command(filepath.Join(bin, s.name))
		cmd.Env = append(env, "LISTEN_ADDR="+addrs[s.name])
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if t.Failed() {
				t.Logf("%s logs:\n%s", s.name, logs.String())
			}
		})
	}
	for _, s := range stages {
		waitServing(t, addrs[s.name])
	}

	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"run", "--addr", addrs["orchestrator"], "What is 6 times 7?"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "42") || !strings.Contains(stderr.String(), "← calculator: 42") {
		t.Errorf("run output:\n%s%s", stdout.String(), stderr.String())
	}

	for i, cmd := range procs {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", stages[i].name, err)
		}
	}
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// waitServing polls a server's health until it reports SERVING.
func waitServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(fmt.Errorf("%s never became healthy: %v", addr, err))
		}
	}
}
