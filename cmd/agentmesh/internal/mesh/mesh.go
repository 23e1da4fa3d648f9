package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/procs"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/assembly"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/intent"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/observation"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/planning"
	"github.com/agentmesh/agentmesh/services/recovery"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// The services of the mesh.
const (
	Orchestrator = "orchestrator"
	Intent       = "intent"
	Planning     = "planning"
	Context      = "context"
	Generation   = "generation"
	Action       = "action"
	Observation  = "observation"
	Memory       = "memory"
	Recovery     = "recovery"
)

// Options configure an in-process mesh.
type Options struct {
	// Config is the configuration (config.Default() when nil).
	Config *config.Config
	// Ephemeral puts every service on 127.0.0.1:0 instead of its configured address, so several
	// meshes (tests, `agentmesh dev --run`) can run side by side.
	Ephemeral bool
	// StoreDir is the embedded NATS server's JetStream directory; a temporary directory, removed
	// by Close, when empty and the configuration names none.
	StoreDir string
	// TracerProvider returns the tracer provider of each service (the global one when nil).
	TracerProvider func(service string) trace.TracerProvider
	// Providers are added to the configured generation providers (replacing same names).
	Providers map[string]generation.Provider
	// Logger is used by every service (slog.Default when nil).
	Logger *slog.Logger
	// Orchestrators is the number of orchestrator replicas (at least 1): the first serves on
	// the orchestrator's address, the others on free loopback ports (OrchestratorAddrs). They
	// share NATS, so any of them serves, resumes and finishes any run.
	Orchestrators int
	// MetricsAddr, when set, is where the mesh serves the metrics of all its services as
	// Prometheus text (path /metrics; "127.0.0.1:0" picks a free port, see Mesh.MetricsAddr).
	MetricsAddr string
	// MetricsWebConfig names the Prometheus web configuration of the metrics' listener (TLS,
	// basic authentication: telemetry.MetricsListener); "" serves plain HTTP.
	MetricsWebConfig string
	// StageAddrs point the orchestrator at these addresses instead of the in-process stages
	// of the same names (Planning, Intent, ...), e.g. at a replacement stage under test; the
	// in-process stages still run, for the other stages that call them.
	StageAddrs map[string]string
	// Insecure lets services listen on addresses other hosts can reach without authenticating
	// their callers; without it such a configuration is refused (exitcode.Invalid). Stages
	// with mutual TLS between services (tls.ca) authenticate theirs.
	Insecure bool
	// InProcess serves the stages in process instead of on gRPC ports: the orchestrator and the
	// stages that call other stages (action and context call memory; intent, planning,
	// observation and memory may call generation) call them over in-process channels
	// (server.InProcess, dial.InProcess), with the same interceptors, spans and metrics but no
	// transport, so no stage listens (Addr returns "" for them). It is the floor of the design:
	// the same loop with every stage called in process, which the benchmarks compare with the
	// mesh. The public API (the orchestrator's AgentService) still listens on its port, with
	// its authentication and TLS: the client of a run is its caller, not a stage of the loop.
	// Mutual TLS between services (tls.ca) and StageAddrs need stages on the network: with
	// InProcess they are refused (exitcode.Invalid).
	InProcess bool
	// Orchestrator, when set, changes each orchestrator replica's options, made from the
	// configuration, before the replica starts: what a library user sets in code (a default
	// contract the configuration cannot express, say).
	Orchestrator func(*orchestrator.Options)
}

// Mesh is a running in-process mesh.
type Mesh struct {
	// Authenticated says whether the public API authenticates its callers (auth.* is set).
	Authenticated bool

	addrs               map[string]string
	servers             []*server.Server
	stages              map[string]*server.InProcess // the stages, with Options.InProcess
	stageOrder          []*server.InProcess          // the same, in the order they started
	conns               []*grpc.ClientConn
	embedded            *events.Embedded
	nc                  *nats.Conn
	orchestrators       []*orchestrator.Service
	orchestratorServers []*server.Server // one per replica; the first is also in servers
	closePeers          func() error
	metrics             *telemetry.Metrics // nil without Options.MetricsAddr
	closers             []func() error     // run after the servers stopped
	memory              *memory.Service    // drained (Drain) before the servers stop
	memoryDrain         time.Duration      // how long for
	tempDir             string
	unfit               func() // gives the runtime its processors back (procs.Fit)
}

