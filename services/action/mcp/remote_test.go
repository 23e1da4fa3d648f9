package mcp_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

func TestRemoteEverythingOverStreamableHTTP(t *testing.T) {
	endpoint := mcptest.ServeEverythingHTTP(t)

	// A reverse proxy in front of the server records the headers the client sends.
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var tokens []string
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("X-Api-Token"))
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	m := start(t, quiet(), mcp.Server{
		Name:    "remote",
		URL:     front.URL + target.Path,
		Headers: map[string]string{"X-Api-Token": "${LITERAL}"},
	})
	if echo := toolNamed(t, m, "remote", "echo"); echo.InputSchema["type"] != "object" {
		t.Errorf("echo schema = %v", echo.InputSchema)
	}
	got, err := call(t, m, "remote", "echo", map[string]any{"message": "over http"})
	if err != nil || got != "Echo: over http" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if _, err := call(t, m, "remote", "gzip-file-as-resource", map[string]any{"data": "ftp://example.com/x"}); err == nil || !strings.Contains(err.Error(), "Unsupported URL protocol") {
		t.Errorf("tool error = %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(tokens) == 0 {
		t.Fatal("no request reached the server through the proxy")
	}
	for _, tok := range tokens {
		if tok != "${LITERAL}" {
			t.Fatalf("a request carried X-Api-Token %q, want the configured value as written", tok)
		}
	}
}
