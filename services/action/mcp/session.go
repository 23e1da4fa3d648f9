package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientVersion is the version the client reports to servers.
const clientVersion = "1.0.0"

// server is one supervised MCP server: its live session, or why there is none.
type server struct {
	spec   Server
	opts   Options
	log    *slog.Logger
	client *sdk.Client
	// remote and pool are a remote server's transport and connection pool.
	remote *sdk.StreamableClientTransport
	pool   *http.Transport
	// redactURL takes a remote server's URL out of a message (urlRedactor); nil for stdio.
	redactURL func(string) string

	// relist is signalled when the server says its tools changed
	// (notifications/tools/list_changed); watchTools lists them again.
	relist chan struct{}
	// changed is called after the server's list of tools changed (Manager.Generation); a
	// listing equal to the last one is no change.
	changed func()

	mu      sync.Mutex
	session *sdk.ClientSession
	stderr  *tailWriter // the stdio session's stderr
	down    error       // why there is no session; an *unavailableError
	tools   []Tool      // as the server last listed them, kept while it restarts
}

// unavailableError says why a server cannot take calls.
type unavailableError struct {
	server, reason string
}

// Error names the server and the reason.
func (e *unavailableError) Error() string {
	return fmt.Sprintf("MCP server %q is unavailable: %s", e.server, e.reason)
}

// Unwrap returns ErrUnavailable.
func (e *unavailableError) Unwrap() error { return ErrUnavailable }

// newServer returns the supervisor of spec, not yet connected; changed is called after its
// list of tools changed.
func newServer(spec Server, opts Options, changed func()) *server {
	log := opts.Logger.With("mcp_server", spec.Name)
	s := &server{
		spec:    spec,
		opts:    opts,
		log:     log,
		relist:  make(chan struct{}, 1),
		changed: changed,
		down:    &unavailableError{server: spec.Name, reason: "not started"},
	}
	// No capabilities: the action service offers servers no roots, sampling or elicitation.
	s.client = sdk.NewClient(&sdk.Implementation{Name: "agentmesh", Version: clientVersion},
		&sdk.ClientOptions{Logger: log, Capabilities: &sdk.ClientCapabilities{},
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
				// Not listed here: the notification's handler runs on the session's connection.
				select {
				case s.relist <- struct{}{}:
				default: // a listing is due already
				}
			}})
	if spec.URL != "" {
		var client *http.Client
		client, s.pool = newHTTPClient(spec.URL, spec.Headers)
		// The SDK's own limit of an event stays, above the client's (limitTransport), for what
		// that does not check (an event it hands on is never over its limit).
		s.remote = &sdk.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: client,
			MaxEventSize: 2 * MaxFrameBytes}
		s.redactURL = urlRedactor(spec.URL)
	}
	return s
}

// start connects to the server and lists its tools, both within one start timeout.
func (s *server) start(ctx context.Context) error {
	listCtx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	sess, stderr, err := s.connect(listCtx, ctx)
	if err != nil {
		return fmt.Errorf("%w%s", err, stderr.suffix())
	}
	tools, err := s.listTools(listCtx, ctx, sess)
	if err != nil {
		return errors.Join(err, s.redact(sess.Close()))
	}
	s.setSession(sess, stderr, tools)
	return nil
}

// listTools lists the tools of sess (tools/list) before ctx's deadline, the start timeout
// within parent.
func (s *server) listTools(ctx, parent context.Context, sess *sdk.ClientSession) ([]Tool, error) {
	var tools []Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			err = s.timedOut(ctx, parent, "answer tools/list", s.redact(err))
			return nil, fmt.Errorf("MCP server %q: listing tools: %w", s.spec.Name, err)
		}
		tools = append(tools, toolOf(s.spec.Name, t))
	}
	return tools, nil
}

// watchTools lists the server's tools again each time it says they changed, until ctx is
// done. A listing that fails keeps the last list, logged; one that ends with the session is
// left to the restart, which lists them too.
func (s *server) watchTools(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.relist:
		}
		sess, err := s.current()
		if err != nil {
			continue // down: the restart lists the tools
		}
		listCtx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
		tools, err := s.listTools(listCtx, ctx, sess)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("MCP server said its tools changed, and listing them failed; "+
				"keeping the last list", "err", err)
			continue
		}
		s.mu.Lock()
		// Not restarted meanwhile, with a list of its own.
		changed := s.session == sess && !reflect.DeepEqual(s.tools, tools)
		if changed {
			s.tools = tools
		}
		s.mu.Unlock()
		if changed {
			s.log.Info("MCP server's tools changed", "tools", len(tools))
			s.changed()
		}
	}
}

// toolNames returns the names of the server's last list, comma-separated, or "none".
func (s *server) toolNames() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tools) == 0 {
		return "none"
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// toolList returns the tools the server last listed.
func (s *server) toolList() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// offers reports whether the server's last list has the tool.
func (s *server) offers(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.tools, func(t Tool) bool { return t.Name == tool })
}

