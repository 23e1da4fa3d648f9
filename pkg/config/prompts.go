package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// Prompts are the texts that open every run's conversation, joined into its system message in
// this order (README, "Prompts and profiles"). The intent stage's task type and constraints
// follow them.
type Prompts struct {
	// System is the system prompt; empty is the built-in one ("You are agentmesh, a helpful
	// assistant. …").
	System string `yaml:"system,omitempty"`
	// Constitution is the agent's behavioural rules (seed 004's constitution: what it does,
	// when it uses tools, when it asks, what it declines); none by default.
	Constitution string `yaml:"constitution,omitempty"`
	// Retrieval is the rules for answers from retrieved documents (seed 002: search before
	// answering, cite, and say "I don't have enough information in the current documentation
	// to answer that." when the search finds nothing); none by default.
	Retrieval string `yaml:"retrieval,omitempty"`
}

// Profile is an agent profile: a run that names it (RunRequest.profile) uses its prompts and
// targets instead of the top-level ones, e.g. a documentation assistant with retrieval rules
// and a strong model next to a cheap general chat.
//
//	profiles:
//	  docs:
//	    prompts: {retrieval: "Search the knowledge base with knowledge_search before answering. …"}
//	    targets: [{provider: claude, model: claude-sonnet-4-5}]
type Profile struct {
	// Prompts are the profile's; each one left empty is the top-level one.
	Prompts Prompts `yaml:"prompts,omitempty"`
	// Targets replace the top-level targets for the profile's runs; empty keeps them.
	Targets []Target `yaml:"targets,omitempty"`
}

// profileName is the form of a profile's name.
var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func (c *Config) validateProfiles(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		key := "profiles." + name
		if !profileName.MatchString(name) {
			p.addf("%s: a profile's name is 1 to 64 lower-case letters, digits, _ and -, starting with a letter or digit", key)
		}
		for i, t := range c.Profiles[name].Targets {
			c.checkTarget(p, fmt.Sprintf("%s.targets[%d]", key, i), t)
		}
	}
}
