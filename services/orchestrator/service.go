package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Peers are the clients of the stage services the orchestrator drives.
type Peers struct {
	Intent      intentv1.IntentServiceClient
	Planning    planningv1.PlanningServiceClient
	Context     contextv1.ContextServiceClient
	Generation  generationv1.GenerationServiceClient
	Action      actionv1.ActionServiceClient
	Observation observationv1.ObservationServiceClient
	Memory      memoryv1.MemoryServiceClient
	Recovery    recoveryv1.RecoveryServiceClient
}

func (p Peers) missing() error {
	var errs []error
	for name, c := range map[string]any{
		"intent": p.Intent, "planning": p.Planning, "context": p.Context, "generation": p.Generation,
		"action": p.Action, "observation": p.Observation, "memory": p.Memory, "recovery": p.Recovery,
	} {
		if c == nil {
			errs = append(errs, errors.New("orchestrator: no client for the "+name+" service"))
		}
	}
	return errors.Join(errs...)
}

// Options configure the orchestrator.
type Options struct {
	// Peers are the stage clients; all are required.
	Peers Peers
	// NATS is the connection run events are published on; required.
	NATS *nats.Conn
	// Contract holds the default budgets, policies and targets every run starts from
	// (DefaultContract when nil).
	Contract *typev1.ExecutionContract
	// SystemPrompt opens every conversation (DefaultSystemPrompt when empty).
	SystemPrompt string
	// TracerProvider makes the run spans (the global provider when nil).
	TracerProvider trace.TracerProvider
	// Logger logs run lifecycle events (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Alternatives maps a tool to tools that can do its job when it fails (tools.alternatives).
	Alternatives map[string][]string
}

// DefaultSystemPrompt opens every conversation unless Options.SystemPrompt says otherwise.
const DefaultSystemPrompt = "You are agentmesh, a helpful assistant. Use the available tools when they help " +
	"answer the user's request, and answer concisely once you have what you need."

// Service implements agentv1.AgentServiceServer.
type Service struct {
	agentv1.UnimplementedAgentServiceServer

	peers     Peers
	publisher *events.Publisher
	js        jetstream.JetStream
	contract  *typev1.ExecutionContract
	prompt    string
	tracer    trace.Tracer
	// alternatives maps a tool to the tools recovery may run when it fails.
	alternatives map[string][]string
	log          *slog.Logger
	now          func() time.Time

	mu          sync.Mutex
	live        map[string]*run   // runs executing on this replica
	idempotency map[string]string // idempotency key → run id
}

// New returns an orchestrator that publishes events on opts.NATS (creating the
// AGENTMESH_RUNS stream if needed).
func New(ctx context.Context, opts Options) (*Service, error) {
	if err := opts.Peers.missing(); err != nil {
		return nil, err
	}
	if opts.NATS == nil {
		return nil, errors.New("orchestrator: a NATS connection is required")
	}
	pub, err := events.NewPublisher(ctx, opts.NATS)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(opts.NATS)
	if err != nil {
		return nil, err
	}
	s := &Service{
		peers:        opts.Peers,
		publisher:    pub,
		js:           js,
		contract:     opts.Contract,
		prompt:       opts.SystemPrompt,
		log:          opts.Logger,
		now:          opts.Now,
		live:         map[string]*run{},
		idempotency:  map[string]string{},
		alternatives: opts.Alternatives,
	}
	if s.contract == nil {
		s.contract = DefaultContract()
	}
	if s.prompt == "" {
		s.prompt = DefaultSystemPrompt
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/agentmesh/agentmesh/services/orchestrator")
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Register adds the AgentService to g.
func (s *Service) Register(g *grpc.Server) { agentv1.RegisterAgentServiceServer(g, s) }

// Close cancels every live run (they terminate as INTERRUPTED) and waits for them to finish.
// It implements io.Closer, so pkg/server's Main calls it after draining.
func (s *Service) Close() error {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.live))
	for _, r := range s.live {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel(errShutdown)
		<-r.done
	}
	return nil
}