// Start starts NATS (embedded unless the configuration names a URL) and the nine services,
// peers first (generation before memory, which embeds through it when memory.embeddings is
// set, before intent, which asks its model through it when models.intent is set, and to which
// memory sends the facts of finished runs when models.memory is). A service that cannot listen,
// or a NATS server that cannot be reached, is an exitcode.Unavailable error; a configuration the
// mesh cannot serve is exitcode.Invalid.
// With tls.ca the services talk mutual TLS, every one of them with the certificate of tls.cert.
// Until Close the process's processors follow the runs in flight (pkg/procs): one while at
// most one run is, all of them while more are.
func Start(ctx context.Context, opts Options) (_ *Mesh, err error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = func(string) trace.TracerProvider { return otel.GetTracerProvider() }
	}
	// Run events carry the run's trace in a W3C traceparent header (pkg/events uses the global
	// propagator), so the mesh installs it.
	otel.SetTextMapPropagator(telemetry.Propagator())
	if err := checkApprovalKeys(cfg); err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	m := &Mesh{addrs: map[string]string{}, stages: map[string]*server.InProcess{}}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	authn, publicTLS, err := server.PublicSecurity(cfg.Auth, cfg.TLS)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	m.Authenticated = authn != nil
	// With tls.ca every service of the process speaks mutual TLS with the one certificate of
	// tls.cert, whose mesh identity is the whole process's.
	meshTLS, err := cfg.TLS.Mesh()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	// The process serves every stage with the one certificate of tls.cert: the stages it calls
	// have its own mesh identity, or their own (a stage of StageAddrs).
	own := dial.WithPeer()
	if meshTLS != nil {
		own = dial.WithPeer(meshTLS.Service())
	}
	if opts.InProcess && (meshTLS != nil || len(opts.StageAddrs) > 0) {
		return nil, exitcode.Wrap(exitcode.Invalid, errors.New("mesh: stages served in process have no transport: tls.ca and StageAddrs need them on the network"))
	}
	if err := m.startNATS(cfg, opts.StoreDir); err != nil {
		return nil, err
	}
	var mp metric.MeterProvider // nil: the global provider
	if opts.MetricsAddr != "" {
		m.metrics, err = telemetry.ServeMetrics("agentmesh", telemetry.MetricsListener{Addr: opts.MetricsAddr, WebConfig: opts.MetricsWebConfig, Log: log.With("listener", "metrics")})
		if err != nil {
			return nil, err // its exit code says which (telemetry.ServeMetrics)
		}
		mp = m.metrics.Provider()
	}

	// Stopped (Stop, Close), a stage drains as its binary does: the action and generation
	// stages, and intent, planning and observation with a model, for as long as their calls may
	// last, memory with a model for as long as its learning may (Close), the others for
	// server.DefaultDrainTimeout.
	drains := map[string]time.Duration{Action: action.DrainTimeout(cfg), Generation: generation.DrainTimeout(cfg)}
	if d, ok := intent.DrainTimeout(cfg); ok {
		drains[Intent] = d
	}
	if d, ok := planning.DrainTimeout(cfg); ok {
		drains[Planning] = d
	}
	if d, ok := observation.DrainTimeout(cfg); ok {
		drains[Observation] = d
	}
	if d, ok := memory.DrainTimeout(cfg); ok {
		drains[Memory] = d
	}
	// A stage whose health its service tells (server.HealthSource: the memory stage's store) is
	// reported so on gRPC, as its binary reports it (server.Main).
	health := map[string]server.HealthSource{}
	serve := func(name string, register func(grpc.ServiceRegistrar)) error {
		if opts.InProcess {
			stage, err := server.NewInProcess(server.Options{Name: name, TracerProvider: tp(name), MeterProvider: mp, Logger: log.With("service", name),
				DrainTimeout: drains[name]})
			if err != nil {
				return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s service: %w", name, err))
			}
			register(stage)
			m.stages[name] = stage
			m.stageOrder = append(m.stageOrder, stage)
			return nil
		}
		addr := serviceAddr(cfg, name)
		if opts.Ephemeral {
			addr = "127.0.0.1:0"
		}
		if err := server.CheckExposure(addr, meshTLS != nil, opts.Insecure); err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s service: %w", name, err))
		}
		srv := server.New(server.Options{Name: name, Addr: addr, TracerProvider: tp(name), MeterProvider: mp, Logger: log.With("service", name),
			MaxMessageBytes: cfg.GRPC.MaxMessageBytes, Mesh: meshTLS, DrainTimeout: drains[name], Health: health[name]})
		register(srv.GRPC())
		if err := srv.Start(); err != nil {
			err = movable(name, err)
			return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("%s service: %w", name, err))
		}
		m.servers = append(m.servers, srv)
		m.addrs[name] = srv.Addr()
		return nil
	}
	// A service's connections log their failed handshakes to one logger, whose limit they share
	// (dial.WithLogger): one warning a minute for a target and cause, not one per connection.
	clientLogs := map[string]*slog.Logger{}
	conn := func(from, to string, opts ...dial.Option) (grpc.ClientConnInterface, error) {
		if stage := m.stages[to]; stage != nil {
			return dial.InProcess(stage.Channel(), dial.WithTracerProvider(tp(from)), dial.WithMeterProvider(mp)), nil
		}
		if clientLogs[from] == nil {
			clientLogs[from] = log.With("service", from)
		}
		c, err := dial.New(m.addrs[to], append(opts, dial.WithTracerProvider(tp(from)), dial.WithMeterProvider(mp), dial.WithMesh(meshTLS),
			dial.WithLogger(clientLogs[from]),
			own, dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))...)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("%s → %s: %w", from, to, err))
		}
		m.conns = append(m.conns, c)
		return c, nil
	}

	providers, err := generation.ProvidersFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	maps.Copy(providers, opts.Providers)
	gen := generation.New(generation.Options{Providers: providers, Prices: generation.PricesFromConfig(cfg), TracerProvider: tp(Generation), MeterProvider: mp})
	if err := serve(Generation, gen.Register); err != nil {
		return nil, err
	}
	// Generation is served first: with memory.embeddings the memory service embeds through it,
	// with models.memory it asks it for the facts of finished runs, and its address is only
	// known once it listens (Ephemeral meshes listen on port 0).
	var (
		embedder memory.Embedder
		facts    *ask.Model
	)
	if embedding, picking := memory.EmbeddingTarget(cfg), memory.FactsTarget(cfg); embedding != nil || picking != nil {
		// Each Embed and Generate is a paid provider request, accounted once: no retry of UNAVAILABLE.
		memoryGeneration, err := conn(Memory, Generation, dial.WithoutRetry())
		if err != nil {
			return nil, err
		}
		client := generationv1.NewGenerationServiceClient(memoryGeneration)
		if embedding != nil {
			embedder = &memory.GenerationEmbedder{Client: client, Target: embedding}
		}
		if picking != nil {
			facts = (&ask.Model{Client: client, Target: picking}).WithLimits(cfg)
		}
	}
	// Without configured approval keys the mesh makes a pair: grants and user assertions are
	// signed and verified within this process, and signed anew for every call or run, so they
	// need not outlive it.
	var (
		signer   *grant.Signer
		verifier *grant.Verifier
	)
	if cfg.Approvals.SigningKey == "" && cfg.Approvals.VerifyKey == "" {
		pub, priv := grant.GenerateKey()
		signer, verifier = grant.NewSigner(priv), grant.NewVerifier(pub)
	}
	memOpts, err := memory.OptionsFromConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if memOpts.MeshIdentity != nil && verifier != nil {
		memOpts.UserAssertions = verifier
	}
	memOpts.Embedder, memOpts.Facts, memOpts.TracerProvider = embedder, facts, tp(Memory)
	mem := memory.New(memOpts) // owns the store from here on
	m.closers = append(m.closers, mem.Close)
	m.memory, m.memoryDrain = mem, cmp.Or(drains[Memory], server.DefaultDrainTimeout)
	health[Memory] = mem
	if err := serve(Memory, mem.Register); err != nil {
		return nil, err
	}
	intentOpts := intent.Options{Logger: log.With("service", Intent)}
	if target := intent.ModelTarget(cfg); target != nil {
		// Each Generate is a paid provider request, accounted once: no retry of UNAVAILABLE.
		intentGeneration, err := conn(Intent, Generation, dial.WithoutRetry())
		if err != nil {
			return nil, err
		}
		intentOpts.Model = (&ask.Model{Client: generationv1.NewGenerationServiceClient(intentGeneration), Target: target}).WithLimits(cfg)
	}
	obsOpts := observation.OptionsFromConfig(cfg)
	if obsOpts.Model != nil {
		// Each summary is a paid provider request, accounted once: no retry of UNAVAILABLE.
		obsGeneration, err := conn(Observation, Generation, dial.WithoutRetry())
		if err != nil {
			return nil, err
		}
		obsOpts.Generation = generationv1.NewGenerationServiceClient(obsGeneration)
	}
	obsOpts.Logger = log
	for _, s := range []struct {
		name     string
		register func(grpc.ServiceRegistrar)
	}{
		{Recovery, recovery.New(recovery.Options{}).Register},
		{Intent, intent.New(intentOpts).Register},
		{Observation, observation.New(obsOpts).Register},
	} {
		if err := serve(s.name, s.register); err != nil {
			return nil, err
		}
	}
	planOpts := planning.Options{Logger: log.With("service", Planning)}
	if t := planning.ModelTarget(cfg); t != nil {
		// Each plan asked of the model is a paid provider request, accounted once: no retry.
		planningGeneration, err := conn(Planning, Generation, dial.WithoutRetry())
		if err != nil {
			return nil, err
		}
		planOpts.Model = (&ask.Model{Client: generationv1.NewGenerationServiceClient(planningGeneration),
			Target: t}).WithLimits(cfg)
	}
	if err := serve(Planning, planning.New(planOpts).Register); err != nil {
		return nil, err
	}

	actionMemory, err := conn(Action, Memory)
	if err != nil {
		return nil, err
	}
	actOpts, stopBackends, err := action.OptionsFromConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, stopBackends)
	actOpts.Memory = memoryv1.NewMemoryServiceClient(actionMemory)
	if verifier != nil {
		actOpts.Grants = verifier
	}
	actOpts.TracerProvider, actOpts.MeterProvider = tp(Action), mp
	if actOpts.Ledger == nil { // NATS is embedded: record tool calls over the mesh's connection
		ledger, err := action.NewKVLedger(m.nc, action.KVLedgerOptionsFromConfig(cfg))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		actOpts.Ledger = ledger
		m.closers = append(m.closers, ledger.Close)
	}
	act, err := action.New(actOpts)
	if err != nil { // a tool schema that does not compile is exitcode.Schema
		return nil, exitcode.Default(exitcode.Invalid, err)
	}
	if err := serve(Action, act.Register); err != nil {
		return nil, err
	}
	contextMemory, err := conn(Context, Memory)
	if err != nil {
		return nil, err
	}
	if err := serve(Context, assembly.New(assembly.Options{Memory: memoryv1.NewMemoryServiceClient(contextMemory)}).Register); err != nil {
		return nil, err
	}

	var peers orchestrator.Peers
	if opts.InProcess {
		peers = m.inProcessPeers(tp(Orchestrator), mp)
	} else {
		peer := func(name string) string { return cmp.Or(opts.StageAddrs[name], m.addrs[name]) }
		var closePeers func() error
		peers, closePeers, err = orchestrator.DialPeers(orchestrator.PeerAddrs{
			Intent: peer(Intent), Planning: peer(Planning), Context: peer(Context),
			Generation: peer(Generation), Action: peer(Action), Observation: peer(Observation),
			Memory: peer(Memory), Recovery: peer(Recovery),
		}, dial.WithTracerProvider(tp(Orchestrator)), dial.WithMeterProvider(mp), dial.WithMesh(meshTLS),
			dial.WithLogger(log.With("service", Orchestrator)), own,
			dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		m.closePeers = closePeers
	}
	replicas := max(opts.Orchestrators, 1)
	for i := range replicas {
		oo, err := orchestrator.ConfiguredOptions(ctx, cfg, m.nc)
		if errors.Is(err, config.ErrInvalid) {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		replica := ""
		if replicas > 1 {
			replica = fmt.Sprintf("%s-%d", Orchestrator, i+1)
		}
		oo.Peers, oo.Replica = peers, replica
		if signer != nil {
			oo.Grants = signer
		}
		oo.TracerProvider, oo.MeterProvider, oo.Logger = tp(Orchestrator), mp, log.With("service", Orchestrator, "replica", replica)
		oo.CountRuns = procs.Add
		if opts.Orchestrator != nil {
			opts.Orchestrator(&oo)
		}
		svc, err := orchestrator.New(ctx, oo)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		m.orchestrators = append(m.orchestrators, svc)
		addr := "127.0.0.1:0" // replicas after the first listen on free ports
		if i == 0 && !opts.Ephemeral {
			addr = serviceAddr(cfg, Orchestrator)
		}
		if err := server.CheckExposure(addr, m.Authenticated, opts.Insecure); err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("orchestrator: %w", err))
		}
		if err := server.CheckPlaintextKeys(addr, cfg.Auth, publicTLS); err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("orchestrator: %w", err))
		}
		srv := server.New(server.Options{Name: Orchestrator, Addr: addr, TracerProvider: tp(Orchestrator), MeterProvider: mp,
			Logger: log.With("service", Orchestrator, "replica", replica), Health: svc, MaxMessageBytes: cfg.GRPC.MaxMessageBytes,
			Auth: authn, TLS: publicTLS, LongCalls: svc.LongCalls()})
		svc.Register(srv.GRPC())
		if err := srv.Start(); err != nil {
			if i == 0 {
				err = movable(Orchestrator, err)
			}
			return nil, exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("orchestrator replica %d: %w", i+1, err))
		}
		m.orchestratorServers = append(m.orchestratorServers, srv)
		if i == 0 {
			m.servers = append(m.servers, srv)
			m.addrs[Orchestrator] = srv.Addr()
		}
	}
	// Every service's server has its stream workers by now, one per processor of the default.
	m.unfit = procs.Fit()
	return m, nil
}

