package llmtest

import (
	"cmp"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

// Server is a scripted OpenAI-compatible HTTP server for tests.
type Server struct {
	srv       *httptest.Server
	scenarios []Scenario
	closing   chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex
	forget     bool        // requests are not kept (KeepRequests)
	noUsage    bool        // embeddings answers carry no usage (OmitEmbeddingUsage)
	embedHolds []embedHold // embeddings requests held (HoldEmbeddings)
	requests   []Request
	errs       []string
	attempts   map[turnKey]int
	answered   int
}

// turnKey identifies one turn of one scenario.
type turnKey struct {
	scenario int
	turn     int
}

// T is what New needs of a test; a *testing.T or *testing.B has it. The package does not
// import testing, so a command that serves scripted providers (the conformance kit, pkg/stagetest)
// does not link it in.
type T interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// New starts a server answering with the scenarios. When the test ends it closes the server
// and reports every recorded error (unmatched requests, unmet expectations) with t.Errorf.
// A scenario with an unknown failure kind fails the test at once.
func New(t T, scenarios ...Scenario) *Server {
	t.Helper()
	s, err := Start(scenarios...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		s.Close()
		for _, e := range s.Errors() {
			t.Errorf("llmtest: %s", e)
		}
	})
	return s
}

// Start starts a server answering with the scenarios, outside a test (e.g. in a process of
// its own that a benchmark talks to); the caller closes it and reads its Errors. A scenario
// with an unknown failure kind is an error. It serves plain HTTP/1.1, as local model servers
// (Ollama, vLLM, llama.cpp) do.
func Start(scenarios ...Scenario) (*Server, error) { return start(nil, false, scenarios) }

// StartOn is Start on a listener of the caller's, e.g. at an address a stage under test was
// configured with before the server started. Close closes l; when StartOn fails, l is still
// the caller's to close.
func StartOn(l net.Listener, scenarios ...Scenario) (*Server, error) {
	return start(l, false, scenarios)
}

// StartTLS is Start for a server that speaks HTTP/2 over TLS, as hosted providers do; its
// clients trust Certificate.
func StartTLS(scenarios ...Scenario) (*Server, error) { return start(nil, true, scenarios) }

// start serves the scenarios on l, or on a loopback port of its own when l is nil.
func start(l net.Listener, secure bool, scenarios []Scenario) (*Server, error) {
	for _, sc := range scenarios {
		for i, turn := range sc.Turns {
			if turn.Failure != "" && !knownFailures[turn.Failure] {
				return nil, fmt.Errorf("llmtest: scenario %q turn %d: unknown failure %q", sc.Name, i, turn.Failure)
			}
			if turn.StreamCut != "" && turn.StreamCut != CutDrop && turn.StreamCut != CutError {
				return nil, fmt.Errorf("llmtest: scenario %q turn %d: unknown stream_cut %q",
					sc.Name, i, turn.StreamCut)
			}
		}
	}
	s := &Server{
		scenarios: cloneScenarios(scenarios),
		closing:   make(chan struct{}),
		attempts:  map[turnKey]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handleTurn(w, r, openAIAPI) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.handleTurn(w, r, anthropicAPI) })
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("/", s.handleUnknown)
	s.srv = httptest.NewUnstartedServer(mux)
	if l != nil {
		_ = s.srv.Listener.Close()
		s.srv.Listener = l
	}
	if secure {
		s.srv.EnableHTTP2 = true
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	return s, nil
}

// Certificate is the certificate of a server started with StartTLS (nil for Start's).
func (s *Server) Certificate() *x509.Certificate { return s.srv.Certificate() }

// cloneScenarios copies the scenarios and their turns so later edits by the caller do not
// change what the server answers.
func cloneScenarios(in []Scenario) []Scenario {
	out := slices.Clone(in)
	for i := range out {
		out[i].Turns = slices.Clone(out[i].Turns)
	}
	return out
}

// URL returns the base URL of the API, ending in "/v1".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Requests returns the decoded requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// KeepRequests sets whether the server keeps the requests it receives for Requests, as it
// does by default; a benchmark turns it off so the server's memory stays flat.
func (s *Server) KeepRequests(keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget = !keep
}

// OmitEmbeddingUsage sets whether the server's embeddings answers leave out their usage, as
// some OpenAI-compatible servers do; by default they carry it.
func (s *Server) OmitEmbeddingUsage(omit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noUsage = omit
}

// Errors returns the errors recorded so far: requests no scenario answers and unmet
// expectations.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// Close releases requests held by timeout failures and shuts the server down. It is safe to
// call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.srv.Close()
	})
}

