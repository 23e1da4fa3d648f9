package mcp

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Options.
const (
	// DefaultStartTimeout bounds connecting to a server and listing its tools.
	DefaultStartTimeout = 30 * time.Second
	// DefaultRestartBackoff is the delay before the first restart of a server that stopped.
	DefaultRestartBackoff = 500 * time.Millisecond
	// MaxRestartBackoff caps the delay between restarts.
	MaxRestartBackoff = 30 * time.Second
	// DefaultTerminateGrace is how long closing a stdio server waits for it to exit after
	// closing its stdin, before SIGTERM and then SIGKILL.
	DefaultTerminateGrace = 2 * time.Second
	// MaxResultBytes is the largest text of a tool result Call returns, as for a REST tool's
	// body: a larger one is an error, since it would not fit in the mesh's messages.
	MaxResultBytes = 8 << 20
)

// ErrUnavailable marks a call refused because its server is not running (it is being
// restarted), or, for a remote server, cannot be reached, no longer knows the session or did
// not take the call (it answered 429 or 503); the server ran nothing, so trying again later is safe.
var ErrUnavailable = errors.New("MCP server unavailable")

// ErrNoTool marks a call of a tool its server does not offer (it removed it from its list):
// nothing was sent to the server.
var ErrNoTool = errors.New("the MCP server does not offer the tool")

// Server describes one MCP server: a stdio server (Command) or a remote one (URL).
type Server struct {
	// Name identifies the server; its tools are namespaced by it.
	Name string
	// Command starts a stdio server; it is looked up in the PATH of Env.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env is the child's whole environment; PATH is added from this process when absent.
	Env map[string]string
	// Dir is the child's working directory; empty means this process's.
	Dir string
	// Limits are the child's resource limits.
	Limits Limits
	// URL is a remote server's streamable HTTP endpoint.
	URL string
	// Headers are sent with every request to a remote server.
	Headers map[string]string
}

// Limits are resource limits of a stdio server's process; zero leaves a limit as inherited.
// They are set with prlimit(2) right after the child starts, before the MCP handshake, and the
// child's own children inherit them. Core dumps are always disabled, so a crash cannot write the
// child's memory (and the secrets in its environment) to disk.
type Limits struct {
	// AddressSpaceBytes caps the virtual memory (RLIMIT_AS). JavaScript engines reserve more
	// address space than they use (a bare Node process maps about 0.7 GiB); WebAssembly-heavy
	// servers may need the limit lifted.
	AddressSpaceBytes uint64
	// CPUSeconds caps the CPU time (RLIMIT_CPU); the child is killed when it runs out, and the
	// manager restarts it.
	CPUSeconds uint64
	// Processes caps how many more processes and threads the child and its descendants may
	// start beyond those its user runs when it starts. RLIMIT_NPROC counts every task of the
	// user, not of the process tree, so the limit is set to the user's current count plus
	// Processes: a fork bomb stops there, and an absolute value low enough to stop it would
	// also stop an ordinary server on a busy host.
	Processes uint64
	// OpenFiles caps the open file descriptors (RLIMIT_NOFILE).
	OpenFiles uint64
	// FileSizeBytes caps the size of files the child writes (RLIMIT_FSIZE).
	FileSizeBytes uint64
}

// DefaultLimits are the limits of servers whose configuration sets none: an hour of CPU, 8 GiB
// of address space, 256 more processes or threads and 1024 open files.
var DefaultLimits = Limits{CPUSeconds: 3600, AddressSpaceBytes: 8 << 30, Processes: 256, OpenFiles: 1024}

// validate checks that s names exactly one kind of server.
func (s Server) validate() error {
	switch {
	case s.Name == "":
		return errors.New("MCP server without a name")
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("MCP server %q: needs a command (stdio) or a url (remote)", s.Name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("MCP server %q: sets both a command and a url", s.Name)
	}
	return nil
}

// Options configures a Manager.
type Options struct {
	// Logger logs server restarts and the children's stderr; nil means slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds connecting to one server and listing its tools; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// RestartBackoff is the delay before the first restart; 0 means DefaultRestartBackoff.
	RestartBackoff time.Duration
	// TerminateGrace is how long closing a stdio server waits before signalling it; 0 means
	// DefaultTerminateGrace.
	TerminateGrace time.Duration
}

// withDefaults returns o with zero values replaced by the defaults.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = DefaultRestartBackoff
	}
	if o.TerminateGrace <= 0 {
		o.TerminateGrace = DefaultTerminateGrace
	}
	return o
}
