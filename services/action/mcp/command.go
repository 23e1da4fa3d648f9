package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// command returns the child process of a stdio server: the command resolved in the child's
// own PATH, the configured environment only, the working directory and the process
// attributes of this system. Its stderr is set when it starts (commandTransport).
func command(s Server) (*exec.Cmd, error) {
	env := childEnv(s.Env)
	path, err := lookPath(s.Command, s.Dir, pathOf(env))
	if err != nil {
		return nil, err
	}
	return &exec.Cmd{
		Path:        path,
		Args:        append([]string{s.Command}, s.Args...),
		Env:         env,
		Dir:         s.Dir,
		SysProcAttr: sysProcAttr(),
	}, nil
}

// childEnv returns env as KEY=value pairs, sorted, plus this process's PATH when env has
// none. Nothing else of this process's environment is passed on.
func childEnv(env map[string]string) []string {
	out := make([]string, 0, len(env)+1)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	if _, ok := env["PATH"]; !ok {
		if p, ok := os.LookupEnv("PATH"); ok {
			out = append(out, "PATH="+p)
		}
	}
	return out
}

// pathOf returns the PATH of a KEY=value environment.
func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds the executable of name: a name with a path separator is taken as is
// (relative to dir when relative); a bare name is searched in the absolute directories of
// path, the child's PATH.
func lookPath(name, dir, path string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		full := name
		if !filepath.IsAbs(full) && dir != "" {
			full = filepath.Join(dir, name)
		}
		if err := executable(full); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue // a relative PATH entry would depend on the working directory
		}
		if full := filepath.Join(d, name); executable(full) == nil {
			return full, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %q", name, path)
}

// executable returns an error unless path is a regular file with an execute bit.
func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// commandTransport starts a stdio server, applies its resource limits before the MCP
// handshake and, closing, stops what is left of the server's process group.
type commandTransport struct {
	cmd    *exec.Cmd
	stderr io.Writer
	log    *slog.Logger // logs the lines of its stdout that are no messages (frameReader)
	limits Limits
	grace  time.Duration
}

// Connect starts the child and connects to it over its stdin and stdout. The child's stderr
// is a pipe this process reads, not a writer exec copies to: the server's own children inherit
// it, and exec.Cmd.Wait, which closing the connection calls, would wait for them to close it.
func (t *commandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	t.cmd.Stderr = w
	conn, err := t.start(ctx)
	_ = w.Close() // the child has its own copy
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(t.stderr, r)
	}()
	pid := t.cmd.Process.Pid
	c := &groupConn{Connection: conn, pid: pid, watched: watchLeader(pid), stderr: r, copied: copied, grace: t.grace}
	if err := applyLimits(c.pid, t.limits); err != nil {
		return nil, errors.Join(fmt.Errorf("setting resource limits: %w", err), c.Close())
	}
	return c, nil
}

// start starts the child and connects to it over its stdin and stdout as sdk.CommandTransport
// does, but with the child's messages read through a frameReader: the SDK's reader ends the
// whole connection on a message over its limit, which the frameReader replaces, unread, by an
// error answer to its call. The SDK's limit stays, above MaxFrameBytes, for what the
// frameReader does not check (a message it hands on is never over its limit).
func (t *commandTransport) start(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	transport := &sdk.IOTransport{
		// Closing the connection closes stdin, not stdout: the child ends it when it exits.
		Reader:        nopCloser{newFrameReader(stdout, MaxFrameBytes, t.log)},
		Writer:        &childInput{WriteCloser: stdin, cmd: t.cmd, grace: t.grace},
		MaxLineLength: 2 * MaxFrameBytes,
	}
	return transport.Connect(ctx)
}

// nopCloser is a reader whose Close does nothing.
type nopCloser struct{ io.Reader }

// Close does nothing.
func (nopCloser) Close() error { return nil }

// killWait is how long a stdio server's Close waits for it to exit after SIGKILL.
const killWait = 5 * time.Second

// childInput is a stdio server's stdin, whose Close stops the server as the MCP specification
// says a client does (and sdk.CommandTransport did): it closes stdin, waits for the server to
// exit, and after the grace sends SIGTERM, and after another SIGKILL.
type childInput struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

// Close stops the server and returns how it exited.
func (c *childInput) Close() error {
	if err := c.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func(d time.Duration) (error, bool) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-timer.C:
			return nil, false
		}
	}
	if err, ok := wait(c.grace); ok {
		return err
	}
	// A server that exits just as the grace runs out is done (os.ErrProcessDone) by the time
	// it is signalled: its exit is waiting in exited.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err == nil || errors.Is(err, os.ErrProcessDone) {
		if err, ok := wait(c.grace); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	// SIGKILL cannot be refused, but a busy machine may reap the server later than the grace
	// (200 ms in tests) allows.
	if err, ok := wait(killWait); ok {
		return err
	}
	return errors.New("the server did not exit after SIGKILL")
}

// groupConn is the connection to a stdio server, which closing also stops the processes the
// server started and left behind (a browser it drove, a helper in the background): they would
// outlive it, holding its stderr open. Where the server exits on its own, watchLeader stops
// them at once.
type groupConn struct {
	sdk.Connection
	pid     int             // the server's, which leads its process group
	watched <-chan struct{} // closed when watchLeader is done
	stderr  *os.File        // the read end of its stderr
	copied  chan struct{}
	grace   time.Duration
	once    sync.Once
	err     error
}

// Close closes the connection (stdin, then SIGTERM and SIGKILL, reaping the server), kills
// what is left of its process group and waits, up to the grace, for its stderr to end.
func (c *groupConn) Close() error {
	c.once.Do(func() {
		c.err = c.Connection.Close()
		<-c.watched // the server has exited
		killGroup(c.pid)
		timer := time.NewTimer(c.grace)
		defer timer.Stop()
		select {
		case <-c.copied:
		case <-timer.C: // a process that left the group holds it open
		}
		_ = c.stderr.Close()
		<-c.copied
	})
	return c.err
}
