package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// command returns the child process of a stdio server: the command resolved in the child's
// own PATH, the configured environment only, the working directory and the process
// attributes of this system.
func command(s Server, stderr *tailWriter) (*exec.Cmd, error) {
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
		Stderr:      stderr,
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

// commandTransport starts a stdio server and applies its resource limits before the MCP
// handshake.
type commandTransport struct {
	cmd    *exec.Cmd
	limits Limits
	grace  time.Duration
}

// Connect starts the child and connects to it over its stdin and stdout.
func (t *commandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	inner := &sdk.CommandTransport{Command: t.cmd, TerminateDuration: t.grace}
	conn, err := inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := applyLimits(t.cmd.Process.Pid, t.limits); err != nil {
		return nil, errors.Join(fmt.Errorf("setting resource limits: %w", err), conn.Close())
	}
	return conn, nil
}
