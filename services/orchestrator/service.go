package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
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
	// Publisher publishes the run events (one on NATS with the default stream settings when
	// nil; see OptionsFromConfig).
	Publisher *events.Publisher
	// Contract holds the default budgets, policies and targets every run starts from
	// (DefaultContract when nil).
	Contract *typev1.ExecutionContract
	// ModelLimits returns the context limits configured for a target's model (its
	// context_window, context_window_buffer_tokens and max_output_tokens, config.Window): a
	// run whose overrides name other targets takes the tightest of theirs, as Contract took
	// the configured targets'. Nil leaves such a run the limits of Contract.
	ModelLimits func(*typev1.Target) (window, buffer, maxOutput int64)
	// RunLimits are the operator's ceilings on a run's contract (run_limits): a request whose
	// overrides go beyond one is INVALID_ARGUMENT. Contract must keep within them, as the
	// configuration's defaults do (config.Validate). The zero value sets none.
	RunLimits config.RunLimits
	// Prompts make the system message of every run that names no profile (DefaultSystemPrompt
	// alone when empty).
	Prompts Prompts
	// Profiles are the agent profiles a run may name (RunRequest.profile), by name.
	Profiles map[string]Profile
	// TracerProvider makes the run spans (the global provider when nil).
	TracerProvider trace.TracerProvider
	// MeterProvider records the run metrics: runs in flight, finished runs by outcome and
	// exit reason, turns per run (the global provider when nil).
	MeterProvider metric.MeterProvider
	// Logger logs run lifecycle events (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Alternatives maps a tool to tools that can do its job when it fails (tools.alternatives).
	Alternatives map[string][]string
	// Planning says how runs use their plans: the step limit, the revisions allowed and the
	// plan's approval (the zero value: the planning stage's limit, no revision, no approval).
	Planning PlanningOptions
	// Store makes runs durable: checkpointed, owned by a replica while it lives, resumable by any replica
	// (ConfiguredOptions opens it). Nil keeps every run in this process only. The service
	// closes it once drained (Drain, Close).
	Store *runstore.Store
	// Replica names this replica in its heartbeat, its runs' entries, checkpoints and
	// run_resumed events; unique among the replicas sharing a store (the host name and
	// process id when empty). Letters, digits, '-', '_' and '=', in parts joined by dots.
	Replica string
	// DrainTimeout bounds Drain: runs that reach no checkpoint in that time are stopped and
	// resumed elsewhere from their last one (DefaultDrainTimeout when zero).
	DrainTimeout time.Duration
	// StreamBufferBytes bounds the events a StreamRun holds for a client that reads slowly
	// (grpc.stream_buffer_bytes; DefaultStreamBufferBytes when zero).
	StreamBufferBytes int
	// Grants signs an approval grant for every call a person approved, which the action stage
	// verifies before it runs a tool that requires approval. Nil sends no grant, so no such
	// tool can run (New logs a warning).
	Grants *grant.Signer
	// AssertUsers has a run's calls to the stages that call the memory stage (context
	// assembly, the action stage) carry its assertion of the run's user, signed with Grants:
	// with mutual TLS between the services (tls.ca), the memory stage believes them about the
	// user only with it. Without mutual TLS it believes every caller, and nothing is signed.
	AssertUsers bool
	// CountRuns, when set, is told of each run that starts executing on this replica (+1)
	// and of each whose work here is over (-1; a unary Run's caller has its result after).
	// The mesh in one process gives it procs.Add, which fits the process's processors to
	// the runs in flight.
	CountRuns func(delta int)
}

// instrumentationName is the instrumentation scope of the orchestrator's spans and metrics.
const instrumentationName = "github.com/agentmesh/agentmesh/services/orchestrator"

// DefaultStreamBufferBytes is Options.StreamBufferBytes when zero: grpc.stream_buffer_bytes's
// default.
const DefaultStreamBufferBytes = 8 << 20

// DefaultDrainTimeout is how long a draining replica lets its runs reach a checkpoint; it
// stays within pkg/server's drain so the process exits in time.
const DefaultDrainTimeout = 7 * time.Second

