package orchestrator

import (
	"context"
	"slices"
	"sync"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"google.golang.org/protobuf/proto"
)

// toolsTTL is how long the action service's last list of tools answers for it: every run lists
// the tools in PRECHECK, and asking was a call to the stage in every run, one of the seven a
// one-turn run makes (issue 15). A tool the action service adds is offered to the runs that
// start a second later at the latest; a call to one it removed within that second is refused
// by the action service, as a call to any tool it does not have.
const toolsTTL = time.Second

// toolCache shares the action service's tools among the runs of a replica: every run asks for
// the list and keeps what it got while it is in flight, so without it each run decoded, and
// each idle run held, its own copy of every schema (issue 15). It keeps the last list and its
// version: asked with that version, the action service answers that the list is unchanged
// instead of sending it again. Runs get tools equal to the last list's as that list's; the
// tools it hands out are shared, and nobody may change them.
type toolCache struct {
	mu      sync.Mutex
	list    []*typev1.Tool // the last list
	version string         // its version; "" when the action service gave none
	at      time.Time      // when the action service last gave or confirmed it; zero before the first
}

// listTools returns the action service's tools, shared through the cache.
func (s *Service) listTools(ctx context.Context) ([]*typev1.Tool, error) {
	if tools, ok := s.tools.recent(); ok {
		return tools, nil
	}
	resp, err := whenReady(ctx, "action", s.peers.Action.ListTools, &actionv1.ListToolsRequest{KnownVersion: s.tools.knownVersion()})
	if err != nil {
		return nil, err
	}
	if resp.GetUnchanged() {
		if tools, ok := s.tools.ofVersion(resp.GetVersion()); ok {
			return tools, nil
		}
		// The cache took another list meanwhile: ask for the whole list.
		if resp, err = whenReady(ctx, "action", s.peers.Action.ListTools, &actionv1.ListToolsRequest{}); err != nil {
			return nil, err
		}
	}
	return s.tools.share(resp.GetTools(), resp.GetVersion()), nil
}

// knownVersion is the version of the list the cache holds, "" for none.
func (c *toolCache) knownVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// recent returns the last list when the action service gave or confirmed it less than
// toolsTTL ago.
func (c *toolCache) recent() ([]*typev1.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= toolsTTL {
		return nil, false
	}
	return slices.Clone(c.list), true
}

// ofVersion returns the list the cache holds when it is of version, which the action service
// has just confirmed.
func (c *toolCache) ofVersion(version string) ([]*typev1.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version == "" || version != c.version {
		return nil, false
	}
	c.at = time.Now()
	return slices.Clone(c.list), true
}

// share replaces each tool of tools that equals one of the last list with that one, and
// remembers tools, of version, as the last list.
func (c *toolCache) share(tools []*typev1.Tool, version string) []*typev1.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := make(map[string]*typev1.Tool, len(c.list))
	for _, t := range c.list {
		last[t.GetName()] = t
	}
	for i, t := range tools {
		if old := last[t.GetName()]; old != nil && proto.Equal(old, t) {
			tools[i] = old
		}
	}
	toolwire.Share(tools...) // shared, so never changed: each is encoded once for every request
	c.list, c.version, c.at = slices.Clone(tools), version, time.Now()
	return tools
}
