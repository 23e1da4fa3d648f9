package action

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"github.com/agentmesh/agentmesh/services/action/rest"
)

// OptionsFromConfig builds the service's options from the configuration: the tool timeout,
// the approval, idempotency and alternatives lists, the queues, the REST tools, the tools of the MCP
// servers, which it starts (stdio, with mcp.DefaultLimits and the configured overrides) or
// connects to (remote), and, when nats.url is set, the KVLedger on a connection to that server (made
// with events.Connect, so it reconnects forever). The caller adds what the configuration
// does not hold (the memory client, providers of traces and metrics, the logger) and must
// call stop when the service stops: it stops the MCP servers and closes the NATS connection
// and idle HTTP connections.
//
// A REST tool whose templates do not parse, or an approval list naming a tool its MCP server
// lacks, is an error wrapping exitcode.Invalid, and a REST tool's output schema that does not
// compile one wrapping exitcode.Schema; an MCP server that cannot be started or
// reached is an error wrapping exitcode.Unavailable that names the server and what failed.
func OptionsFromConfig(ctx context.Context, cfg *config.Config) (opts Options, stop func() error, err error) {
	opts = Options{
		RequireApproval: cfg.Tools.RequireApproval,
		NoApproval:      cfg.Tools.NoApproval,
		Idempotent:      cfg.Tools.Idempotent,
		Alternatives:    cfg.Tools.Alternatives,
		DefaultTimeout:  time.Duration(cfg.Defaults.ToolTimeoutMS) * time.Millisecond,
		Queues:          make(map[string]int, len(cfg.Queues)),
	}
	for name, q := range cfg.Queues {
		opts.Queues[name] = q.Concurrent
	}
	if path := cfg.Approvals.VerifyKey; path != "" {
		if opts.Grants, err = grant.LoadVerifier(path); err != nil {
			return Options{}, nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("approvals.verify_key: %w", err))
		}
	}

	pool := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: pool}
	for _, name := range slices.Sorted(maps.Keys(cfg.RestTools)) {
		t := cfg.RestTools[name]
		tool, err := NewRESTTool(RESTTool{
			Name:        name,
			Description: t.Description,
			Request: rest.Spec{
				Method:  t.Method,
				URL:     t.URL,
				Headers: t.Headers,
				Body:    t.Body,
			},
			InputSchema:      t.InputSchema,
			OutputSchema:     t.OutputSchema,
			Queue:            t.Queue,
			RequiresApproval: t.RequiresApproval,
		}, client)
		if err != nil {
			err = fmt.Errorf("rest_tools.%s: %w", name, err)
			return Options{}, nil, exitcode.Default(exitcode.Invalid, err) // or its schema's Schema
		}
		opts.Tools = append(opts.Tools, tool)
	}

	servers := make([]mcp.Server, 0, len(cfg.MCPServers))
	bindings := make(map[string]MCPBinding, len(cfg.MCPServers))
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		s := cfg.MCPServers[name]
		servers = append(servers, mcp.Server{
			Name:    name,
			Command: s.Command,
			Args:    s.Args,
			Env:     s.Env,
			Dir:     s.Dir,
			Limits:  mcpLimits(s.Limits),
			URL:     s.URL,
			Headers: s.Headers,
		})
		bindings[name] = MCPBinding{Queue: s.Queue, RequiresApproval: s.RequiresApproval}
	}
	stop = func() error {
		pool.CloseIdleConnections()
		return nil
	}
	if cfg.NATS.URL != "" {
		nc, err := events.Connect(cfg.NATS.URL, "agentmesh-action")
		if err != nil {
			code := exitcode.Unavailable
			if errors.Is(err, config.ErrInvalid) { // a URL that does not parse
				code = exitcode.Invalid
			}
			return Options{}, nil, errors.Join(exitcode.Wrap(code, err), stop())
		}
		closeHTTP := stop
		stop = func() error {
			nc.Close()
			return closeHTTP()
		}
		ledger, err := NewKVLedger(nc, KVLedgerOptionsFromConfig(cfg))
		if err != nil {
			return Options{}, nil, errors.Join(exitcode.Wrap(exitcode.Unavailable, err), stop())
		}
		opts.Ledger = ledger
		closeConn := stop
		stop = func() error { return errors.Join(ledger.Close(), closeConn()) } // after the calls drained
	}
	if len(servers) == 0 {
		return opts, stop, nil
	}
	manager, err := mcp.Start(ctx, servers, mcp.Options{})
	if err != nil {
		return Options{}, nil, errors.Join(exitcode.Wrap(exitcode.Unavailable, err), stop())
	}
	closeRest := stop
	stop = func() error {
		return errors.Join(manager.Close(), closeRest())
	}
	if _, err := MCPTools(manager, bindings); err != nil { // New lists them again, as they change
		return Options{}, nil, errors.Join(exitcode.Wrap(exitcode.Invalid, err), stop())
	}
	opts.MCP, opts.MCPBindings = manager, bindings
	return opts, stop, nil
}

// DrainTimeout is how long a stopping action stage lets its calls in flight finish by default
// (pkg/server.WithDrainTimeout): a call with the default tool timeout, defaults.tool_timeout_ms
// (its wait for a queue's slot included), received just before the stage was told to stop, and
// server.DrainMargin to record its outcome and answer. A call given a longer timeout_ms is cut off at
// the drain's end (and, unless its tool is idempotent, answered as interrupted when retried).
func DrainTimeout(cfg *config.Config) time.Duration {
	return server.DrainFor(time.Duration(cfg.Defaults.ToolTimeoutMS) * time.Millisecond)
}

// KVLedgerOptionsFromConfig returns the settings of the call ledger's bucket: nats.replicas,
// nats.storage and durability.call_record_ttl_ms.
func KVLedgerOptionsFromConfig(cfg *config.Config) KVLedgerOptions {
	return KVLedgerOptions{
		Replicas: cfg.NATS.Replicas,
		Storage:  events.Storage(cfg.NATS),
		TTL:      time.Duration(cfg.Durability.CallRecordTTLMS) * time.Millisecond,
	}
}

// mcpLimits are the resource limits of a stdio server: mcp.DefaultLimits with the configured
// overrides, where -1 lifts a limit.
func mcpLimits(c config.MCPLimits) mcp.Limits {
	l := mcp.DefaultLimits
	for _, o := range []struct {
		value int64
		limit *uint64
	}{
		{c.CPUSeconds, &l.CPUSeconds}, {c.AddressSpaceBytes, &l.AddressSpaceBytes}, {c.Processes, &l.Processes},
		{c.OpenFiles, &l.OpenFiles}, {c.FileSizeBytes, &l.FileSizeBytes},
	} {
		switch {
		case o.value == -1:
			*o.limit = 0
		case o.value > 0:
			*o.limit = uint64(o.value)
		}
	}
	return l
}