// Service implements agentv1.AgentServiceServer.
type Service struct {
	agentv1.UnimplementedAgentServiceServer

	peers     Peers
	publisher *events.Publisher
	js        jetstream.JetStream
	contract  *typev1.ExecutionContract
	profiles  map[string]profile // by name; "" is the default profile
	// limits are the configured context limits of a target's model (Options.ModelLimits);
	// nil when none are configured.
	limits func(*typev1.Target) (window, buffer, maxOutput int64)
	// ceilings are the operator's ceilings on a run's contract (Options.RunLimits); nil when
	// it sets none.
	ceilings *config.RunLimits
	tracer   trace.Tracer
	metrics  *instruments
	// alternatives maps a tool to the tools recovery may run when it fails.
	alternatives map[string][]string
	planning     PlanningOptions
	log          *slog.Logger
	now          func() time.Time
	grants       *grant.Signer
	assertUsers  bool            // Options.AssertUsers
	countRuns    func(delta int) // nil: nobody counts
	tools        toolCache       // the action service's tools, shared by the runs
	providers    providerCache   // the generation stage's providers, as preflight last found them

	store        *runstore.Store // nil: runs are not durable
	replica      string
	drainTimeout time.Duration
	// streamBuffer bounds the encoded events a StreamRun holds (Options.StreamBufferBytes).
	streamBuffer int
	draining     chan struct{}      // closed when Drain begins
	stopKeeper   context.CancelFunc // ends the keeper (heartbeat and adoption)
	abandon      context.Context    // ended when a drain's time is up: stop retrying, hand off
	abandonNow   context.CancelFunc
	kept         chan struct{}      // closed when the keeper has returned
	lease        *lease             // how long this replica's runs are surely its own
	runOptions   []events.RunOption // of every run's event stream: its fence (durable runs)
	starts       chan struct{}      // a place for each run starting (admit)
	retiring     sync.WaitGroup     // finished runs whose store records are being retired (retireStored)

	mu          sync.Mutex
	live        map[string]*run                      // runs executing on this replica
	starting    map[string]bool                      // runs this replica is starting, not yet live
	refused     map[string]bool                      // runs refused at their start, not discarded yet (refuse)
	idempotency map[idempotencyKey]runstore.KeyClaim // the run and request by user and idempotency key (without a store)
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
	if opts.Replica != "" {
		if err := runstore.CheckReplica(opts.Replica); err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
	}
	pub := opts.Publisher
	if pub == nil {
		var err error
		if pub, err = events.NewPublisher(ctx, opts.NATS); err != nil {
			return nil, err
		}
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
		limits:       opts.ModelLimits,
		log:          opts.Logger,
		now:          opts.Now,
		live:         map[string]*run{},
		starting:     map[string]bool{},
		refused:      map[string]bool{},
		idempotency:  map[idempotencyKey]runstore.KeyClaim{},
		alternatives: opts.Alternatives,
		planning:     opts.Planning,
		store:        opts.Store,
		replica:      opts.Replica,
		grants:       opts.Grants,
		assertUsers:  opts.AssertUsers,
		countRuns:    opts.CountRuns,
		drainTimeout: cmp.Or(opts.DrainTimeout, DefaultDrainTimeout),
		streamBuffer: cmp.Or(opts.StreamBufferBytes, DefaultStreamBufferBytes),
		draining:     make(chan struct{}),
		kept:         make(chan struct{}),
		lease:        newLease(),
		starts:       make(chan struct{}, maxStarting),
	}
	if s.replica == "" {
		s.replica = defaultReplica()
	}
	s.abandon, s.abandonNow = context.WithCancel(context.Background())
	if s.contract == nil {
		s.contract = DefaultContract()
	}
	if !opts.RunLimits.IsZero() {
		s.ceilings = &opts.RunLimits
	}
	s.profiles = resolveProfiles(opts.Prompts, s.contract, opts.Profiles)
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(instrumentationName)
	s.metrics = newInstruments(opts.MeterProvider)
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.grants == nil {
		s.log.WarnContext(ctx, "no approval signing key (approvals.signing_key): tools that require approval cannot run")
	}
	if s.store == nil {
		close(s.kept)
		return s, nil
	}
	s.runOptions = []events.RunOption{s.fence()}
	keepCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopKeeper = stop
	go s.keep(keepCtx)
	return s, nil
}

