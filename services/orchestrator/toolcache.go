package orchestrator

import (
	"sync"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// toolCache shares the action service's tools among the runs of a replica: every run asks for
// the list and keeps what it got while it is in flight, so without it each idle run held its
// own decoded copy of every schema (issue 15). Runs get the tools of the last list equal to
// theirs; the tools it hands out are shared, and nobody may change them.
type toolCache struct {
	mu    sync.Mutex
	tools map[string]*typev1.Tool // the last list's, by name
}

// share replaces each tool of tools that equals one of the last list with that one, and
// remembers tools as the last list.
func (c *toolCache) share(tools []*typev1.Tool) []*typev1.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := make(map[string]*typev1.Tool, len(tools))
	for i, t := range tools {
		if old := c.tools[t.GetName()]; old != nil && proto.Equal(old, t) {
			tools[i] = old
		}
		last[t.GetName()] = tools[i]
	}
	c.tools = last
	return tools
}
