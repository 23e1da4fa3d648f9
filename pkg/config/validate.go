package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/target"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/toolname"
)

// Provider types.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderRules     = "rules"
)

// Memory stores.
const (
	StoreMemory   = "memory"
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// JetStream storage kinds (nats.storage).
const (
	StorageFile   = "file"
	StorageMemory = "memory"
)

// toolTransports are the accepted values of defaults.tool_transport ("" means native).
var toolTransports = []string{"", "native", "xml-final", "xml"}

// mcpSeparator joins an MCP server's name and its tool's name into the tool's full name,
// "<server>__<tool>", as the action stage names it.
const mcpSeparator = toolname.MCPSeparator

// maxToolName is the longest tool name model providers take: OpenAI and Anthropic accept
// function names of 1 to 64 letters, digits, _ and - only, and refuse a request offering any
// other.
const maxToolName = toolname.MaxLen

// serverName is the form of an MCP server's name, which begins the names of its tools,
// "<server>__<tool>" (a REST tool's name is toolname.Valid).
var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,61}$`)

// eitherApproval ends the message of a tool configured both to require approval and to be
// exempt from it: the exemption would silently win, and the tool run unguarded.
const eitherApproval = "a tool requires approval or is exempt from it, not both"

// restMethods are the accepted REST tool methods ("" means GET).
var restMethods = []string{"", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// problems collects what is wrong with a configuration.
type problems []error

// addf records a problem.
func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Errorf(format, args...))
}

// nonNegative records a problem for each named value below zero.
func (p *problems) nonNegative(prefix string, values map[string]int64) {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if values[name] < 0 {
			p.addf("%s.%s: must not be negative, got %d", prefix, name, values[name])
		}
	}
}

// MaxDurationMS is the longest duration a setting in milliseconds takes: the longest
// time.Duration, about 292 years. A longer one wrapped around, to a negative duration or a
// short one, when the services turned it into a time.Duration.
const MaxDurationMS = int64(math.MaxInt64 / time.Millisecond)

// durationsMS records a problem for each named duration in milliseconds over MaxDurationMS.
func (p *problems) durationsMS(prefix string, values map[string]int64) {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if v := values[name]; v > MaxDurationMS {
			p.addf("%s.%s: must be at most %d (292 years), got %d", prefix, name, MaxDurationMS, v)
		}
	}
}

// tokenCounts records a problem for each named token count below zero or over
// tokens.MaxCount, the most a run's contract takes (README, "Limits"): a configuration over it
// started the mesh, and then every run was refused as if its request's overrides were wrong.
func (p *problems) tokenCounts(prefix string, values map[string]int64) {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		switch v := values[name]; {
		case v < 0:
			p.addf("%s.%s: must not be negative, got %d", prefix, name, v)
		case v > tokens.MaxCount:
			p.addf("%s.%s: must be at most %d tokens, got %d", prefix, name, int64(tokens.MaxCount), v)
		}
	}
}

// Validate returns every problem of the configuration joined, wrapped in ErrInvalid, or nil.
func (c *Config) Validate() error {
	var p problems
	c.validateServices(&p)
	c.validateGRPC(&p)
	c.validateObservation(&p)
	c.validateDefaults(&p)
	c.validateRunLimits(&p)
	c.validateProviders(&p)
	c.validateTargets(&p)
	c.validateModelWindows(&p)
	c.validateProfiles(&p)
	c.validateMemory(&p)
	c.validateQueues(&p)
	c.validateTools(&p)
	c.validateDurability(&p)
	c.validateEventAge(&p)
	c.validateSecurity(&p)
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(p...))
}

func (c *Config) validateServices(p *problems) {
	s := c.Services
	for _, svc := range []struct{ name, addr string }{
		{"orchestrator", s.Orchestrator}, {"intent", s.Intent}, {"planning", s.Planning},
		{"context", s.Context}, {"generation", s.Generation}, {"action", s.Action},
		{"observation", s.Observation}, {"memory", s.Memory}, {"recovery", s.Recovery},
	} {
		if svc.addr == "" {
			p.addf("services.%s: address must not be empty", svc.name)
		} else if err := CheckAddress(svc.addr); err != nil {
			p.addf("services.%s: %v", svc.name, err)
		}
	}
}

// CheckAddress returns an error unless addr is host:port with a port from 0 to 65535 (an
// empty host is every interface), the addresses of services.* and of the binaries' LISTEN_ADDR
// and METRICS_ADDR.
func CheckAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q is not host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q: the port must be a number from 0 to 65535", addr)
	}
	return nil
}

// minMaxMessageBytes is the smallest grpc.max_message_bytes: a smaller limit would refuse
// ordinary runs (and catches a limit written in megabytes).
const minMaxMessageBytes = 1 << 20

// maxMessageBytesLimit is the largest grpc.max_message_bytes: protobuf's limit, 2 GiB.
const maxMessageBytesLimit = 1<<31 - 1

// validateModelWindows checks, for each model a target or models.* names, that the window its
// requests get (the model's context_window, context_window_buffer_tokens and
// max_output_tokens, each defaulting to defaults') leaves room for the conversation: the
// orchestrator takes the tightest target's, and every run's preflight failed on a window that
// leaves none; the fallback model, and a stage's, would never be asked.
func (c *Config) validateModelWindows(p *problems) {
	targets := slices.Clone(c.Targets)
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		targets = append(targets, c.Profiles[name].Targets...)
	}
	sm := c.Models
	for _, t := range []*Target{sm.Fallback, sm.Intent, sm.Planning, sm.Observation, sm.Memory} {
		if t != nil {
			targets = append(targets, *t)
		}
	}
	seen := map[Target]bool{}
	for _, t := range targets {
		m, ok := c.Providers[t.Provider].Models[t.Model]
		if !ok || seen[t] || m.ContextWindow == 0 && m.ContextWindowBufferTokens == 0 && m.MaxOutputTokens == 0 {
			continue // the defaults', checked with them
		}
		seen[t] = true
		if w, b, o := c.Window(t); w > 0 && b+o >= w {
			p.addf("providers.%s.models.%s: a context_window of %d leaves no room for the conversation after context_window_buffer_tokens + max_output_tokens (%d, defaults' where the model sets none)",
				t.Provider, t.Model, w, b+o)
		}
	}
}

func (c *Config) validateGRPC(p *problems) {
	if n := c.GRPC.MaxMessageBytes; n < minMaxMessageBytes || n > maxMessageBytesLimit {
		p.addf("grpc.max_message_bytes: must be between %d (1 MiB) and %d (2 GiB, protobuf's limit), got %d", minMaxMessageBytes, maxMessageBytesLimit, n)
	}
}

func (c *Config) validateObservation(p *problems) {
	if n := c.GRPC.StreamBufferBytes; n < 1 {
		p.addf("grpc.stream_buffer_bytes: must be at least 1, got %d", n)
	}
	if n := c.Observation.MaxInputBytes; n < 0 || n > int64(c.GRPC.MaxMessageBytes) {
		p.addf("observation.max_input_bytes: must be between 0 (the default) and grpc.max_message_bytes (%d), got %d", c.GRPC.MaxMessageBytes, n)
	}
}

// MaxTimeoutMS is the longest timeout a run's contract takes, the configuration's defaults as
// a request's overrides: 30 days (larger values would overflow time arithmetic).
const MaxTimeoutMS = 30 * 24 * 3600 * 1000

// MaxSearchCacheEntries bounds memory.search_cache.entries: a million searches of up to
// 100 hits each is already more than a replica's memory should hold.
const MaxSearchCacheEntries = 1 << 20

// MaxStrictFormatRetries is the most max_format_retries a contract under strict_mode takes, the
// configuration's defaults as a request's overrides: seed 001's V2.1 overlay makes the strict
// retry path "deterministic and bounded (<=1)".
const MaxStrictFormatRetries = 1

func (c *Config) validateDefaults(p *problems) {
	d := c.Defaults
	if d.MaxTurns < 1 {
		p.addf("defaults.max_turns: must be at least 1, got %d", d.MaxTurns)
	}
	if d.MaxRetries < 1 {
		p.addf("defaults.max_retries: must be at least 1 (it counts every LLM attempt of a turn), got %d", d.MaxRetries)
	}
	if d.MaxToolCallsPerTurn < 1 {
		p.addf("defaults.max_tool_calls_per_turn: must be at least 1, got %d", d.MaxToolCallsPerTurn)
	}
	p.nonNegative("defaults", map[string]int64{
		"max_tool_calls_total":    int64(d.MaxToolCallsTotal),
		"tool_response_max_bytes": d.ToolResponseMaxBytes,
		"max_format_retries":      int64(d.MaxFormatRetries),
		"max_replans":             int64(d.MaxReplans),
	})
	if d.StrictMode && d.MaxFormatRetries > MaxStrictFormatRetries {
		p.addf("defaults.max_format_retries: must be at most %d under strict_mode, got %d",
			MaxStrictFormatRetries, d.MaxFormatRetries)
	}
	p.tokenCounts("defaults", map[string]int64{
		"max_tokens_consumed":          d.MaxTokensConsumed,
		"context_window":               d.ContextWindow,
		"context_window_buffer_tokens": d.ContextWindowBufferTokens,
		"max_output_tokens":            d.MaxOutputTokens,
	})
	// A run's contract takes no timeout of 0 (the orchestrator refuses it): a step that may
	// take no time, or a pause no one can decide in time, would fail every run.
	for _, t := range []struct {
		name string
		ms   int64
	}{{"tool_timeout_ms", d.ToolTimeoutMS}, {"step_timeout_ms", d.StepTimeoutMS}, {"total_timeout_ms", d.TotalTimeoutMS},
		{"approval_timeout_ms", d.ApprovalTimeoutMS}, {"answer_timeout_ms", d.AnswerTimeoutMS}} {
		switch {
		case t.ms < 1:
			p.addf("defaults.%s: must be positive, got %d", t.name, t.ms)
		case t.ms > MaxTimeoutMS:
			p.addf("defaults.%s: must be at most %d (30 days), got %d", t.name, MaxTimeoutMS, t.ms)
		}
	}
	switch {
	case d.MaxPlanSteps < 1:
		p.addf("defaults.max_plan_steps: must be at least 1, got %d", d.MaxPlanSteps)
	case d.MaxPlanSteps > plan.MaxStepsLimit: // the planning stage refuses more
		p.addf("defaults.max_plan_steps: must be at most %d, got %d", plan.MaxStepsLimit, d.MaxPlanSteps)
	}
	if reserved := d.ContextWindowBufferTokens + d.MaxOutputTokens; d.ContextWindow > 0 && reserved >= d.ContextWindow {
		p.addf("defaults.context_window: %d leaves no room for the conversation after context_window_buffer_tokens + max_output_tokens (%d)", d.ContextWindow, reserved)
	}
	checkSampling(p, "defaults", d.Temperature, d.TopP)
	// The rule of a request's overrides and of the context stage: 1 (the whole window) is
	// allowed, and 0 turns the ratio off.
	if !(d.ForceSynthesisAtRatio >= 0 && d.ForceSynthesisAtRatio <= 1) { // NaN too
		p.addf("defaults.force_synthesis_at_ratio: must be between 0 and 1, got %g", d.ForceSynthesisAtRatio)
	}
	if !slices.Contains(toolTransports, d.ToolTransport) {
		p.addf("defaults.tool_transport: unknown transport %q (want native, xml-final or xml)", d.ToolTransport)
	}
	for i, pair := range d.CycleForbid {
		if pair[0] == "" || pair[1] == "" {
			p.addf("defaults.cycle_forbid[%d]: both tool names must be set, got %q", i, pair)
		}
	}
}

func (c *Config) validateProviders(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		pr := c.Providers[name]
		key := "providers." + name
		switch pr.Type {
		case ProviderOpenAI, ProviderRules, ProviderAnthropic:
		case "":
			p.addf("%s.type: must be set (openai, anthropic or rules)", key)
		default:
			p.addf("%s.type: unknown provider type %q (want openai, anthropic or rules)", key, pr.Type)
		}
		if pr.BaseURL != "" {
			if err := checkHTTPURL(pr.BaseURL); err != nil {
				p.addf("%s.base_url: %v", key, err)
			}
		}
		if pr.TimeoutMS < 0 {
			p.addf("%s.timeout_ms: must not be negative, got %d", key, pr.TimeoutMS)
		}
		p.durationsMS(key, map[string]int64{"timeout_ms": int64(pr.TimeoutMS)})
		checkSampling(p, key, pr.Temperature, pr.TopP)
		switch pr.TokenLimitField {
		case "", "max_tokens", "max_completion_tokens":
			if pr.TokenLimitField != "" && pr.Type != ProviderOpenAI {
				p.addf("%s.token_limit_field: only an openai provider takes it, this one is %s", key, pr.Type)
			}
		default:
			p.addf("%s.token_limit_field: unknown field %q (want max_tokens or max_completion_tokens; empty chooses by model)", key, pr.TokenLimitField)
		}
		for _, model := range slices.Sorted(maps.Keys(pr.Models)) {
			m := pr.Models[model]
			mkey := key + ".models." + model
			p.tokenCounts(mkey, map[string]int64{
				"context_window":               m.ContextWindow,
				"context_window_buffer_tokens": m.ContextWindowBufferTokens,
				"max_output_tokens":            m.MaxOutputTokens,
			})
			checkSampling(p, mkey, m.Temperature, m.TopP)
			if price := m.Pricing; price != nil {
				prices := map[string]float64{"input": price.Input, "output": price.Output}
				if price.CachedInput != nil {
					prices["cached_input"] = *price.CachedInput
				}
				if price.CacheWrite != nil {
					prices["cache_write"] = *price.CacheWrite
				}
				for _, name := range slices.Sorted(maps.Keys(prices)) {
					if v := prices[name]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
						p.addf("%s.pricing.%s: must be a price of 0 or more (US dollars per million tokens), got %g", mkey, name, v)
					}
				}
			}
		}
	}
}

// checkSampling records problems with a temperature outside [0, 2] or a top_p outside [0, 1].
func checkSampling(p *problems, key string, temperature, topP *float64) {
	// Written so that NaN, which no comparison holds for, is refused too.
	if temperature != nil && !(*temperature >= 0 && *temperature <= 2) {
		p.addf("%s.temperature: must be between 0 and 2, got %g", key, *temperature)
	}
	if topP != nil && !(*topP >= 0 && *topP <= 1) {
		p.addf("%s.top_p: must be between 0 and 1, got %g", key, *topP)
	}
}

// checkHTTPURL returns an error unless raw is an absolute http or https URL.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	return nil
}

func (c *Config) validateTargets(p *problems) {
	if len(c.Targets) == 0 {
		p.addf("targets: at least one provider/model target is required")
	}
	for i, t := range c.Targets {
		c.checkTarget(p, fmt.Sprintf("targets[%d]", i), t)
	}
	m := c.Models
	for _, st := range []struct {
		key string
		t   *Target
	}{
		{"models.intent", m.Intent}, {"models.planning", m.Planning}, {"models.observation", m.Observation},
		{"models.memory", m.Memory}, {"models.fallback", m.Fallback},
	} {
		if st.t != nil {
			c.checkTarget(p, st.key, *st.t)
		}
	}
}

// checkTarget records a problem when t names no configured provider or no model, or a name
// over target.MaxNameBytes (the generation stage refuses such a target).
func (c *Config) checkTarget(p *problems, key string, t Target) {
	switch _, ok := c.Providers[t.Provider]; {
	case t.Provider == "":
		p.addf("%s.provider: must name a provider", key)
	case !ok:
		p.addf("%s.provider: provider %q is not configured (configured: %s)", key, t.Provider, strings.Join(slices.Sorted(maps.Keys(c.Providers)), ", "))
	}
	if t.Model == "" {
		p.addf("%s.model: must name a model", key)
	}
	for _, f := range [...]struct{ name, value string }{{"provider", t.Provider}, {"model", t.Model}} {
		if n := len(f.value); n > target.MaxNameBytes {
			p.addf("%s.%s: at most %d bytes, got %d", key, f.name, target.MaxNameBytes, n)
		}
	}
}

func (c *Config) validateMemory(p *problems) {
	m := c.Memory
	switch m.Store {
	case StoreMemory:
	case StoreSQLite:
		if m.Path == "" {
			p.addf("memory.path: the sqlite store needs a database file path")
		}
	case StorePostgres:
		if m.DSN == "" {
			p.addf("memory.dsn: the postgres store needs a connection string")
		}
	default:
		p.addf("memory.store: unknown store %q (want memory, sqlite or postgres)", m.Store)
	}
	if m.PostgresMaxConns < 1 {
		p.addf("memory.postgres_max_conns: must be at least 1, got %d", m.PostgresMaxConns)
	}
	if m.QuotaPerUser < 0 {
		p.addf("memory.quota_per_user: must not be negative, got %d", m.QuotaPerUser)
	}
	if m.KeepRuns.MaxRuns < 0 {
		p.addf("memory.keep_runs.max_runs: must not be negative, got %d", m.KeepRuns.MaxRuns)
	}
	if m.KeepRuns.MaxAgeMS < 0 {
		p.addf("memory.keep_runs.max_age_ms: must not be negative, got %d", m.KeepRuns.MaxAgeMS)
	}
	p.durationsMS("memory.keep_runs", map[string]int64{"max_age_ms": m.KeepRuns.MaxAgeMS})
	if n := m.SearchCache.Entries; n < 0 || n > MaxSearchCacheEntries {
		p.addf("memory.search_cache.entries: must be between 0 (off) and %d, got %d", MaxSearchCacheEntries, n)
	}
	for i, caller := range m.Callers {
		if caller == "" || strings.ContainsAny(caller, "/:") {
			p.addf("memory.callers[%d]: must name a mesh service (the <service> of "+
				"spiffe://agentmesh/<service>), got %q", i, caller)
		}
	}
	if d := m.ReindexIntervalMS; d < 1 || d > MaxTimeoutMS {
		p.addf("memory.reindex_interval_ms: must be between 1 and %d (30 days), got %d",
			MaxTimeoutMS, d)
	}
	if ttl := m.SearchCache.TTLMS; m.SearchCache.Entries > 0 && (ttl < 1 || ttl > MaxTimeoutMS) {
		p.addf("memory.search_cache.ttl_ms: must be between 1 and %d (30 days), got %d", MaxTimeoutMS, ttl)
	}
	if e := m.Embeddings; e != nil {
		switch pr, ok := c.Providers[e.Provider]; {
		case e.Provider == "":
			p.addf("memory.embeddings.provider: must name a provider")
		case !ok:
			p.addf("memory.embeddings.provider: provider %q is not configured (configured: %s)", e.Provider, strings.Join(slices.Sorted(maps.Keys(c.Providers)), ", "))
		case pr.Type == ProviderAnthropic:
			p.addf("memory.embeddings.provider: provider %q is an anthropic provider, which has no embeddings endpoint (use an openai or rules provider)", e.Provider)
		}
		if e.Model == "" {
			p.addf("memory.embeddings.model: must name an embedding model")
		}
	}
}

func (c *Config) validateQueues(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Queues)) {
		if name == "" {
			// The action stage refuses it at start, without the key: "" names no queue.
			p.addf("queues: a queue's name must not be empty (a tool that names no queue runs on %q)", DefaultQueue)
			continue
		}
		if q := c.Queues[name]; q.Concurrent < 1 {
			p.addf("queues.%s.concurrent: must be at least 1, got %d", name, q.Concurrent)
		}
	}
}

// checkQueue records a problem when a tool binding names a queue that does not exist.
func (c *Config) checkQueue(p *problems, key, queue string) {
	if queue == "" || queue == DefaultQueue {
		return
	}
	if _, ok := c.Queues[queue]; !ok {
		p.addf("%s.queue: queue %q does not exist (define it under queues)", key, queue)
	}
}

func (c *Config) validateTools(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		s := c.MCPServers[name]
		key := "mcp_servers." + name
		if !serverName.MatchString(name) {
			p.addf("%s: a server's name is 1 to %d letters, digits, _ and -: it begins its tools' names, \"<server>%s<tool>\", and model providers refuse function names of other characters or over %d",
				key, maxToolName-len(mcpSeparator)-1, mcpSeparator, maxToolName)
		}
		switch {
		case s.Command == "" && s.URL == "":
			p.addf("%s: needs a command (stdio server) or a url (remote server)", key)
		case s.Command != "" && s.URL != "":
			p.addf("%s: sets both command and url; a server is either stdio or remote", key)
		case s.URL != "":
			if err := checkHTTPURL(s.URL); err != nil {
				p.addf("%s.url: %v", key, err)
			}
			if s.Limits != (MCPLimits{}) {
				p.addf("%s.limits: resource limits apply to stdio servers (command), not to a remote server", key)
			}
			for _, f := range []struct {
				name, hint string
				set        bool
			}{
				{"env", ": send credentials in headers", len(s.Env) > 0},
				{"args", "", len(s.Args) > 0},
				{"dir", "", s.Dir != ""},
			} {
				if f.set {
					p.addf("%s.%s: applies to a stdio server (command), not to a remote server (url)%s", key, f.name, f.hint)
				}
			}
		case len(s.Headers) > 0:
			p.addf("%s.headers: applies to a remote server (url), not to a stdio server (command): pass credentials in env", key)
		}
		s.Limits.validate(p, key+".limits")
		c.checkQueue(p, key, s.Queue)
		for i, tool := range s.RequiresApproval {
			// Listed by the server's name for it, by its full name, "<server>__<tool>", or by
			// its name in the mesh; tools.no_approval names it in the mesh, where characters
			// providers refuse are renamed (toolname.MCP).
			full := toolname.MCP(name, tool)
			if own, ok := strings.CutPrefix(tool, name+mcpSeparator); ok {
				full = tool
				if !slices.Contains(c.Tools.NoApproval, tool) {
					full = toolname.MCP(name, own)
				}
			}
			switch {
			case !slices.Contains(c.Tools.NoApproval, full):
			case full == tool:
				p.addf("%s.requires_approval[%d]: %q is also listed in tools.no_approval; %s", key, i, tool, eitherApproval)
			default:
				p.addf("%s.requires_approval[%d]: %q is also listed in tools.no_approval (as %q); %s", key, i, tool, full, eitherApproval)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.RestTools)) {
		t := c.RestTools[name]
		key := "rest_tools." + name
		if !toolname.Valid(name) {
			p.addf("%s: a tool's name is 1 to %d letters, digits, _ and - (model providers refuse other function names)", key, maxToolName)
		}
		if toolname.Reserved(name) {
			p.addf("%s: the name is reserved for one of the orchestrator's own tools (%s)", key, toolname.ReservedNames())
		}
		if t.URL == "" {
			p.addf("%s.url: must be set", key)
		} else if !strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
			p.addf("%s.url: %q must start with http:// or https://", key, t.URL)
		}
		if !slices.Contains(restMethods, t.Method) {
			p.addf("%s.method: unknown HTTP method %q (want GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS)", key, t.Method)
		}
		c.checkQueue(p, key, t.Queue)
		if t.RequiresApproval && slices.Contains(c.Tools.NoApproval, name) {
			p.addf("%s.requires_approval: the tool is also listed in tools.no_approval; %s", key, eitherApproval)
		}
	}
	for _, tool := range c.Tools.RequireApproval {
		if slices.Contains(c.Tools.NoApproval, tool) {
			p.addf("tools: %q is listed in both require_approval and no_approval", tool)
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(c.Tools.Alternatives)) {
		for i, alt := range c.Tools.Alternatives[tool] {
			if alt == "" || alt == tool {
				p.addf("tools.alternatives.%s[%d]: must name another tool", tool, i)
			}
		}
	}
}

func (c *Config) validateDurability(p *problems) {
	n := c.NATS
	if n.Replicas < 1 || n.Replicas > 5 {
		p.addf("nats.replicas: must be between 1 and 5, got %d", n.Replicas)
	}
	if n.Storage != StorageFile && n.Storage != StorageMemory {
		p.addf("nats.storage: must be %s or %s, got %q", StorageFile, StorageMemory, n.Storage)
	}
	p.nonNegative("nats", map[string]int64{"stream_max_age_ms": n.StreamMaxAgeMS, "stream_max_bytes": n.StreamMaxBytes})
	p.durationsMS("nats", map[string]int64{"stream_max_age_ms": n.StreamMaxAgeMS})
	d := c.Durability
	p.durationsMS("durability", map[string]int64{"lease_ttl_ms": d.LeaseTTLMS,
		"idempotency_ttl_ms": d.IdempotencyTTLMS, "call_record_ttl_ms": d.CallRecordTTLMS,
		"claim_timeout_ms": d.ClaimTimeoutMS})
	for _, f := range []struct {
		name  string
		value int64
	}{{"lease_ttl_ms", d.LeaseTTLMS}, {"idempotency_ttl_ms", d.IdempotencyTTLMS}, {"call_record_ttl_ms", d.CallRecordTTLMS},
		{"claim_timeout_ms", d.ClaimTimeoutMS}} {
		if f.value < 1000 {
			p.addf("durability.%s: must be at least 1000 (1 s), got %d", f.name, f.value)
		}
	}
}

// validate records a problem for each limit below -1 (-1 lifts a limit, 0 keeps its default).
func (l MCPLimits) validate(p *problems, key string) {
	for _, v := range []struct {
		name  string
		value int64
	}{
		{"cpu_seconds", l.CPUSeconds}, {"address_space_bytes", l.AddressSpaceBytes}, {"processes", l.Processes},
		{"open_files", l.OpenFiles}, {"file_size_bytes", l.FileSizeBytes},
	} {
		if v.value < -1 {
			p.addf("%s.%s: must be positive, 0 (the default) or -1 (no limit), got %d", key, v.name, v.value)
		}
	}
}

func (c *Config) validateSecurity(p *problems) {
	if _, err := auth.New(c.Auth.Keys(), nil); err != nil {
		p.addf("auth.%v", err)
	}
	// The file itself is read where the keys are used, by the orchestrator (Auth.Authenticator):
	// the other services turn memory isolation on with it, and need not mount it.
	if c.Auth.APIKeysFile != "" && len(c.Auth.APIKeys) > 0 {
		p.addf("auth.api_keys and auth.api_keys_file: keep the keys in one of them, not both")
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		p.addf("tls: cert and key go together; set both or neither")
	}
	if c.Auth.ClientCA != "" && c.TLS.Cert == "" {
		p.addf("auth.client_ca: client certificates need TLS; set tls.cert and tls.key")
	}
	if c.Auth.ClientCRL != "" && c.Auth.ClientCA == "" {
		p.addf("auth.client_crl: the CRLs of client certificates need their CAs; set auth.client_ca")
	}
	c.Auth.validateClientRoles(p)
	if c.TLS.CRL != "" && c.TLS.CA == "" {
		p.addf("tls.crl: the CRLs of the mesh CA need it; set tls.ca")
	}
}

// validateClientRoles records a problem for an auth.client_roles that is neither "ou" nor
// "none", for auth.client_ou_roles beside it (either says where roles come from), for a
// mapping of an empty OU or to an unknown role (naming the entry), and for either without
// auth.client_ca, whose certificates they are about.
func (a Auth) validateClientRoles(p *problems) {
	switch a.ClientRoles {
	case "", ClientRolesOU, ClientRolesNone:
	default:
		p.addf("auth.client_roles: must be %q (the default: an organizational unit that names a role grants it) "+
			"or %q (client certificates grant no roles); got %q", ClientRolesOU, ClientRolesNone, a.ClientRoles)
	}
	if len(a.ClientOURoles) > 0 {
		if a.ClientRoles != "" {
			p.addf("auth.client_ou_roles: only the organizational units it maps grant roles, "+
				"which auth.client_roles: %s contradicts; set one of them, not both", a.ClientRoles)
		}
		if _, err := auth.CertRolesByOU(a.ClientOURoles); err != nil {
			p.addf("auth.%v", err)
		}
	}
	if a.ClientCA != "" {
		return
	}
	if a.ClientRoles != "" {
		p.addf("auth.client_roles: the roles of client certificates need their CAs; set auth.client_ca")
	}
	if len(a.ClientOURoles) > 0 {
		p.addf("auth.client_ou_roles: the roles of client certificates need their CAs; set auth.client_ca")
	}
}
