package config

import (
	"cmp"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

// Config is the whole agentmesh configuration.
type Config struct {
	// Services are the gRPC addresses of the mesh's services.
	Services Services `yaml:"services"`
	// NATS says where run events go.
	NATS NATS `yaml:"nats"`
	// GRPC sets what every gRPC server and client of the mesh accepts.
	GRPC GRPC `yaml:"grpc"`
	// Defaults are the ExecutionContract defaults of every run.
	Defaults Defaults `yaml:"defaults"`
	// RunLimits are the most any run may use, whatever its request's overrides ask.
	RunLimits RunLimits `yaml:"run_limits,omitempty"`
	// Providers are the LLM providers by name.
	Providers map[string]Provider `yaml:"providers,omitempty"`
	// Targets are the provider/model pairs LLM attempts cycle through, in order.
	Targets []Target `yaml:"targets,omitempty"`
	// Memory configures the memory service's store and search.
	Memory Memory `yaml:"memory"`
	// Queues limit concurrent tool executions, by queue name; "default" always exists.
	Queues map[string]Queue `yaml:"queues,omitempty"`
	// MCPServers are the MCP servers whose tools runs may use, by name: 1 to 61 letters,
	// digits, _ and -, since it begins the names of the server's tools ("<server>__<tool>").
	MCPServers map[string]MCPServer `yaml:"mcp_servers,omitempty"`
	// RestTools are tools implemented by one HTTP request each, by tool name: 1 to 64
	// letters, digits, _ and -, the function names model providers take.
	RestTools map[string]RestTool `yaml:"rest_tools,omitempty"`
	// Tools holds policies that apply to every tool.
	Tools Tools `yaml:"tools"`
	// Durability says how runs survive the death or restart of the replica running them.
	Durability Durability `yaml:"durability"`
	// Auth says how callers of the public API authenticate.
	Auth Auth `yaml:"auth,omitempty"`
	// TLS is this process's certificate, for the servers it runs.
	TLS TLS `yaml:"tls,omitempty"`
	// Approvals holds the keys of approval grants.
	Approvals Approvals `yaml:"approvals,omitempty"`
	// Models are the models the stages ask for themselves, apart from a run's targets.
	Models StageModels `yaml:"models,omitempty"`
	// Prompts open every run's conversation (the default profile's prompts).
	Prompts Prompts `yaml:"prompts,omitempty"`
	// Profiles are the agent profiles a run may name, by name.
	Profiles map[string]Profile `yaml:"profiles,omitempty"`
	// Observation configures the observation stage.
	Observation Observation `yaml:"observation"`
}

// Observation configures the observation stage (README, "Observation and recovery").
type Observation struct {
	// MaxInputBytes is the largest tool result the stage observes. A larger one cannot be
	// summarised adequately (OBSERVATION_TOO_LARGE): the run asks its user how to proceed.
	// 0 means 16 MiB, or grpc.max_message_bytes when that is smaller: every result must cross
	// it anyway, so a larger value is refused.
	MaxInputBytes int64 `yaml:"max_input_bytes"`
}

// StageModels are the models the stages ask, through the generation service, for what they
// decide (README, "Stages that think"): a small fast model for intent, a strong one for
// planning, and so on. A stage without one uses its deterministic rules, as it does when its
// model fails or answers outside its schema; with no keys configured every stage runs on rules.
type StageModels struct {
	// Intent parses the request: goal, constraints, task type, clarification, safety.
	Intent *Target `yaml:"intent,omitempty"`
	// Planning breaks the goal into a dependency graph of steps.
	Planning *Target `yaml:"planning,omitempty"`
	// Observation summarises a tool result larger than the run's budget
	// (tool_response_max_bytes; seed 001's summarizer_model). Without it, or when it fails,
	// the result is truncated with seed 000's notice.
	Observation *Target `yaml:"observation,omitempty"`
	// Memory picks the facts of a finished run worth remembering (README, "Memory that
	// learns"); unset, or a provider of type rules, the memory stage's deterministic rules do.
	Memory *Target `yaml:"memory,omitempty"`
	// Fallback is the simpler model recovery falls back to when the run's targets fail: one
	// more attempt, after the turn's max_retries attempts on the targets or a failure that
	// ends them (auth, quota, every target refusing), accounted like any other. It is each
	// run's contract's fallback_target.
	Fallback *Target `yaml:"fallback,omitempty"`
}

// StageModel is the model t names for a stage (models.*), or nil when t is nil or names a
// provider of type rules: the built-in rules model answers no stage's question (its text is
// no plan and no summary), so the stage's own deterministic rules stand in for it.
func (c *Config) StageModel(t *Target) *Target {
	if t == nil || c.Providers[t.Provider].Type == ProviderRules {
		return nil
	}
	return t
}

// Approvals holds the Ed25519 key pair of approval grants (README, "Security"): the
// orchestrator signs a grant for every call a person approved, and the action stage runs a tool
// that requires approval only with a grant that verifies. `agentmesh certs` makes a pair.
// Without them (outside `agentmesh dev`, which makes a pair per process) no tool that requires
// approval can run.
type Approvals struct {
	// SigningKey is the private key (PEM, PKCS #8) of the orchestrator; every replica needs
	// the same one.
	SigningKey string `yaml:"signing_key,omitempty"`
	// VerifyKey is the public key (PEM, PKIX) the action stage verifies grants with.
	VerifyKey string `yaml:"verify_key,omitempty"`
}

// Auth says how callers of the public API authenticate (README, "Security"). With neither API
// keys nor a client CA the API is open: right for `agentmesh dev` on loopback, refused on any
// other address unless the process is started insecure. With either, the memory stage enforces
// memory isolation too: it refuses calls that do not say which user they act for (README,
// "Memory isolation"), so every service of a mesh must read the same auth section.
type Auth struct {
	// APIKeys authenticate callers that send "authorization: Bearer <key>"; each is kept as a
	// hash (`agentmesh keys new` makes a key and its entry).
	APIKeys []APIKey `yaml:"api_keys,omitempty"`
	// APIKeysFile is a YAML file whose api_keys, in the form of APIKeys, authenticate callers
	// instead: the orchestrator reads it again when it changes (within 10 s, at a call), so a
	// key taken out of it is revoked without a restart, as a Kubernetes secret is updated.
	APIKeysFile string `yaml:"api_keys_file,omitempty"`
	// ClientCA is a PEM file of the CAs whose client certificates authenticate callers (mTLS;
	// needs tls.cert and tls.key). The certificate's common name is the user, its first
	// organization the tenant, and its organizational units (OUs) grant the roles that
	// ClientRoles and ClientOURoles say: by default, an OU that names a role grants it.
	ClientCA string `yaml:"client_ca,omitempty"`
	// ClientCRL is a file of certificate revocation lists of the CAs of ClientCA (PEM "X509
	// CRL" blocks, or one DER CRL), each signed by one of them: a client certificate they list
	// is refused at the handshake. It is followed as the certificate files are: a new CRL
	// applies within 10 s, without a restart.
	ClientCRL string `yaml:"client_crl,omitempty"`
	// ClientRoles says which roles a client certificate of ClientCA grants: ClientRolesOU, the
	// default, those its OUs name (OU=admin grants admin), or ClientRolesNone none at all.
	// Leave it unset with ClientOURoles.
	ClientRoles string `yaml:"client_roles,omitempty"`
	// ClientOURoles maps OUs of client certificates, exactly as written, to the role each
	// grants (OU "agentmesh-admins" to admin): only the OUs it maps grant roles, and an OU that
	// names a role grants nothing unless it is mapped, so that a CA that issues certificates for
	// other purposes too (OU=admin for another system) grants no role of the mesh by mistake.
	ClientOURoles map[string]string `yaml:"client_ou_roles,omitempty"`
	// AllowPlaintextKeys lets the public API take APIKeys without TLS (tls.cert and tls.key)
	// on an address other hosts can reach, for TLS that a proxy or sidecar in front of it
	// terminates; without it such a server refuses to start.
	AllowPlaintextKeys bool `yaml:"allow_plaintext_keys,omitempty"`
}

// The values of auth.client_roles.
const (
	// ClientRolesOU grants a client certificate the roles its OUs name (the default).
	ClientRolesOU = "ou"
	// ClientRolesNone grants client certificates no roles.
	ClientRolesNone = "none"
)

// HasKeys reports whether callers may authenticate with API keys (api_keys or api_keys_file).
func (a Auth) HasKeys() bool { return len(a.APIKeys) > 0 || a.APIKeysFile != "" }

// Enabled reports whether callers must authenticate.
func (a Auth) Enabled() bool {
	return a.HasKeys() || a.ClientCA != ""
}

// Keys are the API keys as pkg/auth takes them.
func (a Auth) Keys() []auth.Key {
	keys := make([]auth.Key, len(a.APIKeys))
	for i, k := range a.APIKeys {
		keys[i] = auth.Key{Hash: k.Hash, Principal: auth.Principal{Tenant: k.Tenant, User: k.User, Roles: k.Roles}}
	}
	return keys
}

// APIKey is an API key of the public API and the principal it authenticates.
type APIKey struct {
	// Hash is "sha256:" and the hex SHA-256 digest of the key; the key itself is never stored.
	Hash string `yaml:"hash"`
	// Tenant groups users; runs and memories are kept under "tenant/user".
	Tenant string `yaml:"tenant,omitempty"`
	// User is the user the key authenticates.
	User string `yaml:"user"`
	// Roles are admin (every run, any user_id), tenant_admin (every run of the tenant) and
	// approver (reads and approves the tenant's runs).
	Roles []string `yaml:"roles,omitempty"`
}

// TLS is a process's certificate and key (PEM files) for the servers it runs, and the mesh CA
// (README, "mTLS between services"). The TLS_CA, TLS_CERT, TLS_KEY and TLS_CRL environment
// variables override them in the service binaries, since every process has its own certificate.
//
// With ca, cert and key the services talk mutual TLS: every stage serves TLS with its certificate
// and takes calls only from a client certificate of the mesh CA that names a mesh identity (the
// one URI name spiffe://agentmesh/<service>; health is open to every certificate of the CA), and
// every service presents its certificate to the stages it calls and accepts only a mesh identity
// of the CA as the server. The orchestrator serves the public API with the same certificate and
// authenticates its callers as auth says. `agentmesh certs` makes a development CA and
// certificates.
type TLS struct {
	// CA is the PEM file of the mesh CA.
	CA string `yaml:"ca,omitempty"`
	// Cert is the certificate chain.
	Cert string `yaml:"cert,omitempty"`
	// Key is the private key.
	Key string `yaml:"key,omitempty"`
	// CRL is a file of certificate revocation lists of the mesh CA (PEM "X509 CRL" blocks, or
	// one DER CRL), each signed by a CA of CA: a service's certificate they list is refused at
	// the handshake, as a client by the stages and as a server by the services calling it. It
	// is followed as the certificate files are: a new CRL applies within 10 s, without a restart.
	CRL string `yaml:"crl,omitempty"`
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

// GRPC sets what every gRPC server and client of the mesh accepts.
type GRPC struct {
	// MaxMessageBytes is the largest message a server or client of the mesh sends or
	// receives; a larger one is refused with RESOURCE_EXHAUSTED. Default 32 MiB, well over
	// gRPC's own 4 MiB, so that a tool result of several megabytes reaches the observation
	// stage, which truncates it, instead of failing the call. At least 1 MiB. The service
	// binaries take GRPC_MAX_MESSAGE_BYTES over it.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// StreamBufferBytes bounds the run events (their encoded size) an orchestrator holds for
	// a StreamRun whose client reads them more slowly than its run emits them: past it, the
	// stream ends RESOURCE_EXHAUSTED naming the seq of the last event sent, for the client to
	// follow the run on with WatchRun from there (the run goes on). Default 8 MiB; at least 1.
	StreamBufferBytes int `yaml:"stream_buffer_bytes"`
}

// NATS says where run events go.
type NATS struct {
	// URL of the NATS cluster; empty runs an embedded server (development).
	URL string `yaml:"url,omitempty"`
	// StoreDir is where an embedded server keeps JetStream data.
	StoreDir string `yaml:"store_dir,omitempty"`
	// Replicas is the replication factor of the event stream and of the key-value buckets
	// (checkpoints, run owners, heartbeats, idempotency keys, tool call records): 1 for a single server, 3 for
	// a three-node cluster. Default 1.
	Replicas int `yaml:"replicas"`
	// Storage is where JetStream keeps the stream and the buckets: file (the default, survives
	// a NATS restart) or memory.
	Storage string `yaml:"storage"`
	// StreamMaxAgeMS is how long the event stream keeps a run's events. Default (and 0) 7 days;
	// at least 2 minutes (the stream's window for dropping an event published again) and the
	// longest a run may last (defaults and run_limits total_timeout_ms).
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
	// LeaseTTLMS is how long an orchestrator replica's heartbeat lives without a beat (it beats
	// every third of it): about the longest a dead replica's runs wait before another replica
	// takes them over. Default 10 s.
	LeaseTTLMS int64 `yaml:"lease_ttl_ms"`
	// IdempotencyTTLMS is how long an idempotency key keeps naming its run. Default 24 h.
	IdempotencyTTLMS int64 `yaml:"idempotency_ttl_ms"`
	// ClaimTimeoutMS is how long an idempotency key may name a run that stored nothing (its
	// replica failed between claiming the key and storing the run) before a request with the
	// key frees it and starts its own run. It must exceed what a live replica takes between
	// the two writes and how far the replicas' clocks and NATS's drift apart. Default 60 s.
	ClaimTimeoutMS int64 `yaml:"claim_timeout_ms"`
	// CallRecordTTLMS is how long the action stage remembers that a (run_id, call_id) ran,
	// and its result. Default 7 days.
	CallRecordTTLMS int64 `yaml:"call_record_ttl_ms"`
}

// Defaults are the ExecutionContract defaults (DESIGN §5); a run's overrides start from them.
type Defaults struct {
	// MaxTurns is the maximum number of LLM turns. The last one offers only final_report, so
	// tool_policy required needs at least 2.
	MaxTurns int32 `yaml:"max_turns"`
	// MaxToolCallsPerTurn is the maximum number of tool calls executed in one turn.
	MaxToolCallsPerTurn int32 `yaml:"max_tool_calls_per_turn"`
	// MaxToolCallsTotal is the maximum number of tool calls in a run; 0 is unlimited. Once a
	// call is dropped over it, one final turn lets the model answer, then the run ends
	// MAX_TOOL_CALLS_REACHED.
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
	// ToolResponseMaxBytes is the size above which tool responses are summarised (with
	// models.observation) or truncated; 0 means no limit.
	ToolResponseMaxBytes int64 `yaml:"tool_response_max_bytes"`
	// ContextWindow is the model's context window in tokens, unless the model sets its own.
	ContextWindow int64 `yaml:"context_window"`
	// ContextWindowBufferTokens is the safety margin subtracted from the window.
	ContextWindowBufferTokens int64 `yaml:"context_window_buffer_tokens"`
	// MaxOutputTokens is the number of tokens reserved for the model's reply.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// Temperature is the sampling temperature of every LLM request, when set: seed 000's
	// session-level default, which a provider's temperature overrides, and a model's that.
	Temperature *float64 `yaml:"temperature,omitempty"`
	// TopP is the nucleus sampling mass of every LLM request, when set; a provider's or a
	// model's top_p overrides it.
	TopP *float64 `yaml:"top_p,omitempty"`
	// ReasoningEffort is passed to every model that supports it (e.g. low, medium, high), when
	// set; a provider's or a model's reasoning_effort overrides it.
	ReasoningEffort string `yaml:"reasoning_effort,omitempty"`
	// ForceSynthesisAtRatio forces the final turn at this fraction of the window, between
	// 0 and 1; 0 is off.
	ForceSynthesisAtRatio float64 `yaml:"force_synthesis_at_ratio"`
	// StrictMode accepts only native or rejected adapter results.
	StrictMode bool `yaml:"strict_mode"`
	// MaxFormatRetries is the number of retries allowed for malformed model output.
	MaxFormatRetries int32 `yaml:"max_format_retries"`
	// ApprovalTimeoutMS is how long a tool call waits for approval before it is rejected.
	ApprovalTimeoutMS int64 `yaml:"approval_timeout_ms"`
	// AnswerTimeoutMS is how long a run that asks its user a question (recovery's ask_user)
	// waits for the answer before it ends ANSWER_TIMEOUT.
	AnswerTimeoutMS int64 `yaml:"answer_timeout_ms"`
	// ToolTransport is native, xml-final or xml; empty means native.
	ToolTransport string `yaml:"tool_transport"`
	// CacheResponses asks the generation stage for its response cache (seed 002 §8): an
	// identical request is answered from the cache, without streaming.
	CacheResponses bool `yaml:"cache_responses"`
	// CycleForbid lists forbidden consecutive tool pairs [from, to], by the tools' names in
	// the mesh (an MCP tool's <server>__<tool>); a pair naming a tool the action stage does not
	// have ends every run FAILED_PREFLIGHT / INVALID_CONTRACT.
	CycleForbid [][2]string `yaml:"cycle_forbid"`
	// MaxPlanSteps is the step limit of a run's plan (seed 003: "Max 20 steps
	// (configurable)"); a longer plan ends the run PLAN_TOO_COMPLEX. Default 20, at most
	// plan.MaxStepsLimit (1000), the planning stage's limit of max_steps.
	MaxPlanSteps int32 `yaml:"max_plan_steps"`
	// MaxReplans bounds the revisions of a run's plan: after a step fails beyond recovery, or
	// the model calls a tool no step uses, the planning stage revises the plan before the
	// next turn, at most this many times a run; 0 never revises. Default 2.
	MaxReplans int32 `yaml:"max_replans"`
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
	// CacheWrite is the price of a prompt token written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens; OpenAI reports and bills no writes); unset,
	// such tokens cost 1.25 times Input, Anthropic's price of a write to its 5-minute cache.
	CacheWrite *float64 `yaml:"cache_write,omitempty"`
}

// Target is one provider/model pair.
type Target struct {
	// Provider names a key of Config.Providers.
	Provider string `yaml:"provider"`
	// Model is the model name passed to the provider.
	Model string `yaml:"model"`
}

// Window returns the context limits of the runs that target t serves: its model's
// context_window, context_window_buffer_tokens and max_output_tokens (providers.*.models.*),
// each the defaults' where the model sets none.
func (c *Config) Window(t Target) (window, buffer, maxOutput int64) {
	m, d := c.Providers[t.Provider].Models[t.Model], c.Defaults
	return cmp.Or(m.ContextWindow, d.ContextWindow), cmp.Or(m.ContextWindowBufferTokens, d.ContextWindowBufferTokens),
		cmp.Or(m.MaxOutputTokens, d.MaxOutputTokens)
}

// Memory configures the memory service's store and search.
type Memory struct {
	// Store is memory, sqlite or postgres.
	Store string `yaml:"store"`
	// Path is the sqlite database file.
	Path string `yaml:"path,omitempty"`
	// DSN is the postgres connection string.
	DSN string `yaml:"dsn,omitempty"`
	// PostgresMaxConns is the most connections each memory replica opens to its postgres
	// database at once (16); calls beyond them wait for one to be free. Keep the replicas'
	// sum under the server's max_connections, less what its other clients need.
	PostgresMaxConns int `yaml:"postgres_max_conns"`
	// QuotaPerUser is the maximum number of memories per user; 0 is unlimited.
	QuotaPerUser int `yaml:"quota_per_user"`
	// KeepRuns bounds the finished run results (with their transcripts) the memory store
	// keeps, oldest first, when the store is memory: at most MaxRuns of them (0 is unlimited),
	// none older than MaxAgeMS (0 is forever). The sqlite and postgres stores keep every run.
	KeepRuns KeepRuns `yaml:"keep_runs"`
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
	// SearchCache is each memory replica's cache of searches (seed 002 §8's retrieval cache).
	SearchCache SearchCache `yaml:"search_cache"`
	// ReindexIntervalMS is how often each memory replica of a sqlite or postgres store
	// indexes again, in batches, the memories an earlier release indexed otherwise (those a
	// replica not yet upgraded writes during a rolling upgrade), after doing so when it
	// starts, in milliseconds (5 minutes).
	ReindexIntervalMS int64 `yaml:"reindex_interval_ms"`
	// Callers are the mesh identities (the <service> of spiffe://agentmesh/<service>) the
	// memory stage serves when the services talk mutual TLS (tls.ca); empty means the services
	// that call it: orchestrator, context and action. Without mutual TLS callers are not
	// identified, and every caller is served.
	Callers []string `yaml:"callers,omitempty"`
}

// SearchCache sizes the memory stage's cache of searches: a search asked again (the same user,
// collection, query, limit and min_score) answers from it, without embedding its query or
// reading the store, until a write to the user's memories through the same replica, or for
// TTLMS. A search without hits, or whose query could not be embedded, is not kept.
type SearchCache struct {
	// Entries is how many searches a replica keeps, the least recently used evicted first; 0
	// turns the cache off.
	Entries int `yaml:"entries"`
	// TTLMS is how long a cached search answers, in milliseconds: the longest a memory written
	// through another replica of a shared store (postgres) goes unseen by this one's searches.
	TTLMS int64 `yaml:"ttl_ms"`
}

// KeepRuns bounds the finished runs an in-process store keeps.
type KeepRuns struct {
	// MaxRuns is the most finished runs kept; 0 is unlimited.
	MaxRuns int `yaml:"max_runs"`
	// MaxAgeMS is how long a finished run is kept, in milliseconds; 0 is forever.
	MaxAgeMS int64 `yaml:"max_age_ms"`
}

// Queue limits how many tools bound to it run at once.
type Queue struct {
	// Concurrent is the maximum number of concurrent executions of one action stage
	// replica, at least 1: each replica keeps its own queues, so N replicas run up to N times
	// as many (scale on agentmesh_action_queue_depth, README "Deploying").
	Concurrent int `yaml:"concurrent"`
}

// MCPServer is an MCP server: a child process over stdio (Command) or a remote server (URL).
// Args, Env, Dir and Limits are a stdio server's, Headers a remote server's; setting one for
// the other kind is an error, since it would be ignored.
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
	// RequiresApproval lists the server's tools that need approval before running, by the
	// server's names for them, their full names or their names in the mesh (where characters
	// model providers refuse are renamed '_'); tools.no_approval may not name them.
	RequiresApproval []string `yaml:"requires_approval,omitempty"`
	// Limits override the resource limits of a stdio server's process.
	Limits MCPLimits `yaml:"limits,omitempty"`
}

// MCPLimits are the resource limits of a stdio MCP server's process. Each value left at 0
// keeps its default (an hour of CPU, 8 GiB of address space, 256 more processes, 1024 open
// files, no file size limit); -1 lifts the limit, so the child inherits this process's.
type MCPLimits struct {
	// CPUSeconds caps the CPU time (RLIMIT_CPU); the server is killed and restarted when it
	// runs out.
	CPUSeconds int64 `yaml:"cpu_seconds,omitempty"`
	// AddressSpaceBytes caps the virtual memory (RLIMIT_AS).
	AddressSpaceBytes int64 `yaml:"address_space_bytes,omitempty"`
	// Processes caps how many more processes and threads the server and its children may
	// start beyond those its user runs when it starts (RLIMIT_NPROC).
	Processes int64 `yaml:"processes,omitempty"`
	// OpenFiles caps the open file descriptors (RLIMIT_NOFILE).
	OpenFiles int64 `yaml:"open_files,omitempty"`
	// FileSizeBytes caps the size of a file the server writes (RLIMIT_FSIZE).
	FileSizeBytes int64 `yaml:"file_size_bytes,omitempty"`
}

// RestTool is a tool implemented by one HTTP request. URL, Headers and Body may contain
// ${parameters.name} placeholders, filled with the call's arguments at run time.
type RestTool struct {
	// Description tells the model what the tool does.
	Description string `yaml:"description,omitempty"`
	// Method is the HTTP method: GET (the default, when empty), POST, PUT, PATCH, DELETE,
	// HEAD or OPTIONS.
	Method string `yaml:"method,omitempty"`
	// URL is the request URL (http or https).
	URL string `yaml:"url"`
	// Headers are the request headers; X-Agentmesh-User and X-Agentmesh-Approver are not among
	// them: the action stage sets them to the user the call acts for and who approved it.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Body is the request body template.
	Body string `yaml:"body,omitempty"`
	// InputSchema is the JSON schema of the tool's arguments; each ${parameters.name} of the
	// templates must be one of its properties. Unset: every placeholder is a required string.
	InputSchema map[string]any `yaml:"input_schema,omitempty"`
	// OutputSchema is the JSON schema of the tool's response body, when the tool promises
	// one: a response that is not JSON matching it is a malformed tool result, which ends the
	// run FAILED_VALIDATION / TOOL_RESULT_INVALID.
	OutputSchema map[string]any `yaml:"output_schema,omitempty"`
	// Queue names the queue the tool runs on; empty means "default".
	Queue string `yaml:"queue,omitempty"`
	// RequiresApproval makes every call wait for approval; tools.no_approval may not name the
	// tool then. A method other than GET, HEAD and OPTIONS (HTTP's safe methods) makes it so by
	// default (it may write, delete or spend); tools.no_approval exempts such a tool.
	RequiresApproval bool `yaml:"requires_approval,omitempty"`
}

// Tools holds approval policies by tool name.
type Tools struct {
	// RequireApproval lists tools that always need approval, by their full names
	// ("<server>__<tool>" for an MCP tool); the action stage refuses to start when one names
	// no tool it has, so that a misspelt name cannot leave a tool unguarded.
	RequireApproval []string `yaml:"require_approval,omitempty"`
	// NoApproval lists tools that never need approval, even when they would by default, by
	// their full names; the action stage refuses to start when one names no tool it has.
	NoApproval []string `yaml:"no_approval,omitempty"`
	// RejectEndsRun makes a person's rejection of a call end the run (REJECTED /
	// USER_REJECTED, no further LLM call) instead of being told to the model as a tool
	// failure; a decision's end_run overrides it for that call. It is each run's contract's
	// reject_ends_run.
	RejectEndsRun bool `yaml:"reject_ends_run,omitempty"`
	// Alternatives maps a tool to tools that can do its job: when it fails, the recovery
	// stage may run an alternative with the same arguments (seed 003: tool error → try
	// alternative tool), e.g. {search_web: [search_news]}. Only alternatives that run without
	// approval are tried: the action stage refuses to start when an alternative requires
	// approval, or when a name, of a tool or of an alternative, is no tool it has.
	Alternatives map[string][]string `yaml:"alternatives,omitempty"`
	// ApprovePlans makes a run whose plan requires human approval (a step uses a tool that
	// requires approval, or the planning model says so) wait for a person to approve the plan
	// before it goes on: ResolveApproval with call_id "plan". Each such tool call still needs
	// its own approval.
	ApprovePlans bool `yaml:"approve_plans,omitempty"`
	// Idempotent lists tools that may run again when a crash interrupted their execution, or
	// after a gateway's 502 or 504 to a REST request whose method is not safe (the built-ins
	// that only read are idempotent already). Any other tool interrupted
	// mid-execution is reported to the model as "(tool failed: interrupted by a restart; it
	// may or may not have run)" instead of being run a second time. The action stage refuses
	// to start when a name is no tool it has.
	Idempotent []string `yaml:"idempotent,omitempty"`
}
