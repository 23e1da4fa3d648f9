package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// DefaultMemoryRatio is the share of its cgroup's memory limit that a process takes as the Go
// runtime's soft memory limit, unless MemoryRatioEnv says otherwise. The rest is left to what
// the runtime does not count: the kernel's buffers charged to the container, the binary's pages.
const DefaultMemoryRatio = 0.9

// MemoryRatioEnv names the variable that sets the share of the cgroup's memory limit the Go
// runtime keeps under: a number in (0, 1], or "off" for no limit.
const MemoryRatioEnv = "AGENTMESH_MEMORY_RATIO"

// LimitMemory sets the Go runtime's soft memory limit to a share of the memory limit of the
// process's cgroup: the container's limit under Kubernetes or Docker Compose. Without it, the
// garbage collector lets the heap grow to twice what is live before it collects again; an
// orchestrator holding thousands of runs in flight then passes its container's limit, the
// kernel kills it, and every run it drove moves to another replica. With it, the collector
// works harder as the heap nears the limit instead (issue 15).
//
// The share is DefaultMemoryRatio, or MemoryRatioEnv's. GOMEMLIMIT, when set, is the limit, as
// the Go runtime read it. A cgroup without a memory limit, or none to read (not Linux), leaves
// the runtime without one. The limit is read once, at start: a container resized in place keeps
// the limit it started with.
//
// LimitMemory returns the limit in force (math.MaxInt64 for none), and an error wrapping
// exitcode.Invalid when MemoryRatioEnv is neither "off" nor a share in (0, 1]. It reads the
// cgroup (v1 or v2, the lowest limit on the process's path up the hierarchy) with
// github.com/KimMachineGun/automemlimit.
func LimitMemory(log *slog.Logger) (int64, error) {
	ratio, err := memoryRatio()
	if err != nil {
		return 0, err
	}
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		limit := debug.SetMemoryLimit(-1)
		log.Info("memory limit", "gomemlimit", limit, "from", "GOMEMLIMIT")
		return limit, nil
	case ratio == 0:
		log.Info("memory limit: none", "from", MemoryRatioEnv)
		return debug.SetMemoryLimit(-1), nil
	}
	cgroup, err := memlimit.FromCgroup()
	if err != nil {
		if !errors.Is(err, memlimit.ErrNoLimit) {
			log.Debug("memory limit: no cgroup memory limit to read", "err", err)
		}
		return debug.SetMemoryLimit(-1), nil
	}
	limit := int64(float64(cgroup) * ratio)
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", "gomemlimit", limit, "cgroup_limit", cgroup, "ratio", ratio)
	return limit, nil
}

// memoryRatio is MemoryRatioEnv's share, DefaultMemoryRatio when it is unset, 0 when it is
// "off".
func memoryRatio() (float64, error) {
	switch v := os.Getenv(MemoryRatioEnv); v {
	case "":
		return DefaultMemoryRatio, nil
	case "off":
		return 0, nil
	default:
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0 && r <= 1) {
			return 0, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s: want a share of the container's memory limit in (0, 1], or \"off\"; got %q", MemoryRatioEnv, v))
		}
		return r, nil
	}
}
