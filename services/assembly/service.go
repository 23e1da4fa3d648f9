// Package assembly implements the ContextService: it assembles the messages of the next
// inference within a token budget and evaluates the context guard. (The package is not named
// context so that it does not shadow the standard library.)
//
// Assembly keeps, in this order of priority:
//  1. every leading system message, the newest history message (with the messages it
//     belongs to, see below) and the latest user message, the request the newest history
//     serves — when these alone exceed max_tokens the call fails with CONTEXT_OVERFLOW;
//  2. the current plan step, as a system message "Current step <id>: <description>", followed
//     by the plan's progress (each step with its state) when the request sends a plan of more
//     than one step, or one that is no longer pending;
//  3. relevant memories from the MemoryService, as one system message "Relevant memories:",
//     best first (a memory too long for the budget left is left out alone);
//  4. older history, newest first, until the next message does not fit (past the latest
//     user message, which is kept anyway).
//
// An assistant message that calls tools and the tool results answering it are kept or dropped
// together, so the assembled context never holds a tool result without its call or a call
// without its results. A tool result that answers no preceding call is always dropped, as
// are a call or a result without an id and a second call of one id in a message.
// dropped_messages counts the history messages left out to fit max_tokens, which the caller
// must not take for the whole conversation; the malformed ones above are not among them.
// Output keeps chronological order: system messages, step, memories, then history.
//
// sources lists one Source per included memory hit (kind "memory") and for the included plan
// step (kind "plan", id the step's, or "plan" when no step is current); kept history messages
// are not listed.
package assembly

import (
	"context"
	"log/slog"
	"time"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"google.golang.org/grpc"
)

// DefaultMemoryTimeout bounds a memory search when Options.MemoryTimeout is 0.
const DefaultMemoryTimeout = 2 * time.Second

// DefaultMemoryLimit is the number of memories searched for when a request's memory_limit is 0.
const DefaultMemoryLimit = 3

// Options configures the service.
type Options struct {
	// Memory searches the user's memories; nil assembles without memory.
	Memory memoryv1.MemoryServiceClient
	// MemoryTimeout bounds one memory search; 0 means DefaultMemoryTimeout.
	MemoryTimeout time.Duration
}

// Service implements contextv1.ContextServiceServer.
type Service struct {
	contextv1.UnimplementedContextServiceServer
	memory        memoryv1.MemoryServiceClient
	memoryTimeout time.Duration
	log           *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	if opts.MemoryTimeout <= 0 {
		opts.MemoryTimeout = DefaultMemoryTimeout
	}
	return &Service{
		memory:        opts.Memory,
		memoryTimeout: opts.MemoryTimeout,
		log:           slog.Default().With("service", "context"),
	}
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	contextv1.RegisterContextServiceServer(g, s)
}

// Assemble fits the leading system messages, the newest history, the current step, relevant
// memories (found by memory_query, returned as recalled, or recalled at an earlier turn) and
// older history within max_tokens, and evaluates the context guard when
// context_window is set. An unreachable memory service sets memory_unavailable and the
// assembly goes on without memory.
func (s *Service) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	counter := tokens.ForModel(req.GetModel())
	resp := &contextv1.AssembleResponse{SchemaTokens: counter.Tools(req.GetTools())}
	if req.GetContextWindow() > 0 {
		resp.Guard = evaluateGuard(req, resp.GetSchemaTokens())
	}

	h := splitHistory(req.GetHistory(), counter)
	minimum := counter.Messages(h.system) + h.minimum()
	if minimum > req.GetMaxTokens() {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW,
			"cannot fit the minimum context: %d tokens needed, max_tokens %d", minimum, req.GetMaxTokens())
	}
	remaining := req.GetMaxTokens() - minimum

	messages := append([]*typev1.Message(nil), h.system...)
	if step, source := stepMessage(req.GetCurrentStep(), req.GetPlan()); step != nil && counter.Message(step) <= remaining {
		messages = append(messages, step)
		resp.Sources = append(resp.Sources, source)
		remaining -= counter.Message(step)
	}
	found, unavailable := s.recall(ctx, req)
	resp.MemoryUnavailable, resp.Accounting = unavailable, found.GetAccounting()
	hits := req.GetRecalled() // what an earlier turn recalled, shown again
	if req.GetMemoryQuery() != "" {
		hits = found.GetHits()
		resp.Recalled = hits
	}
	if recalled, sources := memoryMessage(hits, remaining, counter); recalled != nil {
		messages = append(messages, recalled)
		resp.Sources = append(resp.Sources, sources...)
		remaining -= counter.Message(recalled)
	}

	kept, trimmed := h.fit(remaining)
	messages = append(messages, kept...)
	resp.Messages = messages
	resp.TokenCount = counter.Messages(messages)
	resp.DroppedMessages = int32(trimmed)
	return resp, nil
}