// checkApprovalKeys refuses approvals.verify_key without approvals.signing_key under mutual
// TLS (tls.ca). The process runs the orchestrator, which signs its assertions of a run's user
// with the signing key, and the memory stage, which with mutual TLS verifies them with the
// verify key: it believes the stages that call it for a user (context assembly's recall,
// knowledge_search) only with one, unless their certificate is the orchestrator's. Without the
// signing key nothing is signed, so recall and knowledge_search found nothing, the runs
// succeeding all the same (and no tool that requires approval could run: grants are signed with
// it too). Neither key is right too: the mesh makes a pair (Start).
func checkApprovalKeys(cfg *config.Config) error {
	a := cfg.Approvals
	if cfg.TLS.CA == "" || a.VerifyKey == "" || a.SigningKey != "" {
		return nil
	}
	return fmt.Errorf("%w: approvals.verify_key is set without approvals.signing_key, with tls.ca: "+
		"the memory stage then verifies the orchestrator's assertions of the user a call acts "+
		"for, which this process, the orchestrator, signs with approvals.signing_key; "+
		"without it recall and knowledge_search would find nothing: set approvals.signing_key "+
		"to the key of %s (`agentmesh certs` writes a pair), or neither key (the mesh makes a pair)",
		config.ErrInvalid, a.VerifyKey)
}

