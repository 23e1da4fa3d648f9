package config

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateCatchesEachProblem(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"target names an unknown provider", func(c *Config) { c.Targets = []Target{{Provider: "nope", Model: "m"}} },
			`targets[0].provider: provider "nope" is not configured (configured: rules)`},
		{"target without model", func(c *Config) { c.Targets[0].Model = "" }, "targets[0].model: must name a model"},
		{"target model name too long", func(c *Config) { c.Targets[0].Model = strings.Repeat("m", 257) }, "targets[0].model: at most 256 bytes, got 257"},
		{"fallback model name too long", func(c *Config) { c.Models.Fallback = &Target{Provider: "rules", Model: strings.Repeat("m", 300)} },
			"models.fallback.model: at most 256 bytes, got 300"},
		{"no targets", func(c *Config) { c.Targets = nil }, "targets: at least one provider/model target is required"},
		{"profile target names an unknown provider", func(c *Config) {
			c.Profiles = map[string]Profile{"docs": {Targets: []Target{{Provider: "nope", Model: "m"}}}}
		}, `profiles.docs.targets[0].provider: provider "nope" is not configured (configured: rules)`},
		{"profile target without model", func(c *Config) {
			c.Profiles = map[string]Profile{"docs": {Targets: []Target{{Provider: "rules"}}}}
		}, "profiles.docs.targets[0].model: must name a model"},
		{"profile name", func(c *Config) { c.Profiles = map[string]Profile{"Docs Bot": {}} },
			"profiles.Docs Bot: a profile's name is 1 to 64 lower-case letters, digits, _ and -, starting with a letter or digit"},
		{"unknown provider type", func(c *Config) { c.Providers["x"] = Provider{Type: "gemini"} },
			`providers.x.type: unknown provider type "gemini"`},
		{"provider without type", func(c *Config) { c.Providers["x"] = Provider{} }, "providers.x.type: must be set"},
		{"alternative of itself", func(c *Config) { c.Tools.Alternatives = map[string][]string{"search": {"search"}} },
			"tools.alternatives.search[0]: must name another tool"},
		{"base_url not http", func(c *Config) { c.Providers["oa"] = Provider{Type: "openai", BaseURL: "localhost:8080"} },
			`providers.oa.base_url: "localhost:8080" is not an absolute http(s) URL`},
		{"negative provider timeout", func(c *Config) { c.Providers["oa"] = Provider{Type: "openai", TimeoutMS: -1} },
			"providers.oa.timeout_ms: must not be negative, got -1"},
		{"temperature out of range", func(c *Config) { c.Providers["oa"] = Provider{Type: "openai", Temperature: ptr(-0.5)} },
			"providers.oa.temperature: must be between 0 and 2, got -0.5"},
		{"session temperature out of range", func(c *Config) { c.Defaults.Temperature = ptr(2.5) },
			"defaults.temperature: must be between 0 and 2, got 2.5"},
		{"NaN temperature", func(c *Config) { c.Defaults.Temperature = ptr(math.NaN()) },
			"defaults.temperature: must be between 0 and 2, got NaN"},
		{"infinite top_p", func(c *Config) { c.Defaults.TopP = ptr(math.Inf(1)) },
			"defaults.top_p: must be between 0 and 1, got +Inf"},
		{"session top_p out of range", func(c *Config) { c.Defaults.TopP = ptr(1.5) },
			"defaults.top_p: must be between 0 and 1, got 1.5"},
		{"model top_p out of range", func(c *Config) {
			c.Providers["oa"] = Provider{Type: "openai", Models: map[string]Model{"m": {TopP: ptr(1.5)}}}
		}, "providers.oa.models.m.top_p: must be between 0 and 1, got 1.5"},
		{"negative model window", func(c *Config) {
			c.Providers["oa"] = Provider{Type: "openai", Models: map[string]Model{"m": {ContextWindow: -5}}}
		}, "providers.oa.models.m.context_window: must not be negative, got -5"},
		{"model window over the most a run takes", func(c *Config) {
			c.Providers["oa"] = Provider{Type: "openai", Models: map[string]Model{"m": {ContextWindow: 1<<48 + 1}}}
		}, "providers.oa.models.m.context_window: must be at most 281474976710656 tokens, got 281474976710657"},
		{"token budget over the most a run takes", func(c *Config) { c.Defaults.MaxTokensConsumed = 1<<48 + 1 },
			"defaults.max_tokens_consumed: must be at most 281474976710656 tokens, got 281474976710657"},
		{"output limit over the most a run takes", func(c *Config) { c.Defaults.MaxOutputTokens = math.MaxInt64 },
			"defaults.max_output_tokens: must be at most 281474976710656 tokens, got 9223372036854775807"},
		{"unknown token limit field", func(c *Config) { c.Providers["oa"] = Provider{Type: "openai", TokenLimitField: "max_output_tokens"} },
			`providers.oa.token_limit_field: unknown field "max_output_tokens" (want max_tokens or max_completion_tokens; empty chooses by model)`},
		{"token limit field of an anthropic provider", func(c *Config) {
			c.Providers["claude"] = Provider{Type: "anthropic", TokenLimitField: "max_tokens"}
		}, "providers.claude.token_limit_field: only an openai provider takes it, this one is anthropic"},
		{"negative price", func(c *Config) {
			c.Providers["oa"] = Provider{Type: "openai", Models: map[string]Model{"m": {Pricing: &Pricing{Input: 1, Output: -2}}}}
		}, "providers.oa.models.m.pricing.output: must be a price of 0 or more (US dollars per million tokens), got -2"},
		{"negative cached price", func(c *Config) {
			c.Providers["oa"] = Provider{Type: "openai", Models: map[string]Model{"m": {Pricing: &Pricing{CachedInput: ptr(-0.1)}}}}
		}, "providers.oa.models.m.pricing.cached_input: must be a price of 0 or more"},
		{"cache write price that is no number", func(c *Config) {
			c.Providers["claude"] = Provider{Type: "anthropic", Models: map[string]Model{"m": {Pricing: &Pricing{CacheWrite: ptr(math.NaN())}}}}
		}, "providers.claude.models.m.pricing.cache_write: must be a price of 0 or more"},
		{"MCP server on a missing queue", func(c *Config) { c.MCPServers = map[string]MCPServer{"fs": {Command: "x", Queue: "slow"}} },
			`mcp_servers.fs.queue: queue "slow" does not exist`},
		{"gRPC message limit in megabytes", func(c *Config) { c.GRPC.MaxMessageBytes = 32 },
			"grpc.max_message_bytes: must be between 1048576 (1 MiB) and 2147483647 (2 GiB, protobuf's limit), got 32"},
		{"observation input over the gRPC limit", func(c *Config) { c.Observation.MaxInputBytes = 64 << 20 },
			"observation.max_input_bytes: must be between 0 (the default) and grpc.max_message_bytes (33554432), got 67108864"},
		{"negative answer timeout", func(c *Config) { c.Defaults.AnswerTimeoutMS = -1 }, "defaults.answer_timeout_ms: must be positive, got -1"},
		{"nats replicas out of range", func(c *Config) { c.NATS.Replicas = 0 }, "nats.replicas: must be between 1 and 5, got 0"},
		{"unknown nats storage", func(c *Config) { c.NATS.Storage = "disk" }, `nats.storage: must be file or memory, got "disk"`},
		{"negative stream size", func(c *Config) { c.NATS.StreamMaxBytes = -1 }, "nats.stream_max_bytes: must not be negative, got -1"},
		{"lease too short", func(c *Config) { c.Durability.LeaseTTLMS = 10 }, "durability.lease_ttl_ms: must be at least 1000 (1 s), got 10"},
		{"REST tool on a missing queue", func(c *Config) {
			c.RestTools = map[string]RestTool{"t": {URL: "https://x", Queue: "slow"}}
		}, `rest_tools.t.queue: queue "slow" does not exist`},
		{"MCP server without command or url", func(c *Config) { c.MCPServers = map[string]MCPServer{"fs": {}} },
			"mcp_servers.fs: needs a command (stdio server) or a url (remote server)"},
		{"MCP server with command and url", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "x", URL: "https://x"}}
		}, "mcp_servers.fs: sets both command and url"},
		{"REST tool without url", func(c *Config) { c.RestTools = map[string]RestTool{"t": {}} }, "rest_tools.t.url: must be set"},
		{"REST tool with unknown method", func(c *Config) { c.RestTools = map[string]RestTool{"t": {URL: "https://x", Method: "FETCH"}} },
			`rest_tools.t.method: unknown HTTP method "FETCH"`},
		{"queue without slots", func(c *Config) { c.Queues["slow"] = Queue{Concurrent: 0} }, "queues.slow.concurrent: must be at least 1, got 0"},
		{"queue without a name", func(c *Config) { c.Queues[""] = Queue{Concurrent: 2} },
			`queues: a queue's name must not be empty (a tool that names no queue runs on "default")`},
		{"negative timeout", func(c *Config) { c.Defaults.ToolTimeoutMS = -1 }, "defaults.tool_timeout_ms: must be positive, got -1"},
		{"zero timeout", func(c *Config) { c.Defaults.StepTimeoutMS = 0 }, "defaults.step_timeout_ms: must be positive, got 0"},
		{"zero approval timeout", func(c *Config) { c.Defaults.ApprovalTimeoutMS = 0 }, "defaults.approval_timeout_ms: must be positive, got 0"},
		{"timeout over 30 days", func(c *Config) { c.Defaults.ApprovalTimeoutMS = 3_456_000_000 },
			"defaults.approval_timeout_ms: must be at most 2592000000 (30 days), got 3456000000"},
		{"no tool call a turn", func(c *Config) { c.Defaults.MaxToolCallsPerTurn = 0 }, "defaults.max_tool_calls_per_turn: must be at least 1, got 0"},
		{"a model window the defaults' reserve fills", func(c *Config) {
			c.Providers["local"] = Provider{Type: "openai", BaseURL: "http://127.0.0.1:11434/v1", Models: map[string]Model{"llama3:8b": {ContextWindow: 4096}}}
			c.Targets = []Target{{Provider: "local", Model: "llama3:8b"}}
		}, "providers.local.models.llama3:8b: a context_window of 4096 leaves no room for the conversation after context_window_buffer_tokens + max_output_tokens (6144"},
		{"a fallback model's window its reserve fills", func(c *Config) {
			c.Providers["local"] = Provider{Type: "openai", BaseURL: "http://127.0.0.1:11434/v1",
				Models: map[string]Model{"qwen2.5:3b": {ContextWindow: 2000, ContextWindowBufferTokens: 100, MaxOutputTokens: 2000}}}
			c.Models.Fallback = &Target{Provider: "local", Model: "qwen2.5:3b"}
		}, "providers.local.models.qwen2.5:3b: a context_window of 2000 leaves no room for the conversation after context_window_buffer_tokens + max_output_tokens (2100"},
		{"synthesis ratio not a number", func(c *Config) { c.Defaults.ForceSynthesisAtRatio = math.NaN() },
			"defaults.force_synthesis_at_ratio: must be between 0 and 1, got NaN"},
		{"negative token budget", func(c *Config) { c.Defaults.MaxTokensConsumed = -10 }, "defaults.max_tokens_consumed: must not be negative"},
		{"negative tool calls", func(c *Config) { c.Defaults.MaxToolCallsTotal = -1 }, "defaults.max_tool_calls_total: must not be negative"},
		{"zero turns", func(c *Config) { c.Defaults.MaxTurns = 0 }, "defaults.max_turns: must be at least 1, got 0"},
		{"negative search cache", func(c *Config) { c.Memory.SearchCache.Entries = -1 },
			"memory.search_cache.entries: must be between 0 (off) and 1048576, got -1"},
		{"a memory caller that names no service", func(c *Config) {
			c.Memory.Callers = []string{"context", "spiffe://agentmesh/action"}
		}, `memory.callers[1]: must name a mesh service (the <service> of ` +
			`spiffe://agentmesh/<service>), got "spiffe://agentmesh/action"`},
		{"search cache without a ttl", func(c *Config) { c.Memory.SearchCache.TTLMS = 0 },
			"memory.search_cache.ttl_ms: must be between 1 and 2592000000 (30 days), got 0"},
		{"no reindex interval", func(c *Config) { c.Memory.ReindexIntervalMS = 0 },
			"memory.reindex_interval_ms: must be between 1 and 2592000000 (30 days), got 0"},
		{"format retries over strict mode's bound", func(c *Config) {
			c.Defaults.StrictMode, c.Defaults.MaxFormatRetries = true, 2
		}, "defaults.max_format_retries: must be at most 1 under strict_mode, got 2"},
		{"allowed target of no provider", func(c *Config) {
			c.RunLimits.Targets = []Target{{Provider: "rules", Model: AnyModel}, {Provider: "oa", Model: "m"}}
		}, `run_limits.targets[1].provider: provider "oa" is not configured`},
		{"a target run_limits does not allow", func(c *Config) {
			c.RunLimits.Targets = []Target{{Provider: "rules", Model: "rules-v2"}}
		}, "targets[0]: rules/rules-v1 is not one of run_limits.targets (rules/rules-v2)"},
		{"a profile's target run_limits does not allow", func(c *Config) {
			c.RunLimits.Targets = []Target{{Provider: "rules", Model: "rules-v1"}}
			c.Profiles = map[string]Profile{"docs": {Targets: []Target{{Provider: "rules", Model: "big"}}}}
		}, "profiles.docs.targets[0]: rules/big is not one of run_limits.targets (rules/rules-v1)"},
		{"negative run limit", func(c *Config) { c.RunLimits.MaxTurns = -1 },
			"run_limits.max_turns: must not be negative (0 sets no ceiling), got -1"},
		{"token ceiling over the largest count", func(c *Config) { c.RunLimits.MaxTokensConsumed = 1 << 50 },
			"run_limits.max_tokens_consumed: must be at most"},
		{"defaults over their ceiling", func(c *Config) { c.RunLimits.MaxTurns = 5 },
			"defaults.max_turns: must be at most 5 (run_limits.max_turns), got 10"},
		{"an unlimited default under a ceiling", func(c *Config) { c.RunLimits.MaxTokensConsumed = 1000 },
			"defaults.max_tokens_consumed: must not be 0 (no limit) under run_limits.max_tokens_consumed: at most 1000"},
		{"zero retries", func(c *Config) { c.Defaults.MaxRetries = 0 }, "defaults.max_retries: must be at least 1"},
		{"zero plan steps", func(c *Config) { c.Defaults.MaxPlanSteps = 0 }, "defaults.max_plan_steps: must be at least 1, got 0"},
		{"plan steps over the planning stage's limit", func(c *Config) { c.Defaults.MaxPlanSteps = 1001 },
			"defaults.max_plan_steps: must be at most 1000, got 1001"},
		{"negative replans", func(c *Config) { c.Defaults.MaxReplans = -1 }, "defaults.max_replans: must not be negative, got -1"},
		{"window too small", func(c *Config) { c.Defaults.ContextWindow = 4000 },
			"defaults.context_window: 4000 leaves no room for the conversation after context_window_buffer_tokens + max_output_tokens (6144)"},
		{"synthesis ratio out of range", func(c *Config) { c.Defaults.ForceSynthesisAtRatio = 1.2 },
			"defaults.force_synthesis_at_ratio: must be between 0 and 1, got 1.2"},
		{"unknown tool transport", func(c *Config) { c.Defaults.ToolTransport = "json" }, `defaults.tool_transport: unknown transport "json"`},
		{"half a cycle pair", func(c *Config) { c.Defaults.CycleForbid = [][2]string{{"a", ""}} }, "defaults.cycle_forbid[0]: both tool names must be set"},
		{"unknown memory store", func(c *Config) { c.Memory.Store = "redis" }, `memory.store: unknown store "redis" (want memory, sqlite or postgres)`},
		{"sqlite without path", func(c *Config) { c.Memory.Store = "sqlite" }, "memory.path: the sqlite store needs a database file path"},
		{"postgres without dsn", func(c *Config) { c.Memory.Store = "postgres" }, "memory.dsn: the postgres store needs a connection string"},
		{"no postgres connection", func(c *Config) { c.Memory.PostgresMaxConns = 0 },
			"memory.postgres_max_conns: must be at least 1, got 0"},
		{"negative quota", func(c *Config) { c.Memory.QuotaPerUser = -1 }, "memory.quota_per_user: must not be negative, got -1"},
		{"embeddings without provider", func(c *Config) { c.Memory.Embeddings = &Target{Model: "m"} },
			"memory.embeddings.provider: must name a provider"},
		{"embeddings with an unknown provider", func(c *Config) { c.Memory.Embeddings = &Target{Provider: "oa", Model: "m"} },
			`memory.embeddings.provider: provider "oa" is not configured (configured: rules)`},
		{"embeddings with an anthropic provider", func(c *Config) {
			c.Providers["claude"] = Provider{Type: "anthropic", BaseURL: "https://api.anthropic.com/v1"}
			c.Memory.Embeddings = &Target{Provider: "claude", Model: "m"}
		}, `memory.embeddings.provider: provider "claude" is an anthropic provider, which has no embeddings endpoint`},
		{"embeddings without model", func(c *Config) { c.Memory.Embeddings = &Target{Provider: "rules"} },
			"memory.embeddings.model: must name an embedding model"},
		{"empty service address", func(c *Config) { c.Services.Memory = "" }, "services.memory: address must not be empty"},
		{"service address without port", func(c *Config) { c.Services.Action = "localhost" }, `services.action: address "localhost" is not host:port`},
		// These passed, and the service failed to listen (exit 3) or its callers to dial it.
		{"service port out of range", func(c *Config) { c.Services.Orchestrator = "127.0.0.1:99999" },
			`services.orchestrator: address "127.0.0.1:99999": the port must be a number from 0 to 65535`},
		{"service port not a number", func(c *Config) { c.Services.Planning = "planning:grpc" },
			`services.planning: address "planning:grpc": the port must be a number from 0 to 65535`},
		{"service address with an empty port", func(c *Config) { c.Services.Memory = "memory:" },
			`services.memory: address "memory:": the port must be a number from 0 to 65535`},
		{"tool in both approval lists", func(c *Config) {
			c.Tools = Tools{RequireApproval: []string{"rm"}, NoApproval: []string{"rm"}}
		}, `tools: "rm" is listed in both require_approval and no_approval`},
		// These passed, and every run that offered the tool failed at OpenAI or Anthropic, which
		// take function names of 1 to 64 letters, digits, _ and - only.
		{"REST tool name a provider refuses", func(c *Config) {
			c.RestTools = map[string]RestTool{"weather.now": {URL: "https://api.example.com/weather"}}
		}, `rest_tools.weather.now: a tool's name is 1 to 64 letters, digits, _ and - (model providers refuse other function names)`},
		{"REST tool name too long for a provider", func(c *Config) {
			c.RestTools = map[string]RestTool{strings.Repeat("x", 65): {URL: "https://api.example.com/weather"}}
		}, `: a tool's name is 1 to 64 letters, digits, _ and -`},
		{"MCP server name a provider refuses in its tools' names", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"github.com": {URL: "https://api.example.com/mcp"}}
		}, `mcp_servers.github.com: a server's name is 1 to 61 letters, digits, _ and -: it begins its tools' names, "<server>__<tool>"`},
		// These passed, and the setting was ignored: a remote server got no env (an API key
		// meant for it), and a stdio server no headers.
		{"env of a remote MCP server", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"search": {URL: "https://api.example.com/mcp", Env: map[string]string{"API_KEY": "k"}}}
		}, `mcp_servers.search.env: applies to a stdio server (command), not to a remote server (url): send credentials in headers`},
		{"args and dir of a remote MCP server", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"search": {URL: "https://api.example.com/mcp", Args: []string{"--verbose"}, Dir: "/srv"}}
		}, `mcp_servers.search.args: applies to a stdio server (command), not to a remote server (url)`},
		{"headers of a stdio MCP server", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "npx", Headers: map[string]string{"Authorization": "Bearer k"}}}
		}, `mcp_servers.fs.headers: applies to a remote server (url), not to a stdio server (command): pass credentials in env`},
		// These passed, and the exemption silently won: the tool ran without approval.
		{"REST tool requiring approval and exempt from it", func(c *Config) {
			c.RestTools = map[string]RestTool{"deploy": {URL: "https://ci.example.com/deploy", RequiresApproval: true}}
			c.Tools.NoApproval = []string{"deploy"}
		}, `rest_tools.deploy.requires_approval: the tool is also listed in tools.no_approval; a tool requires approval or is exempt from it, not both`},
		{"MCP tool requiring approval and exempt from it", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "x", RequiresApproval: []string{"read_file", "write_file"}}}
			c.Tools.NoApproval = []string{"fs__write_file"}
		}, `mcp_servers.fs.requires_approval[1]: "write_file" is also listed in tools.no_approval (as "fs__write_file"); a tool requires approval or is exempt from it, not both`},
		{"MCP tool requiring approval by its full name and exempt from it", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "x", RequiresApproval: []string{"fs__write_file"}}}
			c.Tools.NoApproval = []string{"fs__write_file"}
		}, `mcp_servers.fs.requires_approval[0]: "fs__write_file" is also listed in tools.no_approval`},
		{"MCP tool requiring approval and exempt from it by its name in the mesh", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "x", RequiresApproval: []string{"write.file"}}}
			c.Tools.NoApproval = []string{"fs__write_file"} // '.' is renamed '_' in the mesh
		}, `mcp_servers.fs.requires_approval[0]: "write.file" is also listed in tools.no_approval (as "fs__write_file"); a tool requires approval or is exempt from it, not both`},
		{"MCP tool requiring approval by its full name and exempt from it by its name in the mesh", func(c *Config) {
			c.MCPServers = map[string]MCPServer{"fs": {Command: "x", RequiresApproval: []string{"fs__write/file"}}}
			c.Tools.NoApproval = []string{"fs__write_file"}
		}, `mcp_servers.fs.requires_approval[0]: "fs__write/file" is also listed in tools.no_approval (as "fs__write_file")`},
		{"REST tool of a name the orchestrator reserves", func(c *Config) {
			c.RestTools = map[string]RestTool{"final_report": {URL: "https://reports.example.com/file"}}
		}, `rest_tools.final_report: the name is reserved for one of the orchestrator's own tools (final_report, agent__final_report, agent__progress_report)`},
		{"client CRLs without the client CA", func(c *Config) {
			c.TLS = TLS{Cert: "api.pem", Key: "api-key.pem"}
			c.Auth.ClientCRL = "clients.crl"
		}, "auth.client_crl: the CRLs of client certificates need their CAs; set auth.client_ca"},
		{"mesh CRLs without the mesh CA", func(c *Config) { c.TLS = TLS{Cert: "a.pem", Key: "a-key.pem", CRL: "mesh.crl"} },
			"tls.crl: the CRLs of the mesh CA need it; set tls.ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidateAcceptsValidSettings(t *testing.T) {
	c := Default()
	c.Providers["oa"] = Provider{Type: "openai", Temperature: ptr(0.0), TopP: ptr(1.0), TokenLimitField: "max_tokens", // base_url defaults when loading
		Models: map[string]Model{"gpt-4o": {Pricing: &Pricing{Input: 2.5, Output: 10, CachedInput: ptr(1.25)}}, "free": {Pricing: &Pricing{}}}}
	c.Providers["claude"] = Provider{Type: "anthropic", BaseURL: "https://api.anthropic.com/v1"}
	c.Targets = append(c.Targets, Target{Provider: "claude", Model: "claude-x"})
	c.Queues = nil // the default queue always exists
	c.MCPServers = map[string]MCPServer{
		"fs":     {Command: "npx", Queue: DefaultQueue},
		"remote": {URL: "http://127.0.0.1:9000/mcp"},
	}
	c.RestTools = map[string]RestTool{"t": {URL: "https://x/${parameters.id}", Method: "POST"}}
	c.Memory.Store, c.Memory.Path, c.Memory.Embeddings = "sqlite", "mem.db", &Target{Provider: "oa", Model: "text-embedding-3-small"}
	c.Defaults.CycleForbid = [][2]string{{"a", "b"}}
	// A request's overrides.force_synthesis_at_ratio may be 1 (the whole window), and the
	// context stage accepts it: the defaults were refused with it.
	c.Defaults.ForceSynthesisAtRatio = 1
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.Targets = []Target{{Provider: "nope", Model: "m"}}
	c.Memory.Store = "redis"
	c.Defaults.StepTimeoutMS = -1
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want three problems")
	}
	for _, want := range []string{"targets[0].provider", "memory.store", "defaults.step_timeout_ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, missing %q", err, want)
		}
	}
}

