package deploy

import (
	"strconv"
	"strings"
	"testing"
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
		c := s.Spec.Template.Spec.Containers[0]
		limit := c.Resources.Limits.Memory().Value()
		v := envValue(c, "GOMEMLIMIT")
		n, ok := parseGoMemLimit(v)
		switch {
		case limit == 0:
			t.Errorf("%s: NATS has no memory limit", k.dir)
		case !ok:
			t.Errorf("%s: NATS runs with GOMEMLIMIT=%q under a memory limit of %d bytes: want a "+
				"limit of its heap below it", k.dir, v, limit)
		case n >= limit:
			t.Errorf("%s: NATS's GOMEMLIMIT=%s is not below its container's memory limit, %d bytes",
				k.dir, v, limit)
		}
	}
}