// inProcessPeers are the orchestrator's clients of the stages served in process, whose client
// spans tp makes and whose client call metrics mp records (nil: the global provider).
func (m *Mesh) inProcessPeers(tp trace.TracerProvider, mp metric.MeterProvider) orchestrator.Peers {
	conn := func(stage string) grpc.ClientConnInterface {
		return dial.InProcess(m.stages[stage].Channel(), dial.WithTracerProvider(tp), dial.WithMeterProvider(mp))
	}
	return orchestrator.Peers{
		Intent:      intentv1.NewIntentServiceClient(conn(Intent)),
		Planning:    planningv1.NewPlanningServiceClient(conn(Planning)),
		Context:     contextv1.NewContextServiceClient(conn(Context)),
		Generation:  generationv1.NewGenerationServiceClient(conn(Generation)),
		Action:      actionv1.NewActionServiceClient(conn(Action)),
		Observation: observationv1.NewObservationServiceClient(conn(Observation)),
		Memory:      memoryv1.NewMemoryServiceClient(conn(Memory)),
		Recovery:    recoveryv1.NewRecoveryServiceClient(conn(Recovery)),
	}
}

// OrchestratorAddrs returns the addresses of the orchestrator replicas, the first one being
// Addr(Orchestrator).
func (m *Mesh) OrchestratorAddrs() []string {
	addrs := make([]string, len(m.orchestratorServers))
	for i, srv := range m.orchestratorServers {
		addrs[i] = srv.Addr()
	}
	return addrs
}

