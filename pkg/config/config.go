package config

// Config is the whole agentmesh configuration.
type Config struct {
	// Services are the gRPC addresses of the mesh's services.
	Services Services `yaml:"services"`
	// NATS says where run events go.
	NATS NATS `yaml:"nats"`
	// Defaults are the ExecutionContract defaults of every run.
	Defaults Defaults `yaml:"defaults"`
	// Providers are the LLM providers by name.
	Providers map[string]Provider `yaml:"providers,omitempty"`
	// Targets are the provider/model pairs LLM attempts cycle through, in order.
	Targets []Target `yaml:"targets,omitempty"`
	// Memory configures the memory service's store and search.
	Memory Memory `yaml:"memory"`
	// Queues limit concurrent tool executions, by queue name; "default" always exists.
	Queues map[string]Queue `yaml:"queues,omitempty"`
	// MCPServers are the MCP servers whose tools runs may use, by name.
	MCPServers map[string]MCPServer `yaml:"mcp_servers,omitempty"`
	// RestTools are tools implemented by one HTTP request each, by tool name.
	RestTools map[string]RestTool `yaml:"rest_tools,omitempty"`
	// Tools holds policies that apply to every tool.
	Tools Tools `yaml:"tools"`
	// Durability says how runs survive the death or restart of the replica running them.
	Durability Durability `yaml:"durability"`
}

// Services are gRPC addresses (host:port) of the mesh's services.
type Services struct {
	// Orchestrator serves the public AgentService.
	Orchestrator string `yaml:"orchestrator"`
	// Intent is the intent stage.
	Intent string `yaml:"intent"`
	// Planning is the planning stage.
	Planning string `yaml:"planning"`
	// Context is the context assembly stage.
	Context string `yaml:"context"`
	// Generation is the generation stage, the only one that talks to LLM providers.
	Generation string `yaml:"generation"`
	// Action is the action stage, which runs tools.
	Action string `yaml:"action"`
	// Observation is the observation stage.
	Observation string `yaml:"observation"`
	// Memory is the memory stage.
	Memory string `yaml:"memory"`
	// Recovery is the recovery stage.
	Recovery string `yaml:"recovery"`
}

// NATS says where run events go.
type NATS struct {
	// URL of the NATS cluster; empty runs an embedded server (development).
	URL string `yaml:"url,omitempty"`
	// StoreDir is where an embedded server keeps JetStream data.
	StoreDir string `yaml:"store_dir,omitempty"`
	// Replicas is the replication factor of the event stream and of the key-value buckets
	// (checkpoints, leases, idempotency keys, tool call records): 1 for a single server, 3 for
	// a three-node cluster. Default 1.
	Replicas int `yaml:"replicas"`
	// Storage is where JetStream keeps the stream and the buckets: file (the default, survives
	// a NATS restart) or memory.
	Storage string `yaml:"storage"`
	// StreamMaxAgeMS is how long the event stream keeps a run's events. Default 7 days.
	StreamMaxAgeMS int64 `yaml:"stream_max_age_ms"`
	// StreamMaxBytes bounds the event stream's size; the oldest events go first. 0 is
	// unlimited.
	StreamMaxBytes int64 `yaml:"stream_max_bytes"`
}

// Durability says how runs survive the death or restart of the orchestrator replica running
// them (README, "Durability").
type Durability struct {
	// Checkpoints stores every run's state in JetStream key-value at each resumable point, so
	// any orchestrator replica can resume it. On by default; off, a run lives only in the
	// replica that started it.
	Checkpoints bool `yaml:"checkpoints"`
	// LeaseTTLMS is how long a replica owns a run without renewing its lease: the longest a
	// run waits before another replica takes over from a dead owner. Default 10 s.
	LeaseTTLMS int64 `yaml:"lease_ttl_ms"`
	// IdempotencyTTLMS is how long an idempotency key keeps naming its run. Default 24 h.
	IdempotencyTTLMS int64 `yaml:"idempotency_ttl_ms"`
	// CallRecordTTLMS is how long the action stage remembers that a (run_id, call_id) ran,
	// and its result. Default 7 days.
	CallRecordTTLMS int64 `yaml:"call_record_ttl_ms"`
}

