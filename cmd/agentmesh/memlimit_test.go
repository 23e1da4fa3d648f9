package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// TestBinariesTakeTheirContainersMemoryLimit starts a service binary in a memory cgroup of
// its own, as a container runtime does, and reads the Go runtime's memory limit from the
// binary's metrics (go_gc_gomemlimit_bytes): a share of the cgroup's limit, as
// AGENTMESH_MEMORY_RATIO says, GOMEMLIMIT's when set, none outside a limited cgroup or with
// the share "off".
func TestBinariesTakeTheirContainersMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a service binary")
	}
	isolate(t)
	var cgroupLimit int64 = 256 << 20
	procs := memoryCgroup(t, cgroupLimit)
	binary := filepath.Join(meshproc.Build(t), "recovery")
	for _, tc := range []struct {
		name     string
		inCgroup bool
		env      []string
		want     int64
	}{
		{"default share", true, nil, int64(float64(cgroupLimit) * server.DefaultMemoryRatio)},
		{"configured share", true, []string{server.MemoryRatioEnv + "=0.5"}, cgroupLimit / 2},
		{"GOMEMLIMIT", true, []string{"GOMEMLIMIT=100MiB"}, 100 << 20},
		{"off", true, []string{server.MemoryRatioEnv + "=off"}, math.MaxInt64},
		{"no limited cgroup", false, nil, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryLimitOf(t, binary, procs, tc.inCgroup, tc.env); got != tc.want {
				t.Errorf("go_gc_gomemlimit_bytes = %d, want %d", got, tc.want)
			}
		})
	}
}

// memoryLimitOf starts binary (in the cgroup whose cgroup.procs file is procs, if inCgroup) with
// env, reads go_gc_gomemlimit_bytes from its metrics, and stops it.
func memoryLimitOf(t *testing.T, binary, procs string, inCgroup bool, env []string) int64 {
	t.Helper()
	cmd := exec.Command(binary)
	if inCgroup { // the shell joins the cgroup, then becomes the binary: it starts inside
		cmd = exec.Command("sh", "-c", `echo $$ > "$0" && exec "$1"`, procs, binary)
	}
	cmd.Env = append(os.Environ(), "LISTEN_ADDR=127.0.0.1:0", "METRICS_ADDR=127.0.0.1:0", "OTEL_SDK_DISABLED=true",
		"GOMEMLIMIT=", server.MemoryRatioEnv+"=")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		addr <- metricsAddr(stderr)
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("the binary did not exit cleanly on SIGTERM: %v", err)
		}
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the binary did not serve its metrics within 30s")
	}
	if a == "" {
		t.Fatal("the binary exited before it served its metrics")
	}
	metrics := metricstest.Scrape(t, a)
	if len(metrics.Series("go_gc_gomemlimit_bytes", nil)) != 1 {
		t.Fatalf("the binary's metrics have no go_gc_gomemlimit_bytes: %s", metrics)
	}
	if v := metrics.Value("go_gc_gomemlimit_bytes", nil); v < math.MaxInt64 {
		return int64(v)
	}
	return math.MaxInt64
}

// metricsAddr reads a binary's JSON log until it says where it serves its metrics, and returns
// the address ("" if the log ends first).
func metricsAddr(log io.Reader) string {
	sc := bufio.NewScanner(log)
	for sc.Scan() {
		var line struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving metrics" {
			return line.Addr
		}
	}
	return ""
}

// memoryCgroup makes a memory cgroup limited to limit bytes, removed when t ends, and returns
// its cgroup.procs file, which a process writes its pid to to join it. It skips t where no
// memory cgroup can be made (not root, no memory controller, a read-only cgroup file system).
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	name := fmt.Sprintf("agentmesh-test-%d", os.Getpid())
	var dir, limitFile string
	if controllers, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(controllers), "memory") {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", name), "memory.max" // cgroup v2
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes" // cgroup v1
	} else {
		t.Skip("no memory cgroup controller on this machine")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing the cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit the memory cgroup: %v", err)
	}
	return filepath.Join(dir, "cgroup.procs")
}