// StopOrchestrator stops orchestrator replica i (0-based) as SIGTERM stops the binary: it
// hands its runs off (another replica resumes them) and drains its server.
func (m *Mesh) StopOrchestrator(ctx context.Context, i int) {
	m.orchestrators[i].Drain(ctx)
	m.orchestratorServers[i].Shutdown(ctx)
}

func (m *Mesh) startNATS(cfg *config.Config, storeDir string) error {
	if cfg.NATS.URL != "" {
		nc, err := events.Connect(cfg.NATS.URL, "agentmesh")
		if errors.Is(err, config.ErrInvalid) { // a URL that does not parse
			return exitcode.Wrap(exitcode.Invalid, err)
		} else if err != nil {
			return exitcode.Wrap(exitcode.Unavailable, err)
		}
		m.nc = nc
		return nil
	}
	if storeDir == "" {
		storeDir = cfg.NATS.StoreDir
	}
	if storeDir == "" {
		dir, err := os.MkdirTemp("", "agentmesh-nats-")
		if err != nil {
			return err
		}
		m.tempDir, storeDir = dir, dir
	}
	e, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: storeDir, Port: -1})
	if err != nil {
		return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("embedded NATS: %w", err))
	}
	m.embedded = e
	nc, err := e.Connect(nats.Name("agentmesh"))
	if err != nil {
		return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("connecting to the embedded NATS: %w", err))
	}
	m.nc = nc
	return nil
}

