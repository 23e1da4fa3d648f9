package action

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"github.com/agentmesh/agentmesh/services/action/queue"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
)

// Defaults of Options.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultCacheSize = 10000
	DefaultRetryBase = 100 * time.Millisecond
)

// Options configures the service.
type Options struct {
	// Memory, when set, enables the knowledge_search built-in.
	Memory memoryv1.MemoryServiceClient
	// Tools are executable tools beyond the built-ins.
	Tools []Tool
	// MCP, when set, holds MCP servers whose tools the service offers beyond Tools, named and
	// bound by MCPBindings as MCPTools does. Their list follows the servers': when a server's
	// tools change (it says so, or it was restarted), ListTools and Execute see the new list.
	MCP *mcp.Manager
	// MCPBindings are the queues and approval lists of MCP's servers, by server name.
	MCPBindings map[string]MCPBinding
	// RequireApproval names tools that are never executed without a recorded approval; each
	// must be the name of a tool.
	RequireApproval []string
	// NoApproval names tools exempt from approval, whatever their name or flag says; it may
	// not name an MCP tool its server's binding requires approval for (MCPBinding).
	NoApproval []string
	// Idempotent names tools that may run again when a crash interrupted their execution or
	// after a failure that wraps ErrMayHaveRun, beyond those whose definition says so (the
	// built-ins, which only read).
	Idempotent []string
	// Alternatives maps a tool to tools that can do its job when it fails
	// (tools.alternatives). The orchestrator runs them; the service only checks that they
	// and the tools they stand in for are tools, and that the alternatives run without
	// approval, as the orchestrator tries only those.
	Alternatives map[string][]string
	// DefaultTimeout applies to calls without timeout_ms; 0 means DefaultTimeout.
	DefaultTimeout time.Duration
	// RetryBase is the first backoff delay between retries of transient failures; it doubles
	// per retry, with jitter. 0 means DefaultRetryBase.
	RetryBase time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Ledger records every call, so that none runs twice; nil means a ledger in this
	// process's memory, which only this replica sees and a restart forgets (New logs a
	// warning). Replicas of the stage share a KVLedger.
	Ledger Ledger
	// CacheSize bounds the in-memory ledger used when Ledger is nil: the number of finished
	// calls it remembers; 0 means DefaultCacheSize. Their records take at most
	// DefaultCacheBytes, encoded, whatever their number.
	CacheSize int
	// TracerProvider makes the execute_tool spans; nil means the global provider.
	TracerProvider trace.TracerProvider
	// Logger logs tool panics, results the ledger could not record and a ledger in memory
	// only; nil means slog.Default().
	Logger *slog.Logger
	// Queues are the concurrency limits of the named queues tools run on (name → at least
	// 1). A tool names its queue in its definition; "" means queue.Default, which exists with
	// queue.DefaultConcurrency unless set here. A tool naming another queue is an error.
	Queues map[string]int
	// MeterProvider records the metrics of the queues (depth, wait) and of tool executions;
	// nil means the global provider.
	MeterProvider metric.MeterProvider
	// Grants verifies the orchestrator's approval grants: a tool that requires approval runs
	// (or returns its cached result) only for a call whose grant verifies. Nil refuses every
	// such call.
	Grants *grant.Verifier
}

// Service is the ActionService.
type Service struct {
	actionv1.UnimplementedActionServiceServer

	tools          atomic.Pointer[registry]
	rebuild        func(mcp []Tool) (*registry, error) // the registry with these MCP tools
	mcp            *mcp.Manager
	mcpBindings    map[string]MCPBinding
	relisting      sync.Mutex
	queues         *queue.Set
	ledger         Ledger
	flight         singleflight.Group
	tracer         trace.Tracer
	metrics        *instruments
	log            *slog.Logger
	now            func() time.Time
	defaultTimeout time.Duration
	grants         *grant.Verifier
	retryBase      time.Duration
}

