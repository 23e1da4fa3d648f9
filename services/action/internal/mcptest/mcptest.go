// Package mcptest runs the MCP reference servers that services/action/testdata installs from
// npm (@modelcontextprotocol/server-everything and server-filesystem), for the action
// service's tests, and serves MCP servers a test writes with the Go SDK (ServeHTTP). The
// reference servers are real Node programs; a test fails, never skips, when Node or the
// packages are missing.
package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Package names of the reference servers.
const (
	Everything = "@modelcontextprotocol/server-everything"
	Filesystem = "@modelcontextprotocol/server-filesystem"
)

// installHint says how to install the servers.
const installHint = "run `npm ci --prefix services/action/testdata --no-audit --no-fund` from the repository root to install the MCP reference servers the tests run"

// testdata returns the directory of the npm packages, services/action/testdata.
func testdata(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("mcptest: cannot locate its own source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Node returns the path of the node executable.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v); the MCP tests run the reference servers with Node", err)
	}
	return node
}

// Bin returns the absolute path of the script an npm package names as its bin.
func Bin(t testing.TB, pkg string) string {
	t.Helper()
	dir := filepath.Join(testdata(t), "node_modules", filepath.FromSlash(pkg))
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("%s is not installed (%v): %s", pkg, err, installHint)
	}
	var manifest struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("%s/package.json: %v", pkg, err)
	}
	var bin string
	if err := json.Unmarshal(manifest.Bin, &bin); err != nil {
		var bins map[string]string
		if err := json.Unmarshal(manifest.Bin, &bins); err != nil || len(bins) != 1 {
			t.Fatalf("%s/package.json: want one bin, got %s", pkg, manifest.Bin)
		}
		for _, b := range bins {
			bin = b
		}
	}
	path := filepath.Join(dir, filepath.FromSlash(bin))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: bin %s missing (%v): %s", pkg, bin, err, installHint)
	}
	return path
}

// Poll calls cond until it returns true, failing the test with what when timeout passes first.
func Poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ServeEverythingHTTP starts server-everything in its streamable HTTP mode on a free loopback
// port, waits until it accepts connections and returns its MCP endpoint. The server is killed
// when the test ends.
func ServeEverythingHTTP(t testing.TB) string {
	t.Helper()
	port := freePort(t)
	var output logtest.Buffer
	cmd := exec.Command(Node(t), Bin(t, Everything), "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PORT=" + strconv.Itoa(port)}
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting server-everything streamableHttp: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server-everything output:\n%s", output.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return "http://" + addr + "/mcp"
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("server-everything exited before listening (%v):\n%s", err, output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s within 30s:\n%s", addr, output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ChildPID waits for the child process of this process whose environment holds
// name=value and returns its pid. It reads /proc, so it works on Linux only.
func ChildPID(t testing.TB, name, value string) int {
	t.Helper()
	want := []byte(name + "=" + value)
	pid := 0
	Poll(t, 10*time.Second, fmt.Sprintf("a child process with %s=%s", name, value), func() bool {
		pid = findChild(want)
		return pid != 0
	})
	return pid
}

// findChild returns the pid of a child of this process whose environment has the entry
// want, or 0.
func findChild(want []byte) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after its last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				return pid
			}
		}
	}
	return 0
}

// Kill sends SIGKILL to process pid.
func Kill(t testing.TB, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatalf("killing %d: %v", pid, err)
	}
}

// Limit returns the soft and hard values of the named limit ("Max cpu time") in
// /proc/<pid>/limits.
func Limit(t testing.TB, pid int, name string) (soft, hard string) {
	t.Helper()
	limits, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
	if err != nil {
		t.Fatalf("reading the limits of process %d: %v", pid, err)
	}
	for line := range strings.Lines(string(limits)) {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return f[0], f[1]
			}
		}
	}
	t.Fatalf("process %d has no limit %q:\n%s", pid, name, limits)
	return "", ""
}

// ServeHTTP serves srv, an MCP server of the Go SDK, over streamable HTTP on a test server and
// returns its URL and a stop that closes the server's sessions, then the test server with its
// connections (so that a client sees the server go away at once); stop runs at the test's end
// too, and more than once does nothing more.
func ServeHTTP(t testing.TB, srv *sdk.Server) (url string, stop func()) {
	return ServeHTTPWith(t, srv, nil)
}

// ServeHTTPWith is ServeHTTP with the handler's options (JSONResponse: answers as JSON bodies,
// not SSE streams).
func ServeHTTPWith(t testing.TB, srv *sdk.Server, opts *sdk.StreamableHTTPOptions) (url string,
	stop func()) {
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, opts)
	hs := httptest.NewServer(handler)
	stop = sync.OnceFunc(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	t.Cleanup(stop)
	return hs.URL, stop
}