// Defaults are the ExecutionContract defaults (DESIGN §5); a run's overrides start from them.
type Defaults struct {
	// MaxTurns is the maximum number of LLM turns.
	MaxTurns int32 `yaml:"max_turns"`
	// MaxToolCallsPerTurn is the maximum number of tool calls executed in one turn.
	MaxToolCallsPerTurn int32 `yaml:"max_tool_calls_per_turn"`
	// MaxToolCallsTotal is the maximum number of tool calls in a run; 0 is unlimited.
	MaxToolCallsTotal int32 `yaml:"max_tool_calls_total"`
	// MaxRetries is the number of LLM attempts per turn, cycling over the targets.
	MaxRetries int32 `yaml:"max_retries"`
	// MaxTokensConsumed is the token budget of a run; 0 is unlimited.
	MaxTokensConsumed int64 `yaml:"max_tokens_consumed"`
	// ToolTimeoutMS is the timeout of one tool execution.
	ToolTimeoutMS int64 `yaml:"tool_timeout_ms"`
	// StepTimeoutMS is the timeout of one turn.
	StepTimeoutMS int64 `yaml:"step_timeout_ms"`
	// TotalTimeoutMS is the timeout of a whole run.
	TotalTimeoutMS int64 `yaml:"total_timeout_ms"`
	// ToolResponseMaxBytes is the size above which tool responses are truncated.
	ToolResponseMaxBytes int64 `yaml:"tool_response_max_bytes"`
	// ContextWindow is the model's context window in tokens, unless the model sets its own.
	ContextWindow int64 `yaml:"context_window"`
	// ContextWindowBufferTokens is the safety margin subtracted from the window.
	ContextWindowBufferTokens int64 `yaml:"context_window_buffer_tokens"`
	// MaxOutputTokens is the number of tokens reserved for the model's reply.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// ForceSynthesisAtRatio forces the final turn at this fraction of the window; 0 is off.
	ForceSynthesisAtRatio float64 `yaml:"force_synthesis_at_ratio"`
	// StrictMode accepts only native or rejected adapter results.
	StrictMode bool `yaml:"strict_mode"`
	// MaxFormatRetries is the number of retries allowed for malformed model output.
	MaxFormatRetries int32 `yaml:"max_format_retries"`
	// ApprovalTimeoutMS is how long a tool call waits for approval before it is rejected.
	ApprovalTimeoutMS int64 `yaml:"approval_timeout_ms"`
	// ToolTransport is native, xml-final or xml; empty means native.
	ToolTransport string `yaml:"tool_transport"`
	// CacheResponses asks the generation stage for its response cache (seed 002 §8): an
	// identical request is answered from the cache, without streaming.
	CacheResponses bool `yaml:"cache_responses"`
	// CycleForbid lists forbidden consecutive tool pairs [from, to].
	CycleForbid [][2]string `yaml:"cycle_forbid"`
}

// Provider is an LLM provider.
type Provider struct {
	// Type is openai, anthropic or rules (the built-in deterministic test provider).
	Type string `yaml:"type"`
	// BaseURL is the API's base URL; empty becomes DefaultOpenAIBaseURL or
	// DefaultAnthropicBaseURL when loading.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKey authenticates requests; usually "${SOME_API_KEY}".
	APIKey string `yaml:"api_key,omitempty"`
	// Headers are added to every request.
	Headers map[string]string `yaml:"headers,omitempty"`
	// TimeoutMS bounds one request; 0 uses the generation service's default.
	TimeoutMS int `yaml:"timeout_ms,omitempty"`
	// Temperature is the sampling temperature for every model of the provider, when set.
	Temperature *float64 `yaml:"temperature,omitempty"`
	// TopP is the nucleus sampling mass for every model of the provider, when set.
	TopP *float64 `yaml:"top_p,omitempty"`
	// ReasoningEffort is passed to models that support it (e.g. low, medium, high).
	ReasoningEffort string `yaml:"reasoning_effort,omitempty"`
	// TokenLimitField is the request field of an openai provider that carries the output
	// token limit: max_tokens or max_completion_tokens for every model. Empty chooses by model:
	// max_completion_tokens for the OpenAI reasoning models (o1, o3, o4-mini, the gpt-5
	// family), which refuse max_tokens, and max_tokens for the others, the only field many
	// OpenAI-compatible servers know.
	TokenLimitField string `yaml:"token_limit_field,omitempty"`
	// Models hold per-model settings that override the provider's and the defaults.
	Models map[string]Model `yaml:"models,omitempty"`
}

// Model holds the settings of one model of a provider; zero values inherit.
type Model struct {
	// ContextWindow is the model's context window in tokens.
	ContextWindow int64 `yaml:"context_window,omitempty"`
	// ContextWindowBufferTokens is the safety margin subtracted from the window.
	ContextWindowBufferTokens int64 `yaml:"context_window_buffer_tokens,omitempty"`
	// MaxOutputTokens is the number of tokens reserved for the reply.
	MaxOutputTokens int64 `yaml:"max_output_tokens,omitempty"`
	// Temperature overrides the provider's temperature.
	Temperature *float64 `yaml:"temperature,omitempty"`
	// TopP overrides the provider's top_p.
	TopP *float64 `yaml:"top_p,omitempty"`
	// ReasoningEffort overrides the provider's reasoning effort.
	ReasoningEffort string `yaml:"reasoning_effort,omitempty"`
	// Pricing is what the model costs; with it, every LLM accounting entry of the model
	// carries cost_usd. The price is looked up by the model the provider reports it answered
	// with (e.g. a dated snapshot), then by the model requested.
	Pricing *Pricing `yaml:"pricing,omitempty"`
}

