package orchestrator

import (
	"slices"
	"sync"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// providersTTL is how long the generation stage's list of providers answers for it: every
// run checks its targets against the list before its first step (preflight), and asking for
// it was a call to the stage in every run (issue 15). A list names the providers of the
// stage's configuration, which changes only when the stage restarts.
const providersTTL = time.Second

// providerCache keeps the generation stage's last list of providers for providersTTL. Only a
// list that names every provider a contract needs answers for the stage: a run that names
// another one asks the stage again, so a provider just added is found at once, and one
// removed within the TTL fails the run's first attempt instead of its preflight. It is safe
// for concurrent use.
type providerCache struct {
	mu    sync.Mutex
	names []string
	at    time.Time // when the list was taken; zero before the first
}

// covers reports whether a list taken less than providersTTL ago names every provider c's
// targets and fallback target name.
func (p *providerCache) covers(c *typev1.ExecutionContract) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at.IsZero() || time.Since(p.at) >= providersTTL {
		return false
	}
	for _, t := range c.GetTargets() {
		if !slices.Contains(p.names, t.GetProvider()) {
			return false
		}
	}
	fb := c.GetFallbackTarget()
	return fb == nil || slices.Contains(p.names, fb.GetProvider())
}

// take keeps names as the stage's list, taken now.
func (p *providerCache) take(names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names, p.at = slices.Clone(names), time.Now()
}