// Serving reports whether the orchestrator can serve runs: only while their events can be
// stored. It implements server.HealthSource.
func (s *Service) Serving() (bool, <-chan struct{}) { return s.publisher.Ready() }

// Register registers the AgentService on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) { agentv1.RegisterAgentServiceServer(g, s) }

// LongCalls are the unary methods of the AgentService whose calls may last as long as a run:
// Run (and Run of an idempotency key in use, which waits on the run it names), CancelRun,
// which waits until the run has stopped, and Decide, which waits on the models. The server
// holds them as it holds streams (server.Options.LongCalls), so that a revoked API key or
// client certificate ends them UNAUTHENTICATED; the run itself goes on.
func (s *Service) LongCalls() []string {
	return []string{
		agentv1.AgentService_Run_FullMethodName,
		agentv1.AgentService_CancelRun_FullMethodName,
		agentv1.AgentService_Decide_FullMethodName,
	}
}

// Drain stops this replica taking runs, hands its live runs off and returns once they are
// gone: each run stops at its next checkpoint (a paused run at once), so another replica
// resumes it with nothing lost; runs that reach none within the drain timeout, or before ctx
// ends, are stopped where they are and resumed from their last checkpoint. The replica marks
// itself draining at once, and removes its heartbeat once its runs are gone. Without a store
// Drain does nothing: Close interrupts the runs.
func (s *Service) Drain(ctx context.Context) {
	if s.store == nil || s.isDraining() {
		return
	}
	close(s.draining)   // the keeper adopts no more runs, but beats the heartbeat until the end
	s.markDraining(ctx) // the other replicas read the owners of this one's runs again
	defer func() {
		s.stopKeeper()
		<-s.kept
		s.retiring.Wait()
		if err := s.store.Leave(context.WithoutCancel(ctx), s.replica); err != nil {
			s.log.WarnContext(ctx, "removing the replica's heartbeat failed; it expires instead", "err", err)
		}
		s.store.Close()
	}()
	runs := s.liveRuns()
	s.log.InfoContext(ctx, "draining: handing runs off", "runs", len(runs), "timeout", s.drainTimeout)
	timer := time.NewTimer(s.drainTimeout)
	defer timer.Stop()
	select {
	case <-allDone(runs):
	case <-timer.C:
	case <-ctx.Done():
	}
	s.abandonNow()
	for runs = s.liveRuns(); len(runs) > 0; runs = s.liveRuns() {
		for _, r := range runs {
			r.cancel(errHandOff)
		}
		<-allDone(runs)
	}
}

// allDone returns a channel closed once every run in runs has returned.
func allDone(runs []*run) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, r := range runs {
			<-r.done
		}
	}()
	return done
}

// Close drains a durable replica (see Drain); without a store it cancels every live run (they
// terminate as INTERRUPTED). It waits for the runs to finish. It implements io.Closer, so
// pkg/server's Main calls it after draining.
func (s *Service) Close() error {
	if s.store != nil {
		s.Drain(context.Background())
		return nil
	}
	for _, r := range s.liveRuns() {
		r.cancel(errShutdown)
		<-r.done
	}
	return nil
}

// liveRuns are the runs executing on this replica.
func (s *Service) liveRuns() []*run {
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := make([]*run, 0, len(s.live))
	for _, r := range s.live {
		runs = append(runs, r)
	}
	return runs
}

// ours reports whether this replica runs, or is starting, the run of id.
func (s *Service) ours(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id] != nil || s.starting[id]
}

// liveRun is the run of id executing on this replica, or nil.
func (s *Service) liveRun(id string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// defaultReplica names a replica by its host and process.
func defaultReplica() string {
	host, err := os.Hostname()
	if err != nil || runstore.CheckReplica(host) != nil {
		host = "orchestrator"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}
