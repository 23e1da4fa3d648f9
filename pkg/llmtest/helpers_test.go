package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeTB records what New reports instead of failing the real test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// finish runs the cleanups, last first, and returns what was reported.
func (f *fakeTB) finish() []string {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}

// newClient returns an HTTP client whose idle connections close when the test ends.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post sends body as JSON and returns the response and its body.
func post(t *testing.T, c *http.Client, url string, body any) (*http.Response, []byte) {
	t.Helper()
	resp, err := postErr(t, c, url, body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, data
}

// postErr sends body as JSON and returns the transport result.
func postErr(t *testing.T, c *http.Client, url string, body any) (*http.Response, error) {
	t.Helper()
	return c.Do(requestWithContext(t, t.Context(), url, body))
}

// requestWithContext returns a POST of body as JSON, bound to ctx.
func requestWithContext(t *testing.T, ctx context.Context, url string, body any) *http.Request {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// chatBody is a chat completion request with the given messages as role/content pairs.
func chatBody(pairs ...string) map[string]any {
	var msgs []map[string]any
	for i := 0; i+1 < len(pairs); i += 2 {
		msgs = append(msgs, map[string]any{"role": pairs[i], "content": pairs[i+1]})
	}
	return map[string]any{"model": "test-model", "messages": msgs}
}

// sseFrames splits an SSE body into the payloads of its data frames, failing on anything
// that is not a "data: ...\n\n" frame.
func sseFrames(t *testing.T, body []byte) []string {
	t.Helper()
	text := string(body)
	if !strings.HasSuffix(text, "\n\n") {
		t.Fatalf("SSE body does not end with a blank line: %q", text)
	}
	var out []string
	for frame := range strings.SplitSeq(strings.TrimSuffix(text, "\n\n"), "\n\n") {
		payload, ok := strings.CutPrefix(frame, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("malformed SSE frame %q", frame)
		}
		out = append(out, payload)
	}
	return out
}