// connect starts (stdio) or reaches (remote) the server and completes the MCP handshake
// before ctx's deadline, the start timeout within parent (start lists the tools before the
// same deadline). It returns a stdio child's stderr, also on failure, for the operator: the
// error does not quote it, since calls may show errors to the model.
func (s *server) connect(ctx, parent context.Context) (*sdk.ClientSession, *tailWriter, error) {
	if s.remote != nil {
		sess, err := s.client.Connect(ctx, s.remote, nil)
		if err != nil {
			err = s.timedOut(ctx, parent, "answer the MCP handshake", s.redact(err))
			return nil, nil, fmt.Errorf("MCP server %q: connecting to %s: %w", s.spec.Name, s.redactURL(s.spec.URL), err)
		}
		return sess, nil, nil
	}
	stderr := &tailWriter{log: s.log}
	cmd, err := command(s.spec)
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server %q: %w", s.spec.Name, err)
	}
	t := &commandTransport{cmd: cmd, stderr: stderr, log: s.log, limits: s.spec.Limits,
		grace: s.opts.TerminateGrace}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		// The command, not its arguments, which may hold a credential (a database URL with its
		// password): calls may show this error to the model.
		err = s.timedOut(ctx, parent, "answer the MCP handshake", err)
		return nil, stderr, fmt.Errorf("MCP server %q: starting %s: %w", s.spec.Name, s.spec.Command, err)
	}
	return sess, stderr, nil
}

// timedOut says that the server did not do what within the start timeout when that timeout,
// ctx's and not parent's, cut err's operation short; else it returns err.
func (s *server) timedOut(ctx, parent context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return fmt.Errorf("did not %s within %s (the start timeout): %w", what, s.opts.StartTimeout, err)
	}
	return err
}

// setSession makes sess, which listed tools, the live session.
func (s *server) setSession(sess *sdk.ClientSession, stderr *tailWriter, tools []Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.stderr, s.down, s.tools = sess, stderr, nil, tools
}

// setDown records that there is no session, and why.
func (s *server) setDown(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.stderr = nil, nil
	s.down = &unavailableError{server: s.spec.Name, reason: reason}
}

// current returns the live session, or an error wrapping ErrUnavailable that says why there
// is none.
func (s *server) current() (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return nil, s.down
	}
	return s.session, nil
}

// supervise waits for sess to end and restarts the server, until ctx is done. A restart
// waits RestartBackoff, doubling after each failed or short-lived attempt up to
// MaxRestartBackoff; a session that lived longer than that resets the delay.
func (s *server) supervise(ctx context.Context, sess *sdk.ClientSession) {
	delay := s.opts.RestartBackoff
	for {
		started := time.Now()
		waitErr := sess.Wait()
		if ctx.Err() != nil {
			return // closing
		}
		s.mu.Lock()
		stderr := s.stderr
		s.mu.Unlock()
		reason := "its session ended"
		if err := s.redact(sess.Close()); err != nil { // reaps a stdio child: its exit status
			reason = "it stopped (" + err.Error() + ")"
		} else if waitErr = s.redact(waitErr); waitErr != nil {
			reason = "its session ended (" + waitErr.Error() + ")"
		}
		if time.Since(started) >= MaxRestartBackoff {
			delay = s.opts.RestartBackoff
		}
		s.log.Warn("MCP server stopped; restarting", "reason", stderr.explain(reason), "backoff", delay)
		if sess = s.restart(ctx, reason, &delay); sess == nil {
			return
		}
	}
}

// restart reconnects with backoff until it succeeds, returning the new live session, or ctx
// is done, returning nil. delay is the next wait, doubled after each attempt. The restarted
// server's tools are listed again, within the start timeout, before it takes calls: it may
// offer other tools than before (a new version of it), and failing to list them fails the
// attempt.
func (s *server) restart(ctx context.Context, reason string, delay *time.Duration) *sdk.ClientSession {
	for attempt := 1; ; attempt++ {
		s.setDown(fmt.Sprintf("%s; restart %d in %s", reason, attempt, *delay))
		timer := time.NewTimer(*delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		*delay = min(*delay*2, MaxRestartBackoff)
		connectCtx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
		sess, stderr, err := s.connect(connectCtx, ctx)
		var tools []Tool
		if err == nil {
			if tools, err = s.listTools(connectCtx, ctx, sess); err != nil {
				err = errors.Join(err, s.redact(sess.Close()))
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			reason = "restarting failed: " + err.Error()
			s.log.Warn("MCP server restart failed", "attempt", attempt, "err", stderr.explain(err.Error()))
			continue
		}
		s.mu.Lock()
		if ctx.Err() != nil { // closed while connecting
			s.mu.Unlock()
			_ = sess.Close()
			return nil
		}
		changed := !reflect.DeepEqual(s.tools, tools)
		s.session, s.stderr, s.down, s.tools = sess, stderr, nil, tools
		s.mu.Unlock()
		if changed {
			s.changed()
		}
		s.log.Info("MCP server restarted", "attempt", attempt, "tools", len(tools))
		return sess
	}
}

// lost closes sess after a call found its connection closed, so that the supervisor
// restarts the server.
func (s *server) lost(sess *sdk.ClientSession) {
	_ = sess.Close()
}

// close ends the live session (stopping a stdio child) and releases the connection pool.
// The supervisor's context must be cancelled first.
func (s *server) close() error {
	s.mu.Lock()
	sess := s.session
	s.session = nil
	s.down = &unavailableError{server: s.spec.Name, reason: "closed"}
	s.mu.Unlock()
	var err error
	if sess != nil {
		err = sess.Close()
		switch exit := (*exec.ExitError)(nil); {
		case errors.As(err, &exit):
			// Told to stop (stdin closed, then SIGTERM): how it ended is no failure to close.
			s.log.Debug("MCP server stopped", "status", exit.String())
			err = nil
		case err != nil && s.remote != nil:
			// Ending a remote session is a courtesy (an HTTP DELETE) to a server that may be gone.
			s.log.Debug("MCP server session not ended cleanly", "err", s.redact(err))
			err = nil
		}
	}
	if s.pool != nil {
		s.pool.CloseIdleConnections()
	}
	return err
}
