package orchestrator

import (
	"maps"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// DefaultSystemPrompt opens every conversation unless the prompts say otherwise.
const DefaultSystemPrompt = "You are agentmesh, a helpful assistant. Use the available tools when they help " +
	"answer the user's request, and answer concisely once you have what you need."

// MaxProfileBytes is the longest profile name a request may carry.
const MaxProfileBytes = 64

// Prompts are the texts a run's system message is made of, in this order (config.Prompts).
type Prompts struct {
	// System is the system prompt (DefaultSystemPrompt when empty).
	System string
	// Constitution is the agent's behavioural rules (seed 004); optional.
	Constitution string
	// Retrieval is the rules for answers from retrieved documents (seed 002); optional.
	Retrieval string
}

// Profile is an agent profile a run selects by name (RunRequest.profile).
type Profile struct {
	// Prompts are the profile's; each one left empty is Options.Prompts'.
	Prompts Prompts
	// Contract is the contract the profile's runs start from (Options.Contract when nil).
	Contract *typev1.ExecutionContract
}

// profile is a resolved profile: its system message and its default contract.
type profile struct {
	prompt   string
	contract *typev1.ExecutionContract
}

// systemMessage joins the prompts, trimmed (a YAML block ends with a newline), into a system
// message.
func (p Prompts) systemMessage() string {
	parts := []string{strings.TrimSpace(p.System)}
	if parts[0] == "" {
		parts[0] = DefaultSystemPrompt
	}
	for _, s := range []string{p.Constitution, p.Retrieval} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// inherit fills the prompts left empty from base.
func (p Prompts) inherit(base Prompts) Prompts {
	if p.System == "" {
		p.System = base.System
	}
	if p.Constitution == "" {
		p.Constitution = base.Constitution
	}
	if p.Retrieval == "" {
		p.Retrieval = base.Retrieval
	}
	return p
}

// resolveProfiles returns the default profile (name "") and the named ones.
func resolveProfiles(prompts Prompts, contract *typev1.ExecutionContract, named map[string]Profile) map[string]profile {
	out := map[string]profile{"": {prompt: prompts.systemMessage(), contract: contract}}
	for name, p := range named {
		c := p.Contract
		if c == nil {
			c = contract
		}
		out[name] = profile{prompt: p.Prompts.inherit(prompts).systemMessage(), contract: c}
	}
	return out
}

// profile returns the profile a request names; an unknown one is INVALID_INPUT.
func (s *Service) profile(name string) (profile, error) {
	if len(name) > MaxProfileBytes {
		return profile{}, stageerr.Invalid("profile: at most %d bytes, got %d", MaxProfileBytes, len(name))
	}
	p, ok := s.profiles[name]
	if !ok {
		known := slices.DeleteFunc(slices.Sorted(maps.Keys(s.profiles)), func(n string) bool { return n == "" })
		if len(known) == 0 {
			return profile{}, stageerr.Invalid("profile %q is not configured (no profiles are)", name)
		}
		return profile{}, stageerr.Invalid("profile %q is not configured (configured: %s)", name, strings.Join(known, ", "))
	}
	return p, nil
}

// PromptsFromConfig returns the configured prompts (config prompts).
func PromptsFromConfig(p config.Prompts) Prompts {
	return Prompts{System: p.System, Constitution: p.Constitution, Retrieval: p.Retrieval}
}

// ProfilesFromConfig returns the configured profiles (config profiles): each one's contract
// is the configuration's with the profile's targets, when it has some.
func ProfilesFromConfig(cfg *config.Config) map[string]Profile {
	out := make(map[string]Profile, len(cfg.Profiles))
	for name, p := range cfg.Profiles {
		pr := Profile{Prompts: PromptsFromConfig(p.Prompts)}
		if len(p.Targets) > 0 {
			withTargets := *cfg
			withTargets.Targets = p.Targets
			pr.Contract = ContractFromConfig(&withTargets)
		}
		out[name] = pr
	}
	return out
}
