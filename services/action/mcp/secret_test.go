package mcp_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

// secretURLPath and secretURLQuery stand for the credentials a hosted MCP server's URL often
// carries (a key in its path or in its query).
const (
	secretURLPath  = "sk-path-c0ffee"
	secretURLQuery = "sk-query-decaf"
)

// TestARemoteServerURLStaysOutOfErrorsAndLogs: a remote server's URL may carry a credential,
// so the errors a call returns (which the model and the run's events see), the errors of Start
// and the logs name the server and its host but never the URL's path or query. They quoted the
// whole URL, as the HTTP client's errors do.
func TestARemoteServerURLStaysOutOfErrorsAndLogs(t *testing.T) {
	handler, srv := echoHandler("")
	var broken atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() { // the server goes away mid-session: the connection is cut
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range srv.Sessions() { // the client could not end its session
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	endpoint := hs.URL + "/mcp/" + secretURLPath + "?key=" + secretURLQuery

	var logs logtest.Buffer
	opts := quiet()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.RestartBackoff = time.Hour // the call sees the lost connection, not a restart
	m := start(t, opts, mcp.Server{Name: "notes", URL: endpoint})
	if got, err := call(t, m, "notes", "echo", map[string]any{"text": "hi"}); err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	broken.Store(true)
	_, err := call(t, m, "notes", "echo", map[string]any{"text": "hi"})
	if err == nil {
		t.Fatal("a call to a server that cut the connection succeeded")
	}
	noSecret(t, "the error of a call", err.Error())
	if !strings.Contains(err.Error(), `"notes"`) {
		t.Errorf("the error of a call does not name the server: %v", err)
	}

	// A server that cannot be reached at all fails Start.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String() + "/mcp/" + secretURLPath + "?key=" + secretURLQuery
	_ = l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if m, err := mcp.Start(ctx, []mcp.Server{{Name: "gone", URL: gone}}, opts); err == nil {
		closeManager(t, m)
		t.Fatal("Start reached a server that is not listening")
	} else {
		noSecret(t, "the error of Start", err.Error())
		if !strings.Contains(err.Error(), l.Addr().String()) {
			t.Errorf("the error of Start does not name the server's host: %v", err)
		}
	}
	noSecret(t, "the logs", logs.String())
}

// noSecret fails the test when text holds a secret of the URL.
func noSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{secretURLPath, secretURLQuery} {
		if strings.Contains(text, s) {
			t.Errorf("%s quotes the server URL's secret %q:\n%s", what, s, text)
		}
	}
}

// TestAStdioServersArgumentsStayOutOfCallErrors: a stdio server's arguments may hold a
// credential (the reference PostgreSQL server takes its connection URL, password included, as
// its argument), so when the server cannot be restarted the errors its calls return, which the
// model and the run's events see, and the logs name its command but not its arguments. They
// quoted the whole command line.
func TestAStdioServersArgumentsStayOutOfCallErrors(t *testing.T) {
	const secretArg = "postgresql://agent:pw-f00d@db/app"
	dir := t.TempDir()
	srv := everything(t)
	srv.Args = append(srv.Args, secretArg) // server-everything ignores what follows "stdio"
	srv.Dir = dir
	var logs logtest.Buffer
	opts := quiet()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := start(t, opts, srv)
	if _, err := call(t, m, "everything", "echo", map[string]any{"message": "before"}); err != nil {
		t.Fatalf("echo: %v", err)
	}

	// Restarts fail while the working directory is gone.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mcptest.Kill(t, mcptest.ChildPID(t, markerVar, t.Name()))
	var outage error
	mcptest.Poll(t, 10*time.Second, "calls to fail after a failed restart", func() bool {
		_, outage = call(t, m, "everything", "echo", map[string]any{"message": "during"})
		return outage != nil && strings.Contains(outage.Error(), "restarting failed")
	})
	if strings.Contains(outage.Error(), "pw-f00d") {
		t.Errorf("the error of a call quotes the server's arguments: %v", outage)
	}
	if !strings.Contains(outage.Error(), "starting node") {
		t.Errorf("the error of a call does not name the server's command: %v", outage)
	}
	if strings.Contains(logs.String(), "pw-f00d") {
		t.Errorf("the logs quote the server's arguments:\n%s", logs.String())
	}
}
