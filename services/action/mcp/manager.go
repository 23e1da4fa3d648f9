package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool an MCP server offers.
type Tool struct {
	// Server is the name of the server that offers the tool.
	Server string
	// Name is the tool's name on its server.
	Name string
	// Description tells the model what the tool does.
	Description string
	// InputSchema is the JSON schema of the tool's arguments.
	InputSchema map[string]any
	// Annotations are the server's hints about the tool's behaviour; nil when it gave none.
	Annotations *Annotations
}

// Annotations are the behaviour hints of an MCP tool (MCP ToolAnnotations).
type Annotations struct {
	// ReadOnly is true when the tool does not modify its environment.
	ReadOnly bool
	// Destructive, when set, says whether the tool may destroy data (meaningful when not
	// ReadOnly).
	Destructive *bool
}

// toolOf converts the SDK's description of a tool.
func toolOf(server string, t *sdk.Tool) Tool {
	tool := Tool{Server: server, Name: t.Name, Description: t.Description}
	if schema, ok := t.InputSchema.(map[string]any); ok {
		tool.InputSchema = schema
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = &Annotations{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint}
	}
	return tool
}

// UserMetaKey is the key of a tools/call request's _meta that names the user the call acts
// for, when one is known: a server that serves many users reads it there rather than trusting
// a user the model put in the arguments. The prefix is a domain agentmesh owns, as the MCP
// specification asks of _meta keys that are not its own.
const UserMetaKey = "agentmesh.dev/user_id"

// ApproverMetaKey is the key of a tools/call request's _meta that names who approved a call of
// a tool that requires approval, as the orchestrator's approval grant signs it, so that the
// server (and its audit) knows who let the call through.
const ApproverMetaKey = "agentmesh.dev/approved_by"

// Principals are who a call acts for and who approved it; "" is none.
type Principals struct {
	// User is the user the call acts for, sent under UserMetaKey.
	User string
	// Approver is who approved the call, sent under ApproverMetaKey.
	Approver string
}

// meta is the _meta of a tools/call request made for who: nil when it names no one.
func (who Principals) meta() sdk.Meta {
	var meta sdk.Meta
	if who.User != "" {
		meta = sdk.Meta{UserMetaKey: who.User}
	}
	if who.Approver != "" {
		if meta == nil {
			meta = sdk.Meta{}
		}
		meta[ApproverMetaKey] = who.Approver
	}
	return meta
}

