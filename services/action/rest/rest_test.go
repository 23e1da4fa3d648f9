package rest_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action/rest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// received is what the test server saw of one request.
type received struct {
	method, path, rawPath, query, body string
	header                             http.Header
}

// server starts an HTTP server that records each request and answers with status and body.
func server(t *testing.T, status int, body string) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Clone()}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// newTool builds a tool, failing the test on error.
func newTool(t *testing.T, spec rest.Spec, client *http.Client) *rest.Tool {
	t.Helper()
	tool, err := rest.New(spec, client)
	if err != nil {
		t.Fatalf("New(%+v): %v", spec, err)
	}
	return tool
}

func TestPlaceholdersAreFilledAndEscapedAtCallTime(t *testing.T) {
	srv, got := server(t, http.StatusOK, `{"ok":true}`)
	args := map[string]any{
		"city":  "São Paulo/Centro?&x=1",
		"q":     `say "hi"` + "\n\\ <b>",
		"limit": 5.0,
		"exact": true,
		"tags":  []any{"a", "b"},
		"token": "${NOT_EXPANDED}",
	}
	table := []struct {
		name  string
		spec  rest.Spec
		check func(t *testing.T, r received)
	}{
		{"url path and query are percent-encoded",
			rest.Spec{URL: srv.URL + "/weather/${parameters.city}?q=${parameters.q}&n=${parameters.limit}"},
			func(t *testing.T, r received) {
				if r.method != http.MethodGet || r.path != "/weather/São Paulo/Centro?&x=1" || !strings.HasPrefix(r.rawPath, "/weather/S%C3%A3o%20Paulo%2FCentro%3F%26x%3D1") {
					t.Errorf("path %q (raw %q)", r.path, r.rawPath)
				}
				if r.query != "q=say%20%22hi%22%0A%5C%20%3Cb%3E&n=5" {
					t.Errorf("query %q", r.query)
				}
			}},
		{"headers take values as they are",
			rest.Spec{URL: srv.URL + "/h", Headers: map[string]string{"X-Token": "Bearer ${parameters.token}", "X-Limit": "${parameters.limit}"}},
			func(t *testing.T, r received) {
				if r.header.Get("X-Token") != "Bearer ${NOT_EXPANDED}" || r.header.Get("X-Limit") != "5" {
					t.Errorf("headers %v", r.header)
				}
			}},
		{"json body: escaped inside strings, encoded outside",
			rest.Spec{Method: "post", URL: srv.URL + "/search", Body: `{"query": "find ${parameters.q}", "limit": ${parameters.limit}, "exact": ${parameters.exact}, "tags": ${parameters.tags}, "city": ${parameters.city}, "missing": ${parameters.missing}, "text": "\"${parameters.exact}\" {${parameters.limit}}"}`},
			func(t *testing.T, r received) {
				if r.method != http.MethodPost || r.header.Get("Content-Type") != "application/json" {
					t.Errorf("method %s content type %q", r.method, r.header.Get("Content-Type"))
				}
				var body map[string]any
				if err := json.Unmarshal([]byte(r.body), &body); err != nil {
					t.Fatalf("body %s is not JSON: %v", r.body, err)
				}
				want := map[string]any{
					"query": "find " + args["q"].(string), "limit": 5.0, "exact": true, "tags": []any{"a", "b"},
					"city": args["city"], "missing": nil, "text": `"true" {5}`,
				}
				if g, w := mustJSON(t, body), mustJSON(t, want); g != w {
					t.Errorf("body\n got %s\nwant %s", g, w)
				}
			}},
		{"form body is form-encoded",
			rest.Spec{Method: "PUT", URL: srv.URL + "/form", Headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: "city=${parameters.city}&n=${parameters.limit}"},
			func(t *testing.T, r received) {
				if r.method != http.MethodPut || r.body != "city=S%C3%A3o+Paulo%2FCentro%3F%26x%3D1&n=5" {
					t.Errorf("%s body %q", r.method, r.body)
				}
			}},
		{"plain body takes values as they are",
			rest.Spec{Method: "POST", URL: srv.URL + "/plain", Headers: map[string]string{"Content-Type": "text/plain"}, Body: "city: ${parameters.city}, tags: ${parameters.tags}"},
			func(t *testing.T, r received) {
				if r.body != `city: São Paulo/Centro?&x=1, tags: ["a","b"]` {
					t.Errorf("body %q", r.body)
				}
			}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			out, err := newTool(t, tc.spec, srv.Client()).Call(t.Context(), args, rest.Principals{})
			if err != nil || out != `{"ok":true}` {
				t.Fatalf("Call = %q, %v", out, err)
			}
			tc.check(t, <-got)
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFailures(t *testing.T) {
	long := strings.Repeat("x", 600)
	table := []struct {
		status     int
		body       string
		want       string
		transient  bool
		mayHaveRun bool // a gateway may have passed the request on
	}{
		{http.StatusNotFound, "no such city\n", "HTTP 404 Not Found: no such city", false, false},
		{http.StatusBadRequest, long, "HTTP 400 Bad Request: " + strings.Repeat("x", 512) + "…", false, false},
		{http.StatusInternalServerError, "", "HTTP 500 Internal Server Error", false, false},
		{http.StatusTooManyRequests, "slow down", "HTTP 429 Too Many Requests: slow down", true, false},
		{http.StatusServiceUnavailable, "maintenance", "HTTP 503 Service Unavailable: maintenance", true, false},
		{http.StatusBadGateway, "", "HTTP 502 Bad Gateway", true, true},
		{http.StatusGatewayTimeout, "", "HTTP 504 Gateway Timeout", true, true},
	}
	for _, tc := range table {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv, _ := server(t, tc.status, tc.body)
			_, err := newTool(t, rest.Spec{URL: srv.URL}, srv.Client()).Call(t.Context(), nil, rest.Principals{})
			var se *rest.StatusError
			if !errors.As(err, &se) || se.Code != tc.status || err.Error() != tc.want {
				t.Fatalf("error = %v, want StatusError %q", err, tc.want)
			}
			if errors.Is(err, rest.ErrTransient) != tc.transient {
				t.Errorf("transient = %v, want %v", !tc.transient, tc.transient)
			}
			if errors.Is(err, rest.ErrMayHaveRun) != tc.mayHaveRun {
				t.Errorf("may have run = %v, want %v", !tc.mayHaveRun, tc.mayHaveRun)
			}
			if errors.Is(err, rest.ErrNotSent) {
				t.Error("a request the server answered counts as not sent")
			}
		})
	}

	t.Run("Retry-After in seconds or as a date", func(t *testing.T) {
		for header, want := range map[string][2]time.Duration{
			"7": {7 * time.Second, 7 * time.Second},
			time.Now().Add(time.Minute).UTC().Format(http.TimeFormat):  {58 * time.Second, time.Minute},
			time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat): {0, 0}, // past
			"soon": {0, 0},
		} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", header)
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			_, err := newTool(t, rest.Spec{URL: srv.URL}, srv.Client()).Call(t.Context(), nil, rest.Principals{})
			srv.Close()
			var se *rest.StatusError
			if !errors.As(err, &se) || se.RetryAfter < want[0] || se.RetryAfter > want[1] {
				t.Errorf("Retry-After %q: %v, want a StatusError asking to wait %v to %v", header, err, want[0], want[1])
			}
		}
	})

	// The generation stage's providers send these too: they were taken as no wait at all.
	t.Run("retry-after-ms, and Retry-After in fractional seconds", func(t *testing.T) {
		for _, tc := range []struct {
			header map[string]string
			want   time.Duration
		}{
			{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
			{map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond},
			{map[string]string{"retry-after-ms": "250", "Retry-After": "7"}, 250 * time.Millisecond},
			{map[string]string{"retry-after-ms": "1e300"}, rest.MaxRetryAfter},
			{map[string]string{"Retry-After": "1e12"}, rest.MaxRetryAfter},
		} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			tool := newTool(t, rest.Spec{URL: srv.URL}, srv.Client())
			_, err := tool.Call(t.Context(), nil, rest.Principals{})
			srv.Close()
			var se *rest.StatusError
			if !errors.As(err, &se) || se.RetryAfter != tc.want {
				t.Errorf("%v: %v, want a StatusError asking to wait %v", tc.header, err, tc.want)
			}
		}
	})

	t.Run("connection refused is transient, sent nothing and hides the URL", func(t *testing.T) {
		addr := grpctest.FreeAddr(t) // nothing listens on it
		client := &http.Client{Transport: &http.Transport{}}
		_, err := newTool(t, rest.Spec{URL: "http://" + addr + "/x?key=secret"}, client).Call(t.Context(), nil, rest.Principals{})
		if !errors.Is(err, rest.ErrTransient) || !errors.Is(err, rest.ErrNotSent) || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "GET request failed") {
			t.Fatalf("error = %v, want a transient failure that sent nothing, without the URL", err)
		}
	})

	t.Run("a line break cannot reach a header", func(t *testing.T) {
		srv, got := server(t, http.StatusOK, "")
		tool := newTool(t, rest.Spec{URL: srv.URL, Headers: map[string]string{"X-Q": "${parameters.q}"}}, srv.Client())
		_, err := tool.Call(t.Context(), map[string]any{"q": "a\r\nX-Admin: 1"}, rest.Principals{})
		if err == nil || !strings.Contains(err.Error(), `parameter "q" contains a line break`) {
			t.Fatalf("error = %v", err)
		}
		if len(got) != 0 {
			t.Error("the request was sent")
		}
	})
}

