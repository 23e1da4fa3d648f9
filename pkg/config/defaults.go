package config

// Base URLs of providers that do not set one.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com/v1"
)

// DefaultQueue is the queue tools run on when they name none; it always exists.
const DefaultQueue = "default"

// Default returns the configuration used when no file sets anything: the mesh on
// 127.0.0.1:7000…7008 accepting gRPC messages of up to 32 MiB, the ExecutionContract defaults of DESIGN §5, the built-in rules
// provider as the only target, an in-memory store searched with BM25 (no embeddings: see
// Memory.Embeddings) and one default queue of 8.
func Default() *Config {
	return &Config{
		Services: Services{
			Orchestrator: "127.0.0.1:7000",
			Intent:       "127.0.0.1:7001",
			Planning:     "127.0.0.1:7002",
			Context:      "127.0.0.1:7003",
			Generation:   "127.0.0.1:7004",
			Action:       "127.0.0.1:7005",
			Observation:  "127.0.0.1:7006",
			Memory:       "127.0.0.1:7007",
			Recovery:     "127.0.0.1:7008",
		},
		Defaults: Defaults{
			MaxTurns:                  10,
			MaxToolCallsPerTurn:       10,
			MaxRetries:                3,
			ToolTimeoutMS:             30_000,
			StepTimeoutMS:             120_000,
			TotalTimeoutMS:            600_000,
			ToolResponseMaxBytes:      12_288,
			ContextWindow:             131_072,
			ContextWindowBufferTokens: 2_048,
			MaxOutputTokens:           4_096,
			MaxFormatRetries:          1,
			ApprovalTimeoutMS:         300_000,
			AnswerTimeoutMS:           300_000,
			ToolTransport:             "native",
			CycleForbid:               [][2]string{},
			MaxPlanSteps:              20,
			MaxReplans:                2,
		},
		Providers: map[string]Provider{"rules": {Type: "rules"}},
		Targets:   []Target{{Provider: "rules", Model: "rules-v1"}},
		Memory: Memory{Store: "memory", QuotaPerUser: 10_000, PostgresMaxConns: 16, KeepRuns: KeepRuns{MaxRuns: 1_000, MaxAgeMS: 86_400_000},
			SearchCache: SearchCache{Entries: 1024, TTLMS: 60_000}, ReindexIntervalMS: 300_000},
		Queues: map[string]Queue{DefaultQueue: {Concurrent: 8}},
		GRPC:   GRPC{MaxMessageBytes: 32 << 20, StreamBufferBytes: 8 << 20},
		NATS:   NATS{Replicas: 1, Storage: StorageFile, StreamMaxAgeMS: DefaultStreamMaxAgeMS},
		Durability: Durability{
			Checkpoints:      true,
			LeaseTTLMS:       10_000,
			IdempotencyTTLMS: 24 * 3600 * 1000,
			ClaimTimeoutMS:   60_000,
			CallRecordTTLMS:  7 * 24 * 3600 * 1000,
		},
	}
}

// fillDefaults sets the values that depend on other values: the providers' base URLs, the
// default queue and the defaults' budgets a ceiling bounds (fillRunLimits).
func (c *Config) fillDefaults() {
	for name, p := range c.Providers {
		switch {
		case p.BaseURL != "":
		case p.Type == ProviderOpenAI:
			p.BaseURL = DefaultOpenAIBaseURL
		case p.Type == ProviderAnthropic:
			p.BaseURL = DefaultAnthropicBaseURL
		}
		c.Providers[name] = p
	}
	if _, ok := c.Queues[DefaultQueue]; !ok {
		if c.Queues == nil {
			c.Queues = map[string]Queue{}
		}
		c.Queues[DefaultQueue] = Default().Queues[DefaultQueue]
	}
	c.fillRunLimits()
}