func serviceAddr(cfg *config.Config, name string) string {
	s := cfg.Services
	return map[string]string{
		Orchestrator: s.Orchestrator, Intent: s.Intent, Planning: s.Planning, Context: s.Context,
		Generation: s.Generation, Action: s.Action, Observation: s.Observation, Memory: s.Memory, Recovery: s.Recovery,
	}[name]
}

// Stop shuts one service down, e.g. to see how the mesh copes with a stage outage (a stage
// served in process refuses calls with UNAVAILABLE from then on), draining it as its binary
// drains on SIGTERM (the action and generation stages for action.DrainTimeout and
// generation.DrainTimeout). A stage on the network keeps its address until Close, refusing
// every connection. The other services keep running; Close still stops everything.
func (m *Mesh) Stop(ctx context.Context, service string) error {
	if stage := m.stages[service]; stage != nil {
		stage.Shutdown(ctx)
		return nil
	}
	for _, srv := range m.servers {
		if srv.Addr() == m.addrs[service] {
			srv.Shutdown(ctx)
			release, err := holdAddr(srv.Addr())
			if err != nil {
				return fmt.Errorf("mesh: %s stopped, but its address was taken: %w", service, err)
			}
			m.closers = append(m.closers, release)
			return nil
		}
	}
	return fmt.Errorf("mesh: no service %q", service)
}