func TestNewRejectsBadTemplates(t *testing.T) {
	table := []struct {
		name string
		spec rest.Spec
		want string
	}{
		{"unterminated placeholder", rest.Spec{URL: "https://api.example.com/${parameters.city"}, `url: unterminated placeholder "${parameters.city"`},
		{"bad parameter name", rest.Spec{URL: "https://api.example.com/", Body: "${parameters.a b}"}, `body: invalid placeholder "${parameters.a b}"`},
		{"empty parameter name", rest.Spec{URL: "https://api.example.com/", Headers: map[string]string{"X": "${parameters.}"}}, `header X: invalid placeholder`},
		{"relative url", rest.Spec{URL: "/weather"}, `url: "/weather" is not an absolute http(s) URL`},
		{"not http", rest.Spec{URL: "ftp://example.com/x"}, "is not an absolute http(s) URL"},
		{"host from a parameter", rest.Spec{URL: "https://${parameters.host}/x"}, "the scheme and host must be fixed"},
		{"port from a parameter", rest.Spec{URL: "https://api.example.com:${parameters.port}/x"}, "the scheme and host must be fixed"},
		// The user a call acts for is the action stage's to say, not the model's or the configuration's.
		{"the user header", rest.Spec{URL: "https://api.example.com/", Headers: map[string]string{"x-agentmesh-user": "${parameters.user}"}},
			`header "x-agentmesh-user": the action stage sets it to the user the call acts for; a tool may not set it`},
		{"bad method", rest.Spec{Method: "GE T", URL: "https://api.example.com/"}, `method "GE T" is not an HTTP method token`},
		{"bad header name", rest.Spec{URL: "https://api.example.com/", Headers: map[string]string{"X Y": "1"}}, `header "X Y": not a valid header name`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rest.New(tc.spec, http.DefaultClient)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := rest.New(rest.Spec{URL: "https://api.example.com/"}, nil); err == nil {
		t.Error("New without a client succeeded")
	}
}

// Only HTTP's safe methods (GET, the default, HEAD and OPTIONS) leave a tool that needs no
// approval; each method rest_tools.<name>.method takes is one of these or writes.
func TestOnlySafeMethodsDoNotWrite(t *testing.T) {
	for method, writes := range map[string]bool{"": false, "GET": false, "HEAD": false, "OPTIONS": false,
		"options": false, "POST": true, "PUT": true, "PATCH": true, "DELETE": true} {
		tool, err := rest.New(rest.Spec{Method: method, URL: "https://api.example.com/"}, http.DefaultClient)
		if err != nil {
			t.Fatalf("New(%q): %v", method, err)
		}
		if got := tool.Writes(); got != writes {
			t.Errorf("method %q: Writes() = %v, want %v", method, got, writes)
		}
	}
}

func TestParametersAndDefaultSchema(t *testing.T) {
	tool := newTool(t, rest.Spec{
		URL:     "https://api.example.com/${parameters.city}",
		Headers: map[string]string{"X-Key": "${parameters.key}"},
		Body:    `{"a": "${parameters.city}", "b": ${parameters.b}}`,
	}, http.DefaultClient)
	params := tool.Parameters()
	if !slices.Equal(params, []string{"b", "city", "key"}) {
		t.Fatalf("Parameters = %v", params)
	}
	schema := mustJSON(t, rest.DefaultSchema(params))
	want := `{"properties":{"b":{"type":"string"},"city":{"type":"string"},"key":{"type":"string"}},"required":["b","city","key"],"type":"object"}`
	if schema != want {
		t.Errorf("DefaultSchema =\n%s\nwant\n%s", schema, want)
	}
	if got := mustJSON(t, rest.DefaultSchema(nil)); got != `{"properties":{},"type":"object"}` {
		t.Errorf("DefaultSchema(nil) = %s", got)
	}
}

// TestAPathValueCannotLeaveTheToolsPath: a value that is, or holds between slashes, a
// relative segment ("..", ".") is refused in the URL's path, where clients, proxies and
// servers resolve it against the tool's path, percent-encoded or not (Go's ServeMux decodes
// the path, %2E and %2F too, before it resolves it): a model's arguments reached
// /api/admin through /api/files/${parameters.dir}/${parameters.name}. In the query, where
// nothing resolves it, such a value is any other.
func TestAPathValueCannotLeaveTheToolsPath(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/files/{dir}/{name}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "file") })
	mux.HandleFunc("/api/admin", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ADMIN") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tool := newTool(t, rest.Spec{URL: srv.URL + "/api/files/${parameters.dir}/${parameters.name}?q=${parameters.q}"}, srv.Client())
	for _, dir := range []string{"..", ".", "a/../..", `..\..`} {
		out, err := tool.Call(t.Context(), map[string]any{"dir": dir, "name": "admin", "q": "x"}, rest.Principals{})
		if err == nil || !strings.Contains(err.Error(), `parameter "dir"`) {
			t.Errorf("dir %q: Call = %q, %v; want the value refused", dir, out, err)
		}
	}
	for _, ok := range []map[string]any{{"dir": "...", "name": "a.b", "q": ".."}, {"dir": "a/b", "name": ".x", "q": "../.."}} {
		if out, err := tool.Call(t.Context(), ok, rest.Principals{}); err != nil || out != "file" {
			t.Errorf("%v: Call = %q, %v; want the file", ok, out, err)
		}
	}
}

// TestAnEmptyPathValueCannotChangeTheToolsPath: an empty value for a placeholder that is a
// whole segment of the path left the segment empty: /api/users/${parameters.id}/posts with id
// "" asked /api/users//posts, which servers and proxies (Go's ServeMux, nginx's merge_slashes)
// merge into /api/users/posts, another resource than the tool's, and
// /api/users/${parameters.id} asked /api/users/, the collection. Such a value is refused; an
// empty value that leaves its segment other text, or one in the query, is not.
func TestAnEmptyPathValueCannotChangeTheToolsPath(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/users/{id}/posts", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "posts of "+r.PathValue("id")) })
	mux.HandleFunc("/api/users/posts", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "EVERY USER'S POSTS") })
	mux.HandleFunc("/api/users/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "EVERY USER") })
	mux.HandleFunc("/api/files/{name}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "file "+r.PathValue("name")) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		url   string
		param string
	}{
		{"/api/users/${parameters.id}/posts", "id"},
		{"/api/users/${parameters.id}", "id"},
		{"/api/users/${parameters.id}?q=${parameters.q}", "id"},
		{"/api/users/${parameters.prefix}${parameters.id}/posts", "prefix"},
	} {
		tool := newTool(t, rest.Spec{URL: srv.URL + tc.url}, srv.Client())
		out, err := tool.Call(t.Context(), map[string]any{"id": "", "prefix": "", "q": "x"}, rest.Principals{})
		if err == nil || !strings.Contains(err.Error(), `parameter "`+tc.param+`"`) {
			t.Errorf("%s with an empty id: Call = %q, %v; want the value refused", tc.url, out, err)
		}
	}
	for _, tc := range []struct {
		url  string
		args map[string]any
		want string
	}{
		{"/api/users/${parameters.prefix}${parameters.id}/posts", map[string]any{"prefix": "", "id": "7"}, "posts of 7"},
		{"/api/files/${parameters.name}.txt", map[string]any{"name": ""}, "file .txt"},
		{"/api/users/7/posts?q=${parameters.q}", map[string]any{"q": ""}, "posts of 7"},
	} {
		tool := newTool(t, rest.Spec{URL: srv.URL + tc.url}, srv.Client())
		if out, err := tool.Call(t.Context(), tc.args, rest.Principals{}); err != nil || out != tc.want {
			t.Errorf("%s with %v: Call = %q, %v; want %q", tc.url, tc.args, out, err, tc.want)
		}
	}
}

// TestConfiguredHeadersStayWithTheToolsServer: the headers a tool's configuration sets (an API
// key in X-Api-Key), and the user and approver headers, are sent to its server and through its
// redirects within the server, but not through a redirect to another one, where a path or query the
// model fills (an open redirect of the API) could send the request; Go's client drops only
// Authorization and cookies there. Content-Type, which describes the body, still goes.
func TestConfiguredHeadersStayWithTheToolsServer(t *testing.T) {
	elsewhere, got := server(t, http.StatusOK, "elsewhere")
	// The same server under another host name is another origin.
	other := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
	var keys []string
	mux := http.NewServeMux()
	mux.HandleFunc("/go", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("X-Api-Key"), r.Header.Get(rest.UserHeader), r.Header.Get(rest.ApproverHeader))
		_, _ = io.WriteString(w, "here")
	})
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	headers := map[string]string{"X-Api-Key": "key-5ec2e7", "Content-Type": "application/json"}

	tool := newTool(t, rest.Spec{Method: "POST", URL: api.URL + "/go?to=${parameters.to}", Headers: headers, Body: `{"q": "x"}`}, api.Client())
	who := rest.Principals{User: "acme/alice", Approver: "acme/ann"}
	if out, err := tool.Call(t.Context(), map[string]any{"to": other + "/collect"}, who); err != nil || out != "elsewhere" {
		t.Fatalf("Call = %q, %v", out, err)
	}
	r := <-got
	for _, h := range []string{"X-Api-Key", rest.UserHeader, rest.ApproverHeader} {
		if v := r.header.Get(h); v != "" {
			t.Errorf("a redirect to another server carried the tool's %s %q", h, v)
		}
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" || r.body != `{"q": "x"}` {
		t.Errorf("the redirected request: Content-Type %q, body %q; want the body and its type", ct, r.body)
	}

	tool = newTool(t, rest.Spec{Method: "POST", URL: api.URL + "/moved", Headers: headers, Body: `{}`}, api.Client())
	if out, err := tool.Call(t.Context(), nil, who); err != nil || out != "here" {
		t.Fatalf("Call = %q, %v", out, err)
	}
	if !slices.Equal(keys, []string{"key-5ec2e7", "acme/alice", "acme/ann"}) {
		t.Errorf("a redirect within the server carried X-Api-Key, the user and the approver %q, want the tool's and the call's", keys)
	}
}
