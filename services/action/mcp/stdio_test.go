package mcp_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

func TestStdioEverything(t *testing.T) {
	t.Setenv("AGENTMESH_PARENT_ONLY", "must not reach the child")
	m := start(t, quiet(), everything(t))

	echo := toolNamed(t, m, "everything", "echo")
	props, _ := echo.InputSchema["properties"].(map[string]any)
	if echo.Description == "" || echo.InputSchema["type"] != "object" || props["message"] == nil {
		t.Errorf("echo: description %q, schema %v: want an object schema with a message property", echo.Description, echo.InputSchema)
	}
	if echo.Annotations == nil || !echo.Annotations.ReadOnly {
		t.Errorf("echo annotations = %+v, want read-only", echo.Annotations)
	}

	table := []struct {
		name    string
		tool    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{"echo", "echo", map[string]any{"message": "hello"}, "Echo: hello", ""},
		{"sum", "get-sum", map[string]any{"a": 2, "b": 3}, "5", ""},
		{"tool error", "gzip-file-as-resource", map[string]any{"data": "ftp://example.com/x"}, "", "Unsupported URL protocol"},
		{"unknown tool", "no-such-tool", nil, "", `MCP server "everything" has no tool "no-such-tool" (its tools: echo, `},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, m, "everything", tc.tool, tc.args)
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(got, tc.want) {
					t.Fatalf("%s = %q, %v; want %q", tc.tool, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("%s error = %v, want one containing %q", tc.tool, err, tc.wantErr)
			}
		})
	}
	if _, err := call(t, m, "everything", "gzip-file-as-resource", map[string]any{"data": "ftp://example.com/x"}); !errors.As(err, new(*mcp.ToolError)) {
		t.Errorf("isError result = %T %v, want a *mcp.ToolError", err, err)
	}
	if _, err := call(t, m, "nowhere", "echo", nil); err == nil || !strings.Contains(err.Error(), `unknown MCP server "nowhere"`) {
		t.Errorf("unknown server error = %v", err)
	}
}

func TestStdioChildSeesOnlyConfiguredEnvironment(t *testing.T) {
	t.Setenv("AGENTMESH_PARENT_ONLY", "must not reach the child")
	srv := everything(t)
	srv.Env["API_TOKEN"] = "${NOT_EXPANDED}"
	m := start(t, quiet(), srv)

	out, err := call(t, m, "everything", "get-env", nil)
	if err != nil {
		t.Fatalf("get-env: %v", err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("get-env output %q: %v", out, err)
	}
	if keys := slices.Sorted(maps.Keys(env)); !slices.Equal(keys, []string{markerVar, "API_TOKEN", "PATH"}) {
		t.Errorf("child environment has %v, want only API_TOKEN, %s and PATH", keys, markerVar)
	}
	if env["API_TOKEN"] != "${NOT_EXPANDED}" || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("API_TOKEN = %q (want it as written), PATH = %q (want this process's)", env["API_TOKEN"], env["PATH"])
	}
}

func TestStdioWorkingDirectoryAndLimits(t *testing.T) {
	dir := t.TempDir()
	srv := everything(t)
	srv.Dir = dir
	srv.Limits = mcp.Limits{OpenFiles: 512, CPUSeconds: 3600, FileSizeBytes: 1 << 30}
	start(t, quiet(), srv)

	pid := mcptest.ChildPID(t, markerVar, t.Name())
	cwd, err := os.Readlink(filepath.Join("/proc", itoa(pid), "cwd"))
	if err != nil {
		t.Fatalf("reading the child's working directory: %v", err)
	}
	if want, _ := filepath.EvalSymlinks(dir); cwd != want {
		t.Errorf("child runs in %s, want %s", cwd, want)
	}
	for _, want := range []struct{ name, value string }{
		{"Max open files", "512"},
		{"Max cpu time", "3600"},
		{"Max file size", "1073741824"},
		{"Max core file size", "0"},
	} {
		if soft, hard := mcptest.Limit(t, pid, want.name); soft != want.value || hard != want.value {
			t.Errorf("%s: soft %s hard %s, want %s", want.name, soft, hard, want.value)
		}
	}
}

