package meshproc

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
)

// ToolServer answers REST tools on loopback with a side effect a test can see: it counts the
// requests made for each key (the call's "key" argument), and holds a request open when the
// test asked for it, so that a process can be killed while the tool runs.
type ToolServer struct {
	srv     *httptest.Server
	closing chan struct{}

	mu     sync.Mutex
	counts map[string]int
	holds  map[string][]*Hold
}

// NewToolServer starts a ToolServer. When the test ends it lets go of held requests and stops.
func NewToolServer(t testing.TB) *ToolServer {
	s := &ToolServer{closing: make(chan struct{}), counts: map[string]int{}, holds: map[string][]*Hold{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /calls/{key}", s.call)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.closing)
		s.srv.Close()
	})
	return s
}

// Tool returns the configuration of a REST tool the server answers: it takes one string
// argument, key, and each of its executions is one more request counted for that key.
func (s *ToolServer) Tool(description string) config.RestTool {
	return config.RestTool{
		Description: description,
		Method:      http.MethodPost,
		URL:         s.srv.URL + "/calls/${parameters.key}",
		InputSchema: map[string]any{
			"type":     "object",
			"required": []any{"key"},
			"properties": map[string]any{
				"key": map[string]any{"type": "string", "description": "What to count."},
			},
		},
	}
}

// Count returns how many requests were made for key: how many times a tool call with that key
// was executed, completely or not.
func (s *ToolServer) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

// Hold makes the next request for key wait, once counted, until the returned Hold is released
// or the request's client goes away. Holds of one key take requests in the order they were
// made.
func (s *ToolServer) Hold(key string) *Hold {
	h := &Hold{arrived: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.holds[key] = append(s.holds[key], h)
	s.mu.Unlock()
	return h
}

// call counts a request, waits if it is held, and answers with the key and the count.
func (s *ToolServer) call(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	s.counts[key]++
	n := s.counts[key]
	var hold *Hold
	if q := s.holds[key]; len(q) > 0 {
		hold, s.holds[key] = q[0], q[1:]
	}
	s.mu.Unlock()
	if hold != nil {
		close(hold.arrived)
		select {
		case <-hold.release:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
	_, _ = fmt.Fprint(w, Answer(key, n))
}

// Answer returns the body a ToolServer answers with to the request'th request for key (1 for
// the first).
func Answer(key string, request int) string {
	return fmt.Sprintf("counted %s: request %d", key, request)
}

// Hold is a ToolServer request held open until the test releases it.
type Hold struct {
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// Arrived returns a channel closed when the held request has arrived (and been counted).
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held request be answered; it may be called more than once.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }
