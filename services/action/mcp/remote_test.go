package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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

// TestARemoteServersHeadersStayWithItsOrigin: the headers configured for a remote server (its
// credentials) go with every request to its URL's origin, but not with a request a redirect
// sends to another origin; they were set on every request the client made, even where Go's
// client had dropped Authorization for leaving the host.
func TestARemoteServersHeadersStayWithItsOrigin(t *testing.T) {
	handler, srv := echoHandler("")
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, h := range []string{"Authorization", "X-Api-Token"} {
			if v := r.Header.Get(h); v != "" {
				leaked = append(leaked, h+": "+v)
			}
		}
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		elsewhere.CloseClientConnections()
		elsewhere.Close()
	})
	// The server moved to another origin (the same server under another host name).
	moved := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, moved+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}))
	t.Cleanup(front.Close)

	m := start(t, quiet(), mcp.Server{
		Name:    "notes",
		URL:     front.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer sk-auth", "X-Api-Token": "sk-token"},
	})
	if got, err := call(t, m, "notes", "echo", map[string]any{"text": "hi"}); err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("requests redirected to another origin carried the server's headers: %v", leaked)
	}
}

// TestTheStartTimeoutBoundsTheHandshakeAndToolsListTogether: a server that answers its
// handshake and then tools/list each within the start timeout, but not both, fails to start.
// Each had a start timeout of its own, so a start took up to twice the configured one.
func TestTheStartTimeoutBoundsTheHandshakeAndToolsListTogether(t *testing.T) {
	const timeout, delay = 400 * time.Millisecond, 250 * time.Millisecond
	_, srv := echoHandler("")
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "initialize" || method == "tools/list" {
				select { // a slow server: each answer takes most of the start timeout
				case <-time.After(delay):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	url, _ := mcptest.ServeHTTP(t, srv)
	opts := quiet()
	opts.StartTimeout = timeout
	began := time.Now()
	m, err := mcp.Start(t.Context(), []mcp.Server{{Name: "slow", URL: url}}, opts)
	if err == nil {
		closeManager(t, m)
		t.Fatalf("Start succeeded after %s, want it to fail within the start timeout of %s", time.Since(began), timeout)
	}
	if want := "did not answer tools/list within 400ms"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// TestResourcesInAResultAreDescribedAsImagesAre: a binary resource embedded in a tool's result
// is described to the model with its MIME type and size, as an image is, and a resource link
// with its name and description; both were their URI alone.
func TestResourcesInAResultAreDescribedAsImagesAre(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "1.0.0"}, nil)
	size := int64(2048)
	sdk.AddTool(srv, &sdk.Tool{Name: "fetch", Description: "Fetches the report."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///data.gz", MIMEType: "application/gzip", Blob: make([]byte, 1234)}},
				&sdk.ResourceLink{URI: "file:///report.pdf", Name: "report.pdf", Description: "The quarterly report",
					MIMEType: "application/pdf", Size: &size},
				&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 10)},
			}}, nil, nil
		})
	url, _ := mcptest.ServeHTTP(t, srv)
	m := start(t, quiet(), mcp.Server{Name: "files", URL: url})
	got, err := call(t, m, "files", "fetch", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	want := "[resource file:///data.gz, application/gzip, 1234 bytes]\n" +
		"[resource link file:///report.pdf, report.pdf, application/pdf, 2048 bytes: The quarterly report]\n" +
		"[image image/png, 10 bytes]"
	if got != want {
		t.Errorf("result\n%s\nwant\n%s", got, want)
	}
}