// recordf records an error that fails the test at cleanup.
func (s *Server) recordf(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.errs = append(s.errs, msg)
	s.mu.Unlock()
	return msg
}

// decode reads the request body into a Request and records it; a body that is not JSON is
// answered with 400 and recorded as an error.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, api dialect) (Request, bool) {
	req, err := parseRequest(r)
	if err != nil {
		msg := s.recordf("%s %s: request body is not valid JSON: %v", r.Method, r.URL.Path, err)
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "", "llmtest: "+msg)
		return Request{}, false
	}
	s.mu.Lock()
	if !s.forget {
		s.requests = append(s.requests, req)
	}
	s.mu.Unlock()
	return req, true
}

// plainRequest is Request, decoded with its messages as wireMessage.
type plainRequest Request

// parseRequest decodes the body of r.
func parseRequest(r *http.Request) (Request, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return Request{}, err
	}
	var req Request
	wire := struct {
		*plainRequest
		Messages []wireMessage `json:"messages"` // shadows plainRequest's
	}{plainRequest: (*plainRequest)(&req)}
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, err
	}
	if wire.Messages != nil {
		req.Messages = make([]Message, len(wire.Messages))
		for i := range wire.Messages {
			if err := wire.Messages[i].decode(&req.Messages[i]); err != nil {
				return Request{}, err
			}
		}
	}
	if err := json.Unmarshal(body, &req.Raw); err != nil {
		return Request{}, err
	}
	req.Path = r.URL.Path
	req.Header = r.Header.Clone()
	return req, nil
}

// handleTurn answers a chat completion (OpenAI) or messages (Anthropic) request from the
// scenarios, as JSON or as server-sent events.
func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request, api dialect) {
	req, ok := s.decode(w, r, api)
	if !ok {
		return
	}
	switch problem := checkRequest(req, api); {
	case problem == "":
	case api == anthropicAPI:
		s.recordf("the Anthropic API would reject this request: %s", problem)
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "", problem)
		return
	default:
		s.recordf("the OpenAI API would reject this request: %s", problem)
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "unsupported_parameter", problem)
		return
	}
	idx, sc, ok := s.scenarioFor(req)
	if !ok {
		msg := s.recordf("no scenario matches the first user message %q", req.firstUserMessage())
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "", "llmtest: "+msg)
		return
	}
	n := req.assistantCount()
	if n >= len(sc.Turns) {
		msg := s.recordf("scenario %q has %d turns, but the request has %d assistant messages and asks for turn %d",
			sc.Name, len(sc.Turns), n, n)
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "", "llmtest: "+msg)
		return
	}
	turn := sc.Turns[n]
	for _, problem := range turn.Expect.check(req) {
		s.recordf("scenario %q turn %d: %s", sc.Name, n, problem)
	}
	s.mu.Lock()
	key := turnKey{idx, n}
	s.attempts[key]++
	attempt := s.attempts[key]
	s.answered++
	answered := s.answered
	s.mu.Unlock()

	if !s.wait(w, r, turn) {
		return
	}
	if turn.Gzip && acceptsGzip(r) {
		zw := newGzipWriter(w)
		defer zw.Close()
		w = zw
	}
	turn.RateLimit.setHeaders(w.Header(), api)
	if turn.Redirect != "" {
		http.Redirect(w, r, turn.Redirect, cmp.Or(turn.RedirectStatus, http.StatusTemporaryRedirect))
		return
	}
	if turn.failing(attempt) {
		s.fail(w, r, req, turn, api)
		return
	}
	if turn.Respond != nil {
		turn = turn.Respond(req, attempt)
	}
	a := answer{created: time.Now().Unix(), model: cmp.Or(turn.Model, req.Model), turn: n, t: turn}
	switch {
	case api == anthropicAPI:
		a.id = fmt.Sprintf("msg_llmtest_%d", answered)
		if req.Stream {
			a.writeMessageStream(w, req)
			return
		}
		a.writeMessage(w, req)
	case req.Stream:
		a.id = fmt.Sprintf("chatcmpl-llmtest-%d", answered)
		a.writeStream(w, req)
	default:
		a.id = fmt.Sprintf("chatcmpl-llmtest-%d", answered)
		a.writeCompletion(w, req)
	}
}

// wait holds a request for the turn's DelayMS, then until its Hold is closed. It reports
// false when the request must not be answered: the client gave up, or the server is closing
// (the connection is then dropped).
func (s *Server) wait(w http.ResponseWriter, r *http.Request, t Turn) bool {
	if t.DelayMS > 0 {
		timer := time.NewTimer(time.Duration(t.DelayMS) * time.Millisecond)
		defer timer.Stop()
		if !await(s, w, r, timer.C) {
			return false
		}
	}
	return t.Hold == nil || await(s, w, r, t.Hold)
}