func TestLoadValidates(t *testing.T) {
	layers := writeLayers(t, map[string]layerFiles{"project": {yaml: "targets:\n  - {provider: ghost, model: m}\n"}})
	_, err := LoadLayers(layers)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `provider "ghost" is not configured`) {
		t.Fatalf("LoadLayers = %v, want the validation error", err)
	}
}

// memory.embeddings is off by default and turned on by a layer; a provider the layer does not
// configure is rejected.
func TestLoadMemoryEmbeddings(t *testing.T) {
	if cfg := mustLoad(t, writeLayers(t, nil)); cfg.Memory.Embeddings != nil {
		t.Errorf("default memory.embeddings = %+v, want nil (semantic search off)", cfg.Memory.Embeddings)
	}
	cfg := mustLoad(t, writeLayers(t, map[string]layerFiles{
		"user":    {yaml: "memory:\n  embeddings: {provider: rules, model: rules-v1}\n"},
		"project": {yaml: "memory:\n  quota_per_user: 7\n"},
	}))
	if got, want := cfg.Memory.Embeddings, (&Target{Provider: "rules", Model: "rules-v1"}); *got != *want {
		t.Errorf("memory.embeddings = %+v, want %+v", got, want)
	}
	if cfg.Memory.QuotaPerUser != 7 || cfg.Memory.Store != StoreMemory {
		t.Errorf("memory = %+v, want the other keys merged", cfg.Memory)
	}
	_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"project": {yaml: "memory:\n  embeddings: {provider: openai, model: x}\n"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `memory.embeddings.provider: provider "openai" is not configured`) {
		t.Errorf("LoadLayers = %v, want the unknown embeddings provider rejected", err)
	}
	_, err = LoadLayers(writeLayers(t, map[string]layerFiles{"project": {yaml: "memory:\n  embeddings: {provider: rules, modle: x}\n"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown key "modle" in memory.embeddings`) {
		t.Errorf("LoadLayers = %v, want the misspelt key rejected", err)
	}
}

// run_limits caps the defaults: a budget they leave unlimited takes its ceiling, and one over
// its ceiling is refused naming both.
func TestLoadRunLimits(t *testing.T) {
	cfg := mustLoad(t, writeLayers(t, map[string]layerFiles{"project": {yaml: "run_limits:\n" +
		"  max_tokens_consumed: 50000\n  max_tool_calls_total: 40\n  tool_response_max_bytes: 65536\n" +
		"  max_turns: 20\n"}}))
	if d := cfg.Defaults; d.MaxTokensConsumed != 50000 || d.MaxToolCallsTotal != 40 ||
		d.ToolResponseMaxBytes != 12288 || d.MaxTurns != 10 {
		t.Errorf("defaults = %+v, want the unlimited budgets at their ceilings and the others kept", d)
	}
	_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"project": {yaml: "run_limits: {total_timeout_ms: 60000}\n"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(),
		"defaults.total_timeout_ms: must be at most 60000 (run_limits.total_timeout_ms), got 600000") {
		t.Errorf("LoadLayers = %v, want the default over its ceiling refused", err)
	}
}

// TestRunsMayNotOutliveTheirEvents: a run lasts up to total_timeout_ms, its pauses included,
// so the event stream must keep events at least that long (nats.stream_max_age_ms, 7 days when
// 0): the defaults and the run_limits ceiling longer than that are refused, naming both. Before,
// a run paused for up to 30 days lost its first events at 7 days, and a watch began mid-run.
func TestRunsMayNotOutliveTheirEvents(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"nats: {stream_max_age_ms: 3600000}\ndefaults: {total_timeout_ms: 3600001}\n",
			"nats.stream_max_age_ms: must be at least defaults.total_timeout_ms (3600001), " +
				"the longest a run lasts, or its first events expire while it runs; got 3600000"},
		{"nats: {stream_max_age_ms: 3600000}\nrun_limits: {total_timeout_ms: 7200000}\n",
			"nats.stream_max_age_ms: must be at least run_limits.total_timeout_ms (7200000), " +
				"the longest a run lasts, or its first events expire while it runs; got 3600000"},
		{"nats: {stream_max_age_ms: 0}\ndefaults: {total_timeout_ms: 864000000}\n",
			"nats.stream_max_age_ms: must be at least defaults.total_timeout_ms (864000000), " +
				"the longest a run lasts, or its first events expire while it runs; " +
				"got 0 (604800000, 7 days)"},
	} {
		_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"explicit": {yaml: tt.yaml}}))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: LoadLayers() = %v, want %q", tt.yaml, err, tt.want)
		}
	}
	within := "nats: {stream_max_age_ms: 3600000}\ndefaults: {total_timeout_ms: 3600000}\n" +
		"run_limits: {total_timeout_ms: 3600000}\n"
	layers := writeLayers(t, map[string]layerFiles{"explicit": {yaml: within}})
	if _, err := LoadLayers(layers); err != nil {
		t.Errorf("runs that end as their events expire: %v", err)
	}
}

// TestStreamMaxAgeCoversTheDuplicateWindow: the event stream drops an event published again
// within 2 minutes, which JetStream allows only in a stream keeping events at least as long:
// a shorter nats.stream_max_age_ms is refused naming the key. Before, it loaded, and every
// orchestrator failed to start with NATS's "duplicates window can not be larger then max age".
func TestStreamMaxAgeCoversTheDuplicateWindow(t *testing.T) {
	short := "nats: {stream_max_age_ms: 60000}\ndefaults: {total_timeout_ms: 60000}\n"
	_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"explicit": {yaml: short}}))
	const want = "nats.stream_max_age_ms: must be at least 120000 (2 minutes, the window in " +
		"which the stream drops an event published again), got 60000"
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadLayers() = %v, want %q", err, want)
	}
	least := "nats: {stream_max_age_ms: 120000}\ndefaults: {total_timeout_ms: 60000}\n"
	layers := writeLayers(t, map[string]layerFiles{"explicit": {yaml: least}})
	if _, err := LoadLayers(layers); err != nil {
		t.Errorf("a stream keeping events for the window itself: %v", err)
	}
}

// TestDurationsThatOverflowAreRefused: a duration in milliseconds past what time.Duration holds
// (about 292 years) loaded, and wrapped around: a lease_ttl_ms or idempotency_ttl_ms written
// as "forever" stopped the orchestrator with an error naming no setting, a stream_max_age_ms
// kept events 7 days (the default) instead, a call_record_ttl_ms became a negative TTL.
func TestDurationsThatOverflowAreRefused(t *testing.T) {
	const over = "9223372036855" // one millisecond past time.Duration's limit
	for _, tt := range []struct{ yaml, key string }{
		{"durability: {lease_ttl_ms: " + over + "}", "durability.lease_ttl_ms"},
		{"durability: {idempotency_ttl_ms: " + over + "}", "durability.idempotency_ttl_ms"},
		{"durability: {claim_timeout_ms: " + over + "}", "durability.claim_timeout_ms"},
		{"durability: {call_record_ttl_ms: " + over + "}", "durability.call_record_ttl_ms"},
		{"nats: {stream_max_age_ms: " + over + "}", "nats.stream_max_age_ms"},
		{"memory: {keep_runs: {max_age_ms: " + over + "}}", "memory.keep_runs.max_age_ms"},
		{"providers: {oa: {type: openai, timeout_ms: " + over + "}}", "providers.oa.timeout_ms"},
	} {
		_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"explicit": {yaml: tt.yaml}}))
		want := tt.key + ": must be at most 9223372036854 (292 years), got " + over
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: LoadLayers() = %v, want %q", tt.yaml, err, want)
		}
	}
	// The limit itself is a duration.
	longest := layerFiles{yaml: "nats: {stream_max_age_ms: 9223372036854}"}
	cfg, err := LoadLayers(writeLayers(t, map[string]layerFiles{"explicit": longest}))
	if err != nil || cfg.NATS.StreamMaxAgeMS != 9223372036854 {
		t.Errorf("the longest duration: %v", err)
	}
}

// rest_tools.<name>.method takes every method the action stage sends, OPTIONS included: the
// action stage runs an OPTIONS tool, one of HTTP's safe methods, without approval.
func TestLoadAcceptsEveryRESTMethod(t *testing.T) {
	for _, method := range []string{"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"} {
		cfg, err := LoadLayers(writeLayers(t, map[string]layerFiles{"project": {yaml: "rest_tools:\n" +
			"  probe:\n    method: " + method + "\n    url: https://api.example.com/items\n"}}))
		if err != nil {
			t.Errorf("method %s: LoadLayers = %v, want nil", method, err)
			continue
		}
		if got := cfg.RestTools["probe"].Method; got != method {
			t.Errorf("method %s: loaded as %q", method, got)
		}
	}
	_, err := LoadLayers(writeLayers(t, map[string]layerFiles{"project": {yaml: "rest_tools:\n" +
		"  probe:\n    method: TRACE\n    url: https://api.example.com/items\n"}}))
	want := `rest_tools.probe.method: unknown HTTP method "TRACE" (want GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS)`
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadLayers = %v, want %q", err, want)
	}
}
