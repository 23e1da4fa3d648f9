package deploy

import (
	"strconv"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/server"
)

// mcpServerRoom is the memory a stdio MCP server takes in the action container: npx's Node
// process and the server's own (the reference filesystem server's Node alone holds some
// 70 MiB resident once it serves).
const mcpServerRoom = 128 << 20

// TestActionLeavesRoomForMCPServers: the action stage's stdio MCP servers run in its container,
// under its memory limit, but its Go runtime's soft limit (server.LimitMemory) is a share of
// the whole container's limit. At the default share, 90%, the Go heap may grow to within a
// few MiB of the limit before the collector pushes back, and with one MCP server running the
// kernel kills the container first: its tool calls in flight are cut off and every MCP server
// restarts. Each overlay's action container must leave at least one MCP server's room beside
// its Go memory limit.
func TestActionLeavesRoomForMCPServers(t *testing.T) {
	for _, k := range kustomizations {
		d := render(t, k.dir).deployments["action"]
		if d == nil {
			t.Errorf("%s: no Deployment action", k.dir)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		limit := c.Resources.Limits.Memory().Value()
		var goLimit int64
		if v := envValue(c, "GOMEMLIMIT"); v != "" {
			n, ok := parseGoMemLimit(v)
			if !ok {
				t.Errorf("%s: action's GOMEMLIMIT=%q is not a memory limit", k.dir, v)
				continue
			}
			goLimit = n
		} else {
			ratio := server.DefaultMemoryRatio
			if v := envValue(c, server.MemoryRatioEnv); v != "" {
				r, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Errorf("%s: action's %s=%q is not a share", k.dir, server.MemoryRatioEnv, v)
					continue
				}
				ratio = r
			}
			goLimit = int64(float64(limit) * ratio)
		}
		if room := limit - goLimit; room < mcpServerRoom {
			t.Errorf("%s: action's memory limit is %d MiB and its Go runtime's %d MiB: %d MiB "+
				"left for its stdio MCP servers, want %d MiB at least", k.dir, limit>>20, goLimit>>20,
				room>>20, mcpServerRoom>>20)
		}
	}
}