// Addr returns the address a service listens on ("" for a stage served in process).
func (m *Mesh) Addr(service string) string { return m.addrs[service] }

// Services returns the service names in a stable order.
func (m *Mesh) Services() []string { return slices.Sorted(maps.Keys(m.addrs)) }

// MetricsAddr returns the address the mesh serves its metrics on, or "" without
// Options.MetricsAddr.
func (m *Mesh) MetricsAddr() string {
	if m.metrics == nil {
		return ""
	}
	return m.metrics.Addr()
}

// NATSURL returns the URL of the embedded NATS server ("" with an external one).
func (m *Mesh) NATSURL() string {
	if m.embedded == nil {
		return ""
	}
	return m.embedded.ClientURL()
}

// Failed returns a channel that yields the error that stops a service of the mesh for good,
// as it does the service's own binary (server.Failer): the memory stage's on PostgreSQL when a
// unique index of its schema upgrade, built after the mesh started, cannot be built over the
// rows stored. The mesh serves on meanwhile, that stage serving nothing: `agentmesh dev`
// stops it and exits with the error (exitcode.Of, 3 unless it carries another code). A nil
// channel never yields.
func (m *Mesh) Failed() <-chan error {
	if m.memory == nil {
		return nil
	}
	return m.memory.Failed()
}

// NATS returns the mesh's NATS connection.
func (m *Mesh) NATS() *nats.Conn { return m.nc }

// Close stops live runs, lets the memory stage's learning in flight finish as its binary does,
// drains every server (the orchestrator first) as Stop does, and stops NATS.
func (m *Mesh) Close() {
	for _, o := range m.orchestrators {
		_ = o.Close()
	}
	if m.memory != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.memoryDrain)
		m.memory.Drain(ctx)
		cancel()
	}
	for _, srv := range m.orchestratorServers[min(1, len(m.orchestratorServers)):] {
		srv.Shutdown(context.Background())
	}
	for _, srv := range slices.Backward(m.servers) {
		srv.Shutdown(context.Background())
	}
	for _, stage := range slices.Backward(m.stageOrder) {
		stage.Shutdown(context.Background())
	}
	var errs []error
	for _, c := range m.conns {
		errs = append(errs, c.Close())
	}
	if m.closePeers != nil {
		errs = append(errs, m.closePeers())
	}
	for _, c := range m.closers {
		errs = append(errs, c())
	}
	if m.metrics != nil {
		errs = append(errs, m.metrics.Shutdown(context.Background()))
	}
	if m.nc != nil {
		m.nc.Close()
	}
	if m.embedded != nil {
		m.embedded.Shutdown()
	}
	if m.tempDir != "" {
		errs = append(errs, os.RemoveAll(m.tempDir))
	}
	if m.unfit != nil {
		m.unfit()
	}
	if err := errors.Join(errs...); err != nil {
		slog.Default().Warn("closing the mesh", "err", err)
	}
}