func TestStartFailures(t *testing.T) {
	mcptest.Node(t)
	table := []struct {
		name   string
		server mcp.Server
		want   []string
	}{
		{"command not found", mcp.Server{Name: "ghost", Command: "agentmesh-no-such-command"},
			[]string{`MCP server "ghost"`, `command "agentmesh-no-such-command" not found in PATH`}},
		{"command not found in the configured PATH", mcp.Server{Name: "ghost", Command: "node", Env: map[string]string{"PATH": t.TempDir()}},
			[]string{`MCP server "ghost"`, `command "node" not found in PATH`}},
		{"exits at start", mcp.Server{Name: "crash", Command: "node", Args: []string{"-e", "process.stderr.write('boom: no config'); process.exit(3)"}},
			[]string{`MCP server "crash"`, "starting node:", "boom: no config"}}, // not its arguments, which may hold a key
		{"missing working directory", mcp.Server{Name: "nowhere", Command: "node", Dir: filepath.Join(t.TempDir(), "gone")},
			[]string{`MCP server "nowhere"`, "no such file or directory"}},
		{"remote server not listening", mcp.Server{Name: "remote", URL: "http://127.0.0.1:1/mcp"},
			[]string{`MCP server "remote"`, "connecting to http://127.0.0.1:1/…"}}, // its path may hold a key
		{"neither command nor url", mcp.Server{Name: "empty"}, []string{`MCP server "empty": needs a command (stdio) or a url (remote)`}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			m, err := mcp.Start(t.Context(), []mcp.Server{tc.server}, quiet())
			if err == nil {
				closeManager(t, m)
				t.Fatal("Start succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestStartFailureStopsTheServersThatStarted(t *testing.T) {
	mcptest.Node(t)
	good := everything(t)
	_, err := mcp.Start(t.Context(), []mcp.Server{good, {Name: "ghost", Command: "agentmesh-no-such-command"}}, quiet())
	if err == nil || !strings.Contains(err.Error(), `MCP server "ghost"`) {
		t.Fatalf("Start error = %v, want the ghost server named", err)
	}
	// goleak and the absence of the child prove the started server was closed.
	mcptest.Poll(t, 10*time.Second, "the started server to be stopped", func() bool {
		return !childExists(markerVar, t.Name())
	})
}

func TestStdioServerIsRestartedAfterItDies(t *testing.T) {
	dir := t.TempDir()
	srv := everything(t)
	srv.Dir = dir
	m := start(t, quiet(), srv)
	if _, err := call(t, m, "everything", "echo", map[string]any{"message": "before"}); err != nil {
		t.Fatalf("echo before the kill: %v", err)
	}
	pid := mcptest.ChildPID(t, markerVar, t.Name())

	// Restarts fail while the working directory is gone, so the outage can be observed.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mcptest.Kill(t, pid)
	var outage error
	mcptest.Poll(t, 10*time.Second, "calls to fail as unavailable", func() bool {
		_, outage = call(t, m, "everything", "echo", map[string]any{"message": "during"})
		return errors.Is(outage, mcp.ErrUnavailable)
	})
	for _, want := range []string{`MCP server "everything" is unavailable`, "restart"} {
		if !strings.Contains(outage.Error(), want) {
			t.Errorf("outage error %q does not contain %q", outage, want)
		}
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mcptest.Poll(t, 20*time.Second, "the restarted server to answer", func() bool {
		got, err := call(t, m, "everything", "echo", map[string]any{"message": "after"})
		return err == nil && got == "Echo: after"
	})
	if again := mcptest.ChildPID(t, markerVar, t.Name()); again == pid {
		t.Errorf("the server answers from the killed process %d", pid)
	}
}

func TestCloseStopsTheChild(t *testing.T) {
	mcptest.Node(t)
	m, err := mcp.Start(t.Context(), []mcp.Server{everything(t)}, quiet())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	mcptest.ChildPID(t, markerVar, t.Name())
	closeManager(t, m)
	if childExists(markerVar, t.Name()) {
		t.Error("the child still runs after Close")
	}
	if _, err := m.Call(t.Context(), "everything", "echo", map[string]any{"message": "x"}, mcp.Principals{}); !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("call after Close = %v, want ErrUnavailable", err)
	}
}

// TestCloseStopsWhatTheServerStarted: a stdio server's own children (a browser it drives, a
// helper it runs in the background) share its stderr; closing the server reaped the server
// and then waited for that stderr to end, which they kept open, so Close failed with "os:
// process already finished", leaked goroutines, and left them running. Close stops the
// server's whole process group.
func TestCloseStopsWhatTheServerStarted(t *testing.T) {
	mcptest.Node(t)
	srv := everything(t)
	srv.Command = "sh"
	srv.Args = []string{"-c", "sleep 300 & exec node " + mcptest.Bin(t, mcptest.Everything) + " stdio"}
	m, err := mcp.Start(t.Context(), []mcp.Server{srv}, quiet())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got, err := call(t, m, "everything", "echo", map[string]any{"message": "hi"}); err != nil || got != "Echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	closeManager(t, m)
	mcptest.Poll(t, 10*time.Second, "the server's own child to be stopped", func() bool {
		return !childExists(markerVar, t.Name())
	})
}

// TestAServerThatDiesLeavingItsChildrenIsRestarted: a stdio server that died while a process
// it started lived on, holding its stdin and stdout open, left a session that did not end: the
// server was not restarted, and calls went to no one until they timed out. Its process group
// is killed as soon as it exits, so its session ends and it is restarted at once.
func TestAServerThatDiesLeavingItsChildrenIsRestarted(t *testing.T) {
	mcptest.Node(t)
	srv := everything(t)
	srv.Command = "sh"
	srv.Args = []string{"-c", "sleep 300 <&0 & exec node " + mcptest.Bin(t, mcptest.Everything) + " stdio"}
	m := start(t, quiet(), srv)
	pid := mcptest.ChildPID(t, markerVar, t.Name())
	mcptest.Kill(t, pid)
	mcptest.Poll(t, 20*time.Second, "the server to be restarted", func() bool {
		return mcptest.ChildPID(t, markerVar, t.Name()) != pid
	})
	mcptest.Poll(t, 20*time.Second, "the restarted server to answer", func() bool {
		got, err := call(t, m, "everything", "echo", map[string]any{"message": "after"})
		return err == nil && got == "Echo: after"
	})
}

// TestAServerThatNeverAnswersFailsToStartSayingSo: a stdio server that starts but never
// answers the MCP handshake failed Start with a bare "context deadline exceeded", naming
// neither the handshake nor the timeout. The error says what it waited for and how long, and
// the child is stopped.
func TestAServerThatNeverAnswersFailsToStartSayingSo(t *testing.T) {
	mcptest.Node(t)
	opts := quiet()
	opts.StartTimeout = 300 * time.Millisecond
	srv := mcp.Server{Name: "mute", Command: "node", Env: map[string]string{markerVar: t.Name()},
		Args: []string{"-e", "process.stderr.write('waiting for the database\\n'); setInterval(() => {}, 1000)"}}
	m, err := mcp.Start(t.Context(), []mcp.Server{srv}, opts)
	if err == nil {
		closeManager(t, m)
		t.Fatal("Start succeeded, want an error")
	}
	for _, want := range []string{`MCP server "mute"`, "did not answer the MCP handshake within 300ms", "waiting for the database"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if childExists(markerVar, t.Name()) {
		t.Error("the server still runs after Start failed")
	}
}

// TestACallToAServerThatStoppedIsUnavailable: once a stdio server's session is ending, a call
// sends nothing; but the server is marked down only when its session has closed (the child
// reaped, its stderr drained), and calls made meanwhile failed as if the connection had been
// lost while they ran, which the action stage does not retry. They are unavailable. Here a
// process of the server's that left its group holds its stderr, so that closing takes the grace.
func TestACallToAServerThatStoppedIsUnavailable(t *testing.T) {
	mcptest.Node(t)
	opts := quiet()
	opts.TerminateGrace = 2 * time.Second
	srv := everything(t)
	srv.Command = "sh"
	srv.Args = []string{"-c", "setsid sleep 300 </dev/null >/dev/null & exec node " + mcptest.Bin(t, mcptest.Everything) + " stdio"}
	t.Cleanup(func() { killMarked(markerVar, t.Name()) })
	m := start(t, opts, srv)
	if got, err := call(t, m, "everything", "echo", map[string]any{"message": "hi"}); err != nil || got != "Echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	mcptest.Kill(t, mcptest.ChildPID(t, markerVar, t.Name()))
	var err error
	mcptest.Poll(t, 10*time.Second, "a call to find the server gone", func() bool {
		_, err = call(t, m, "everything", "echo", map[string]any{"message": "after"})
		// A call the server may have read before it died is lost during the call.
		return err != nil && !strings.Contains(err.Error(), `"tools/call": EOF`)
	})
	if !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("a call after the server stopped: %v, want an error wrapping ErrUnavailable", err)
	}
}