// await blocks until ready delivers or is closed and reports true, or until the client gives
// up or the server closes and reports false; closing drops the connection. A nil ready waits
// for the client or the server only.
func await[T any](s *Server, w http.ResponseWriter, r *http.Request, ready <-chan T) bool {
	select {
	case <-ready:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closing:
		s.dropConnection(w)
		return false
	}
}

// scenarioFor selects the scenario for a request: an exact match first, else the first
// prefix match in order.
func (s *Server) scenarioFor(req Request) (int, Scenario, bool) {
	first := req.firstUserMessage()
	prefix := -1
	for i, sc := range s.scenarios {
		ok, exact := sc.matches(first)
		if exact {
			return i, sc, true
		}
		if ok && prefix < 0 {
			prefix = i
		}
	}
	if prefix < 0 {
		return 0, Scenario{}, false
	}
	return prefix, s.scenarios[prefix], true
}

// handleUnknown answers any other path with 404 and records it.
func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) {
	msg := s.recordf("unexpected request %s %s", r.Method, r.URL.Path)
	writeJSON(w, http.StatusNotFound, newErrorBody("invalid_request_error", "unknown_url", "llmtest: %s", msg))
}

// dialect is the API a request speaks.
type dialect int

const (
	// openAIAPI is POST /v1/chat/completions.
	openAIAPI dialect = iota
	// anthropicAPI is POST /v1/messages.
	anthropicAPI
)

// writeError writes an error body in the API's format: OpenAI's {"error": {message, type,
// code}} or Anthropic's {"type": "error", "error": {type, message}}.
func writeError(w http.ResponseWriter, api dialect, status int, typ, code, msg string) {
	if api == anthropicAPI {
		writeJSON(w, status, newAnthropicError(typ, msg))
		return
	}
	writeJSON(w, status, newErrorBody(typ, code, "%s", msg))
}

// writeJSON writes v as a JSON response with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// check returns one line per unmet expectation; a nil Expect checks nothing.
func (e *Expect) check(req Request) []string {
	if e == nil {
		return nil
	}
	var problems []string
	if e.Tools != nil {
		got := req.ToolNames()
		want := slices.Clone(e.Tools)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("tools offered = %v, want %v", got, want))
		}
	}
	problems = append(problems, checkFloat("temperature", req.Temperature, e.Temperature)...)
	problems = append(problems, checkFloat("top_p", req.TopP, e.TopP)...)
	if e.ToolChoice != "" && req.ToolChoiceName() != e.ToolChoice {
		problems = append(problems, fmt.Sprintf("tool_choice = %q, want %q", req.ToolChoiceName(), e.ToolChoice))
	}
	problems = append(problems, checkInt("max_tokens", req.MaxTokens, e.MaxTokens)...)
	problems = append(problems, checkInt("max_completion_tokens", req.MaxCompletionTokens, e.MaxCompletionTokens)...)
	if e.ReasoningEffort != "" && req.ReasoningEffort != e.ReasoningEffort {
		problems = append(problems, fmt.Sprintf("reasoning_effort = %q, want %q", req.ReasoningEffort, e.ReasoningEffort))
	}
	switch {
	case e.ThinkingBudget == nil:
	case req.Thinking == nil || req.Thinking.Type != "enabled":
		problems = append(problems, fmt.Sprintf("thinking is not enabled, want a budget of %d tokens", *e.ThinkingBudget))
	case req.Thinking.BudgetTokens != *e.ThinkingBudget:
		problems = append(problems, fmt.Sprintf("thinking.budget_tokens = %d, want %d", req.Thinking.BudgetTokens, *e.ThinkingBudget))
	}
	if e.Stop != nil && !slices.Equal(req.stopSequences(), e.Stop) {
		problems = append(problems, fmt.Sprintf("stop sequences = %q, want %q", req.stopSequences(), e.Stop))
	}
	return problems
}

// checkInt compares an optional token limit.
func checkInt(name string, got, want *int) []string {
	switch {
	case want == nil:
		return nil
	case got == nil:
		return []string{fmt.Sprintf("%s absent, want %d", name, *want)}
	case *got != *want:
		return []string{fmt.Sprintf("%s = %d, want %d", name, *got, *want)}
	}
	return nil
}

// checkFloat compares an optional sampling parameter.
func checkFloat(name string, got, want *float64) []string {
	switch {
	case want == nil:
		return nil
	case got == nil:
		return []string{fmt.Sprintf("%s absent, want %v", name, *want)}
	case *got != *want:
		return []string{fmt.Sprintf("%s = %v, want %v", name, *got, *want)}
	}
	return nil
}
