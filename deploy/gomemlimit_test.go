package deploy

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// goMemLimitUnits are the unit suffixes GOMEMLIMIT takes (runtime/debug.SetMemoryLimit).
var goMemLimitUnits = []struct {
	suffix string
	bytes  int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseGoMemLimit returns the bytes of a GOMEMLIMIT value, false when it is not one.
func parseGoMemLimit(v string) (int64, bool) {
	unit := int64(1)
	for _, u := range goMemLimitUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, unit = n, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n * unit, err == nil && n > 0
}

// TestNATSKeepsUnderItsMemoryLimit: NATS is a Go program that, unlike the mesh's binaries
// (server.LimitMemory), does not read its container's memory limit: without GOMEMLIMIT its
// garbage collector lets the heap grow to twice what is live, past the limit, and the kernel
// kills it, and with it every run's events and checkpoints until it restarts. (JetStream also
// sizes its memory store from GOMEMLIMIT, else from the node's memory.) Each overlay's NATS
// must run with a GOMEMLIMIT below its container's memory limit.
func TestNATSKeepsUnderItsMemoryLimit(t *testing.T) {
	for _, k := range kustomizations {
		r := render(t, k.dir)
		s := r.statefulSets["nats"]
		if s == nil {
			t.Errorf("%s: no StatefulSet nats", k.dir)
			continue
		}
		checkGoMemLimit(t, k.dir, "NATS", s.Spec.Template.Spec.Containers[0])
	}
}

// TestJaegerKeepsUnderItsMemoryLimit: Jaeger's in-memory store keeps 100,000 traces unless
// told otherwise, some 7 GiB of agentmesh's runs, and its collector, a Go program, does not
// read its container's limit either. Each overlay's Jaeger runs with its base's args, which
// cap the traces it keeps (cmd/agentmesh's TestDeployedJaegerKeepsItsTraceCap proves the cap
// with the real binary), and a GOMEMLIMIT below its limit; Compose's runs with the same args.
func TestJaegerKeepsUnderItsMemoryLimit(t *testing.T) {
	var base []string
	for _, k := range kustomizations {
		r := render(t, k.dir)
		d := r.deployments["jaeger"]
		if d == nil {
			t.Errorf("%s: no Deployment jaeger", k.dir)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		checkGoMemLimit(t, k.dir, "Jaeger", c)
		if base == nil {
			base = c.Args
			if !slices.ContainsFunc(base, func(a string) bool {
				return strings.Contains(a, ".memory.max_traces=")
			}) {
				t.Errorf("%s: Jaeger's args %q do not cap its traces (memory.max_traces)", k.dir, base)
			}
		} else if !slices.Equal(c.Args, base) {
			t.Errorf("%s: Jaeger's args are %q, want its base's, %q", k.dir, c.Args, base)
		}
	}
	if got := readCompose(t).Services["jaeger"].Command; !slices.Equal(got, base) {
		t.Errorf("docker-compose.yml: Jaeger's command is %q, want the Kubernetes base's args, %q",
			got, base)
	}
}

// checkGoMemLimit fails t unless the container c of the Go program name in the
// kustomization dir runs with a GOMEMLIMIT below its memory limit.
func checkGoMemLimit(t *testing.T, dir, name string, c corev1.Container) {
	t.Helper()
	limit := c.Resources.Limits.Memory().Value()
	v := envValue(c, "GOMEMLIMIT")
	n, ok := parseGoMemLimit(v)
	switch {
	case limit == 0:
		t.Errorf("%s: %s has no memory limit", dir, name)
	case !ok:
		t.Errorf("%s: %s runs with GOMEMLIMIT=%q under a memory limit of %d bytes: want a "+
			"limit of its heap below it", dir, name, v, limit)
	case n >= limit:
		t.Errorf("%s: %s's GOMEMLIMIT=%s is not below its container's memory limit, %d bytes",
			dir, name, v, limit)
	}
}