// New returns the service with the built-in tools, opts.Tools and the tools of opts.MCP.
// Duplicate tool names, a name both requiring and exempt from approval, a name in
// RequireApproval, NoApproval, Idempotent or Alternatives that no tool has, an alternative that
// requires approval (checkNamed), an MCP tool both required by its binding and exempt from
// approval (checkExempt), bad queue limits, tools bound to queues that do not exist and schemas
// that do not compile are errors; a schema's wraps exitcode.Schema.
func New(opts Options) (*Service, error) {
	s := &Service{
		now:            opts.Now,
		log:            opts.Logger,
		defaultTimeout: opts.DefaultTimeout,
		retryBase:      opts.RetryBase,
		grants:         opts.Grants,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.defaultTimeout <= 0 {
		s.defaultTimeout = DefaultTimeout
	}
	if s.retryBase <= 0 {
		s.retryBase = DefaultRetryBase
	}
	if s.ledger = opts.Ledger; s.ledger == nil {
		size := opts.CacheSize
		if size <= 0 {
			size = DefaultCacheSize
		}
		s.ledger = newMemoryLedger(size)
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	s.metrics = newInstruments(opts.MeterProvider)

	var err error
	if s.queues, err = queue.New(opts.Queues, opts.MeterProvider); err != nil {
		return nil, err
	}
	builtins, err := builtinTools(opts.Memory, s.now)
	if err != nil {
		return nil, err
	}
	policy, err := newApprovalPolicy(opts.RequireApproval, opts.NoApproval)
	if err != nil {
		return nil, err
	}
	static := append(builtins, opts.Tools...)
	s.rebuild = func(mcpTools []Tool) (*registry, error) {
		r, err := newRegistry(append(slices.Clip(static), mcpTools...), policy, opts.Idempotent, s.queues)
		if err != nil {
			return nil, err
		}
		return r, checkExempt(r, opts.NoApproval)
	}
	var mcpTools []Tool
	var gen uint64
	if s.mcp, s.mcpBindings = opts.MCP, opts.MCPBindings; s.mcp != nil {
		gen = s.mcp.Generation()
		if mcpTools, err = MCPTools(s.mcp, s.mcpBindings); err != nil {
			return nil, err
		}
	}
	reg, err := s.rebuild(mcpTools)
	if err != nil {
		return nil, err
	}
	reg.mcpGen = gen
	s.tools.Store(reg)
	if err := s.checkNamed(opts); err != nil {
		return nil, err
	}
	if opts.Ledger == nil {
		s.log.Warn("the call ledger is in memory only: without NATS, a restarted or second replica of the action stage may run a tool call again")
	}
	return s, nil
}

// checkNamed refuses a name in RequireApproval, NoApproval, Idempotent or Alternatives that no
// tool has, naming it and the tools there are: a misspelt or stale name would silently leave
// the tool it meant unguarded, still waiting for approvals, never run again after a crash, or
// without its fallback. It also refuses an alternative that requires approval, which the
// orchestrator never tries.
func (s *Service) checkNamed(opts Options) error {
	tools := s.tools.Load()
	unknown := func(what string) error {
		return fmt.Errorf("%s, but no tool has that name (tools: %s)",
			what, strings.Join(tools.names, ", "))
	}
	for _, list := range []struct {
		names []string
		what  string
	}{
		{opts.RequireApproval, "approval is required for %q"},
		{opts.NoApproval, "%q is exempt from approval"},
		{opts.Idempotent, "%q is declared idempotent"},
	} {
		for _, name := range list.names {
			if _, ok := tools.lookup(name); !ok {
				return unknown(fmt.Sprintf(list.what, name))
			}
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(opts.Alternatives)) {
		if _, ok := tools.lookup(tool); !ok {
			return unknown(fmt.Sprintf("alternatives are configured for %q", tool))
		}
		for _, alt := range opts.Alternatives[tool] {
			reg, ok := tools.lookup(alt)
			if !ok {
				return unknown(fmt.Sprintf("%q is configured as an alternative of %q", alt, tool))
			}
			if reg.def.GetRequiresApproval() {
				return fmt.Errorf("%q is configured as an alternative of %q, but it requires approval, and alternatives are tried only when they run without one (tools.no_approval exempts a tool)", alt, tool)
			}
		}
	}
	return nil
}

// checkExempt refuses a name in noApproval of an MCP tool of r its server's binding requires
// approval for (MCPBinding.RequiresApproval).
func checkExempt(r *registry, noApproval []string) error {
	for _, name := range noApproval {
		if reg, _ := r.lookup(name); reg != nil {
			if m, ok := reg.tool.(*mcpTool); ok && m.listed {
				return fmt.Errorf("tool %q is listed both as requiring approval "+
					"(by its MCP server's binding) and as exempt from it", name)
			}
		}
	}
	return nil
}

// registry returns the tools: with Options.MCP, rebuilt first when a server's tools changed
// since the registry was built. A list the service cannot take (two tools of one name, a
// schema that does not compile) is logged, and the last registry stays.
func (s *Service) registry() *registry {
	r := s.tools.Load()
	if s.mcp == nil || r.mcpGen == s.mcp.Generation() {
		return r
	}
	s.relisting.Lock()
	defer s.relisting.Unlock()
	if r = s.tools.Load(); r.mcpGen == s.mcp.Generation() {
		return r // rebuilt meanwhile
	}
	gen := s.mcp.Generation() // before the list: a change while it is read is seen next time
	tools, err := mcpTools(s.mcp, s.mcpBindings, false)
	var next *registry
	if err == nil {
		next, err = s.rebuild(tools)
	}
	if err != nil {
		s.log.Error("an MCP server's tools changed, and the new list is refused; "+
			"the last one stays", "err", err)
		next = r.withGen(gen)
	}
	next.mcpGen = gen
	s.tools.Store(next)
	return next
}

// Serving reports whether the service can execute calls, and returns a channel that is closed
// when that may have changed; it implements server.HealthSource. Every call reads and writes
// the ledger before its tool runs, so with a ledger that can be out of reach (a KVLedger, while
// its NATS connection is down) the service serves only while the ledger can be reached, and
// its health is NOT_SERVING meanwhile: callers and readiness probes move to the replicas that
// can run calls, and it serves again once the connection is back. The in-memory ledger is
// always there.
func (s *Service) Serving() (bool, <-chan struct{}) {
	if h, ok := s.ledger.(reachable); ok {
		return h.Serving()
	}
	return true, nil
}

// reachable is a Ledger that tells whether it can be reached (KVLedger.Serving).
type reachable interface {
	Ledger
	Serving() (bool, <-chan struct{})
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	actionv1.RegisterActionServiceServer(g, s)
}

// ListTools returns every tool, sorted by name, with its schema and its approval and
// idempotency flags, and the list's version; to a caller that holds the list of that version
// already (known_version), only that it is unchanged.
func (s *Service) ListTools(_ context.Context, req *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	tools := s.registry()
	if v := req.GetKnownVersion(); v != "" && v == tools.version {
		return &actionv1.ListToolsResponse{Version: v, Unchanged: true}, nil
	}
	return &actionv1.ListToolsResponse{Tools: tools.definitions(), Version: tools.version}, nil
}
