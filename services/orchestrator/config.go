package orchestrator

import (
	"context"
	"fmt"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go"
)

// ContractFromConfig returns the default ExecutionContract every run starts from: the
// configuration's defaults and targets, the fallback model (models.fallback), and
// tools.reject_ends_run.
func ContractFromConfig(cfg *config.Config) *typev1.ExecutionContract {
	d := cfg.Defaults
	c := DefaultContract()
	c.MaxTurns = d.MaxTurns
	c.MaxToolCallsPerTurn = d.MaxToolCallsPerTurn
	c.MaxToolCallsTotal = d.MaxToolCallsTotal
	c.MaxRetries = d.MaxRetries
	c.MaxTokensConsumed = d.MaxTokensConsumed
	c.ToolTimeoutMs = d.ToolTimeoutMS
	c.StepTimeoutMs = d.StepTimeoutMS
	c.TotalTimeoutMs = d.TotalTimeoutMS
	c.ToolResponseMaxBytes = d.ToolResponseMaxBytes
	c.ContextWindow = d.ContextWindow
	c.ContextWindowBufferTokens = d.ContextWindowBufferTokens
	c.MaxOutputTokens = d.MaxOutputTokens
	c.ForceSynthesisAtRatio = d.ForceSynthesisAtRatio
	c.StrictMode = d.StrictMode
	c.MaxFormatRetries = d.MaxFormatRetries
	c.ApprovalTimeoutMs = d.ApprovalTimeoutMS
	c.AnswerTimeoutMs = d.AnswerTimeoutMS
	c.CacheResponses = d.CacheResponses
	c.RejectEndsRun = cfg.Tools.RejectEndsRun
	switch d.ToolTransport {
	case "xml-final":
		c.ToolTransport = typev1.ToolTransport_TOOL_TRANSPORT_XML_FINAL
	case "xml":
		c.ToolTransport = typev1.ToolTransport_TOOL_TRANSPORT_XML
	default:
		c.ToolTransport = typev1.ToolTransport_TOOL_TRANSPORT_NATIVE
	}
	c.CycleForbid = nil
	for _, p := range d.CycleForbid {
		c.CycleForbid = append(c.CycleForbid, &typev1.ToolPair{FromTool: p[0], ToTool: p[1]})
	}
	c.Targets = nil
	for _, t := range cfg.Targets {
		c.Targets = append(c.Targets, &typev1.Target{Provider: t.Provider, Model: t.Model})
	}
	if f := cfg.Models.Fallback; f != nil {
		c.FallbackTarget = &typev1.Target{Provider: f.Provider, Model: f.Model}
	}
	applyModelLimits(c, cfg)
	return c
}

// applyModelLimits takes the context limits of the configured models (providers.*.models.*):
// of all targets, the one with the smallest usable window (window − buffer − max output)
// sets the contract's limits, so no request to any target of the round-robin can exceed its
// window. Models without configured limits use the defaults.
func applyModelLimits(c *typev1.ExecutionContract, cfg *config.Config) {
	takeLimits(c, modelLimits(cfg))
}

// modelLimits returns the context limits of a target's model as the configuration sets them
// (config.Window: the model's, each the defaults' where it sets none).
func modelLimits(cfg *config.Config) func(*typev1.Target) (window, buffer, maxOutput int64) {
	return func(t *typev1.Target) (window, buffer, maxOutput int64) {
		return cfg.Window(config.Target{Provider: t.GetProvider(), Model: t.GetModel()})
	}
}

// openStore opens the durable run store the configuration asks for (durability.checkpoints,
// with the buckets' replicas and storage from nats), or returns nil when checkpoints are off.
func openStore(ctx context.Context, nc *nats.Conn, cfg *config.Config) (*runstore.Store, error) {
	if !cfg.Durability.Checkpoints {
		return nil, nil
	}
	return runstore.Open(ctx, nc, runstore.Config{
		Replicas:       cfg.NATS.Replicas,
		Storage:        events.Storage(cfg.NATS),
		LeaseTTL:       time.Duration(cfg.Durability.LeaseTTLMS) * time.Millisecond,
		IdempotencyTTL: time.Duration(cfg.Durability.IdempotencyTTLMS) * time.Millisecond,
		ClaimTimeout:   time.Duration(cfg.Durability.ClaimTimeoutMS) * time.Millisecond,
		FinishedTTL:    finishedTTL(cfg),
	})
}

// finishedTTL is how long a retired run's id stays taken: as long as its events are kept (a
// run with the same id would add its events to theirs) and as long as an idempotency key may
// name it (a retry would get the other run), whichever is longer.
func finishedTTL(cfg *config.Config) time.Duration {
	kept := time.Duration(cfg.NATS.StreamMaxAgeMS) * time.Millisecond
	if kept <= 0 {
		kept = events.DefaultMaxAge
	}
	return max(kept, time.Duration(cfg.Durability.IdempotencyTTLMS)*time.Millisecond)
}

// ConfiguredOptions returns what the configuration sets of an orchestrator on nc: the event
// publisher with the configured stream settings, the durable run store (nil when
// durability.checkpoints is off), the default contract, the prompts and profiles, the tool
// alternatives, the planning options and the approval grant signer. Peers, Replica and the
// telemetry options are the caller's. A signing key that cannot be loaded is a
// config.ErrInvalid error, checked before anything is asked of NATS.
func ConfiguredOptions(ctx context.Context, cfg *config.Config, nc *nats.Conn) (Options, error) {
	var grants *grant.Signer
	if path := cfg.Approvals.SigningKey; path != "" {
		var err error
		if grants, err = grant.LoadSigner(path); err != nil {
			return Options{}, fmt.Errorf("%w: approvals.signing_key: %w", config.ErrInvalid, err)
		}
	}
	pub, err := events.NewPublisher(ctx, nc, events.WithStream(events.StreamOptionsFromConfig(cfg.NATS)))
	if err != nil {
		return Options{}, err
	}
	store, err := openStore(ctx, nc, cfg)
	if err != nil {
		return Options{}, err
	}
	opts := Options{NATS: nc, Publisher: pub, Store: store, Contract: ContractFromConfig(cfg), ModelLimits: modelLimits(cfg),
		RunLimits:    cfg.RunLimits,
		Alternatives: cfg.Tools.Alternatives,
		Prompts:      PromptsFromConfig(cfg.Prompts), Profiles: ProfilesFromConfig(cfg),
		Planning: PlanningOptions{MaxSteps: cfg.Defaults.MaxPlanSteps, MaxReplans: cfg.Defaults.MaxReplans, ApprovePlans: cfg.Tools.ApprovePlans},
		Grants:   grants, AssertUsers: cfg.TLS.CA != "", StreamBufferBytes: cfg.GRPC.StreamBufferBytes}
	return opts, nil
}

// OptionsFromConfig is ConfiguredOptions with the stage clients (addresses from env, e.g.
// PLANNING_ADDR, else the configuration; mutual TLS when tls.ca is set), and a function that
// closes their connections.
func OptionsFromConfig(ctx context.Context, cfg *config.Config, nc *nats.Conn, env func(key, def string) string) (Options, func() error, error) {
	opts, err := ConfiguredOptions(ctx, cfg, nc)
	if err != nil {
		return Options{}, nil, err
	}
	mesh, err := cfg.TLS.Mesh()
	if err != nil {
		return Options{}, nil, err
	}
	peers, closePeers, err := DialPeers(PeerAddrsFromConfig(cfg, env), dial.WithMesh(mesh), dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
	if err != nil {
		return Options{}, nil, err
	}
	opts.Peers = peers
	return opts, closePeers, nil
}