// Pricing is a model's price in US dollars per million tokens.
type Pricing struct {
	// Input is the price of a prompt token not read from the provider's prompt cache.
	Input float64 `yaml:"input"`
	// Output is the price of a completion token (reasoning tokens included).
	Output float64 `yaml:"output"`
	// CachedInput is the price of a prompt token read from the provider's prompt cache;
	// unset, such tokens cost Input.
	CachedInput *float64 `yaml:"cached_input,omitempty"`
}

// Target is one provider/model pair.
type Target struct {
	// Provider names a key of Config.Providers.
	Provider string `yaml:"provider"`
	// Model is the model name passed to the provider.
	Model string `yaml:"model"`
}

// Memory configures the memory service's store and search.
type Memory struct {
	// Store is memory, sqlite or postgres.
	Store string `yaml:"store"`
	// Path is the sqlite database file.
	Path string `yaml:"path,omitempty"`
	// DSN is the postgres connection string.
	DSN string `yaml:"dsn,omitempty"`
	// QuotaPerUser is the maximum number of memories per user; 0 is unlimited.
	QuotaPerUser int `yaml:"quota_per_user"`
	// Embeddings turns on semantic search: the memory service embeds every memory and every
	// query with this provider/model (through the generation service) and stores the vectors
	// with the memories. Unset, the default, search ranks with BM25 full-text only. The
	// provider must be configured under providers and able to embed: an openai provider (e.g.
	// model text-embedding-3-small) or the built-in rules provider, whose hashed bag-of-words
	// vectors need no network:
	//
	//	memory:
	//	  embeddings: {provider: rules, model: rules-v1}
	//
	// Memories stored before embeddings were turned on have no vector and are found by their
	// words only.
	Embeddings *Target `yaml:"embeddings,omitempty"`
}

// Queue limits how many tools bound to it run at once.
type Queue struct {
	// Concurrent is the maximum number of concurrent executions; at least 1.
	Concurrent int `yaml:"concurrent"`
}

// MCPServer is an MCP server: a child process over stdio (Command) or a remote server (URL).
type MCPServer struct {
	// Command starts a stdio server.
	Command string `yaml:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `yaml:"args,omitempty"`
	// Env is the child process's whole environment, passed as written (no ${VAR} expansion).
	Env map[string]string `yaml:"env,omitempty"`
	// Dir is the child process's working directory.
	Dir string `yaml:"dir,omitempty"`
	// URL is a remote (streamable HTTP) server's endpoint.
	URL string `yaml:"url,omitempty"`
	// Headers are sent to a remote server, as written (no ${VAR} expansion).
	Headers map[string]string `yaml:"headers,omitempty"`
	// Queue names the queue the server's tools run on; empty means "default".
	Queue string `yaml:"queue,omitempty"`
	// RequiresApproval lists the server's tools that need approval before running.
	RequiresApproval []string `yaml:"requires_approval,omitempty"`
}

// RestTool is a tool implemented by one HTTP request. URL, Headers and Body may contain
// ${parameters.name} placeholders, filled with the call's arguments at run time.
type RestTool struct {
	// Description tells the model what the tool does.
	Description string `yaml:"description,omitempty"`
	// Method is the HTTP method; empty means GET.
	Method string `yaml:"method,omitempty"`
	// URL is the request URL (http or https).
	URL string `yaml:"url"`
	// Headers are the request headers.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Body is the request body template.
	Body string `yaml:"body,omitempty"`
	// InputSchema is the JSON schema of the tool's arguments.
	InputSchema map[string]any `yaml:"input_schema,omitempty"`
	// Queue names the queue the tool runs on; empty means "default".
	Queue string `yaml:"queue,omitempty"`
	// RequiresApproval makes every call wait for approval.
	RequiresApproval bool `yaml:"requires_approval,omitempty"`
}

// Tools holds approval policies by tool name.
type Tools struct {
	// RequireApproval lists tools that always need approval.
	RequireApproval []string `yaml:"require_approval,omitempty"`
	// NoApproval lists tools that never need approval, even when they would by default.
	NoApproval []string `yaml:"no_approval,omitempty"`
	// Alternatives maps a tool to tools that can do its job: when it fails, the recovery
	// stage may run an alternative with the same arguments (seed 003: tool error → try
	// alternative tool), e.g. {search_web: [search_news]}.
	Alternatives map[string][]string `yaml:"alternatives,omitempty"`
	// Idempotent lists tools that may run again when a crash interrupted their execution
	// (the built-ins that only read are idempotent already). Any other tool interrupted
	// mid-execution is reported to the model as "(tool failed: interrupted by a restart; it
	// may or may not have run)" instead of being run a second time.
	Idempotent []string `yaml:"idempotent,omitempty"`
}