// Manager holds the sessions of a fixed set of MCP servers. It is safe for concurrent use.
type Manager struct {
	servers map[string]*server
	order   []*server // as given to Start
	gen     atomic.Uint64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start connects to every server concurrently and lists their tools. When a server cannot be
// started or reached, Start stops the others and returns an error naming each server that
// failed and why. The manager supervises the servers until Close, and lists a server's tools
// again when it says they changed (notifications/tools/list_changed) and when it is restarted.
func Start(ctx context.Context, servers []Server, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	m := &Manager{servers: make(map[string]*server, len(servers))}
	for _, spec := range servers {
		if err := spec.validate(); err != nil {
			return nil, err
		}
		if _, dup := m.servers[spec.Name]; dup {
			return nil, fmt.Errorf("MCP server %q is listed twice", spec.Name)
		}
		s := newServer(spec, opts, func() { m.gen.Add(1) })
		m.servers[spec.Name] = s
		m.order = append(m.order, s)
	}
	superviseCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel

	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range m.order {
		wg.Go(func() { errs[i] = s.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, m.Close())
	}
	for _, s := range m.servers {
		sess, _ := s.current()
		m.wg.Go(func() { s.supervise(superviseCtx, sess) })
		m.wg.Go(func() { s.watchTools(superviseCtx) })
	}
	return m, nil
}

// Tools returns the tools of every server, in the order the servers were given and each
// server last listed them: a server being restarted counts with the tools it had.
func (m *Manager) Tools() []Tool {
	var tools []Tool
	for _, s := range m.order {
		tools = append(tools, s.toolList()...)
	}
	return tools
}

// Generation counts the changes of Tools: it grows each time a server's list of tools changed
// (it said so, or it was restarted with other tools), so that a caller holding what Tools
// returned knows when to ask again.
func (m *Manager) Generation() uint64 {
	return m.gen.Load()
}

// Call calls a tool of a server with arguments and returns the text of its result; a tool the
// server's last list lacks (it removed it) is an error wrapping ErrNoTool that names the tool
// and the server, and nothing is sent. Who the call acts for and who approved it are sent in
// the request's _meta, under UserMetaKey and ApproverMetaKey, each only when known.
// A result the server marks as an error is a *ToolError; a result whose text is over
// MaxResultBytes is an error, whether or not it is marked; a server that is being restarted
// fails the call at once with an error wrapping ErrUnavailable, as does a remote server that
// cannot be reached, no longer knows the session or did not take the call (it answered 429 or
// 503). A call whose connection ends while it runs (a stdio child that exits) fails saying the
// connection was lost: the server may have run it.
func (m *Manager) Call(ctx context.Context, serverName, tool string, args map[string]any,
	who Principals) (string, error) {
	s, ok := m.servers[serverName]
	if !ok {
		return "", fmt.Errorf("unknown MCP server %q", serverName)
	}
	sess, err := s.current()
	if err != nil {
		return "", err
	}
	if !s.offers(tool) {
		return "", noToolError(fmt.Sprintf("MCP server %q has no tool %q (its tools: %s)",
			serverName, tool, s.toolNames()))
	}
	if args == nil {
		args = map[string]any{} // tools/call wants an object, never null
	}
	params := &sdk.CallToolParams{Name: tool, Arguments: args, Meta: who.meta()}
	res, err := sess.CallTool(ctx, params)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, sdk.ErrConnectionClosed) && strings.Contains(err.Error(), clientClosing):
		// The session was ending (its server stopped) before the call could be sent; its
		// supervisor marks it down once the session has closed, which may take a while.
		s.lost(sess)
		return "", &unavailableError{server: serverName, reason: "its session ended; restarting"}
	case errors.Is(err, sdk.ErrConnectionClosed):
		s.lost(sess)
		return "", fmt.Errorf("MCP server %q: the connection was lost during the call: %w", serverName, s.redact(err))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// A stdio child that exits during the call ends its stdout; its supervisor sees the
		// session end and restarts it.
		return "", fmt.Errorf("MCP server %q: the connection was lost during the call: %w", serverName, s.redact(err))
	case isFrameTooLarge(err):
		msg := frameTooLargeMessage(err)
		return "", fmt.Errorf("MCP server %q: tool %s: %s", serverName, tool, msg)
	case notSent(err):
		return "", fmt.Errorf("MCP server %q: %w", serverName, unsentError{s.redact(err)})
	default:
		return "", fmt.Errorf("MCP server %q: %w", serverName, s.redact(err))
	}
	text := resultText(res)
	if len(text) > MaxResultBytes {
		return "", fmt.Errorf("MCP server %q: tool %s: the result is larger than %d bytes (%d)", serverName, tool, MaxResultBytes, len(text))
	}
	if res.IsError {
		return "", &ToolError{Text: text}
	}
	return text, nil
}

// noToolError is the failure of a call of a tool its server does not offer; it wraps
// ErrNoTool.
type noToolError string

func (e noToolError) Error() string { return string(e) }

// Unwrap returns ErrNoTool.
func (e noToolError) Unwrap() error { return ErrNoTool }

// clientClosing is the message of the SDK's JSON-RPC error for a call made on a connection that
// is shutting down, which it refuses before sending anything. The SDK quotes it in the
// ErrConnectionClosed it returns without wrapping it, so only its text tells such a call from
// one that was in flight when the connection ended.
const clientClosing = "client is closing"

// notSent reports whether a call failed before its server could run anything: a remote server
// whose connection could not be made (it is down, or being redeployed), one that no longer
// knows the session (it restarted, and answered 404), or one that did not take the call (it
// answered 429 or 503: busyTransport).
func notSent(err error) bool {
	var op *net.OpError
	var busy *busyError
	return errors.Is(err, sdk.ErrSessionMissing) || (errors.As(err, &op) && op.Op == "dial") ||
		errors.As(err, &busy)
}

// unsentError is the failure of a call its server did not run, which wraps ErrUnavailable:
// trying again is safe.
type unsentError struct{ error }

// Unwrap returns ErrUnavailable and the failure.
func (e unsentError) Unwrap() []error { return []error{ErrUnavailable, e.error} }

// Close stops supervising, closes every session in parallel (stopping stdio children) and
// waits for the supervisors to end. A child that had to be signalled to stop is not an error;
// failing to stop one is.
func (m *Manager) Close() error {
	m.cancel()
	errs := make(chan error, len(m.servers))
	for _, s := range m.servers {
		go func() { errs <- s.close() }() // in parallel: each may wait out its grace
	}
	var err error
	for range m.servers {
		err = errors.Join(err, <-errs)
	}
	m.wg.Wait()
	return err
}
