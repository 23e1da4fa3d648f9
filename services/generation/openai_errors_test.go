package generation_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// errorCase is one provider failure and what the caller must see; O is the provider's
// options type.
type errorCase[O any] struct {
	name       string
	baseURL    func(t *testing.T) (url string, requests func() int)
	stream     bool
	edit       func(*O)
	code       codes.Code
	class      typev1.ErrorClass
	retryable  bool
	retryAfter time.Duration
	requests   int // how many HTTP requests the provider must have made; 0 = not checked
	contains   []string
}

// runErrorCases runs each case against a provider made by newProvider at the case's URL,
// through the gRPC service, and checks the stage error the caller sees.
func runErrorCases[O any](t *testing.T, name, model string, newProvider func(*testing.T, string, func(*O)) generation.Provider, cases []errorCase[O]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, requests := tc.baseURL(t)
			client := serveProviders(t, map[string]generation.Provider{name: newProvider(t, url, tc.edit)})
			req := request(name, model, user("hi"))
			var err error
			if tc.stream {
				_, _, err = streamAll(t, client, req)
			} else {
				_, err = client.Generate(t.Context(), req)
			}
			se := stageError(t, err, tc.code)
			if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED || se.Class != tc.class || se.Stage != "generation" {
				t.Errorf("stage error = %v/%v stage %q, want GENERATION_FAILED/%v (%q)", se.Code, se.Class, se.Stage, tc.class, se.Msg)
			}
			if se.Retryable() != tc.retryable {
				t.Errorf("retryable = %v, want %v", se.Retryable(), tc.retryable)
			}
			if tc.retryAfter > 0 && se.RetryAfter != tc.retryAfter {
				t.Errorf("retry after = %v, want %v", se.RetryAfter, tc.retryAfter)
			}
			for _, want := range tc.contains {
				if !strings.Contains(se.Msg, want) {
					t.Errorf("message %q lacks %q", se.Msg, want)
				}
			}
			if strings.Contains(se.Msg, testAPIKey) {
				t.Errorf("message leaks the API key: %q", se.Msg)
			}
			if tc.requests > 0 && requests() != tc.requests {
				t.Errorf("HTTP requests = %d, want %d", requests(), tc.requests)
			}
		})
	}
}

// scripted serves a single llmtest turn that always fails with failure.
func scripted(failure string, retryAfterMS int) func(t *testing.T) (string, func() int) {
	return func(t *testing.T) (string, func() int) {
		srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
			Content: "never", Failure: failure, RetryAfterMS: retryAfterMS,
		}}})
		return srv.URL(), func() int { return len(srv.Requests()) }
	}
}

// replying serves every request with status, headers and body.
func replying(status int, headers map[string]string, body string) func(t *testing.T) (string, func() int) {
	return func(t *testing.T) (string, func() int) {
		var n atomic.Int32
		url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			for k, v := range headers {
				w.Header().Set(k, v)
			}
			if strings.HasPrefix(body, "{") {
				w.Header().Set("Content-Type", "application/json")
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, strings.ReplaceAll(body, "$AUTH", r.Header.Get("Authorization")))
		})
		return url, func() int { return int(n.Load()) }
	}
}

func TestOpenAIErrorClasses(t *testing.T) {
	cases := []errorCase[generation.OpenAIOptions]{
		{
			name: "401 is AUTH", baseURL: scripted(llmtest.FailAuthError, 0),
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH, requests: 1,
			contains: []string{"openai: authentication failed (HTTP 401", "Incorrect API key provided"},
		},
		{
			name: "403 is AUTH", baseURL: replying(403, nil, `{"error":{"message":"Project not allowed","type":"invalid_request_error"}}`),
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH, requests: 1,
			contains: []string{"HTTP 403", "Project not allowed"},
		},
		{
			name: "402 is QUOTA", baseURL: replying(402, nil, `{"error":"payment required: add credits"}`),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA, requests: 1,
			contains: []string{"quota exceeded (HTTP 402", "add credits"},
		},
		{
			name: "429 with insufficient_quota body is QUOTA", baseURL: scripted(llmtest.FailQuotaExceeded, 0),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA, requests: 1,
			contains: []string{"HTTP 429", "exceeded your current quota"},
		},
		{
			name: "429 is RATE_LIMITED with retry-after-ms, not retried", baseURL: scripted(llmtest.FailRateLimit, 1500),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			retryAfter: 1500 * time.Millisecond, requests: 1,
			contains: []string{"rate limited (HTTP 429", "retry after 1.5s"},
		},
		{
			name: "429 with Retry-After seconds", baseURL: replying(429, map[string]string{"Retry-After": "3"}, `{"error":{"message":"slow down","type":"requests"}}`),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			retryAfter: 3 * time.Second, requests: 1,
		},
		{
			name: "500 is SERVER after one request (no retry behind the orchestrator)", baseURL: scripted(llmtest.FailModelError, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
			contains: []string{"server error (HTTP 500", "The server had an error"},
		},
		{
			name: "529 overloaded is SERVER", baseURL: replying(529, nil, `{"error":{"type":"overloaded_error","message":"Overloaded"}}`),
			edit: func(o *generation.OpenAIOptions) { o.MaxRetries = -1 },
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
			contains: []string{"HTTP 529", "Overloaded"},
		},
		{
			name: "400 is INVALID_REQUEST, not retryable", baseURL: scripted(llmtest.FailBadRequest, 0),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"request refused (HTTP 400 Bad Request)", "Unsupported parameter"},
		},
		{
			name:    "400 context_length_exceeded is CONTEXT_OVERFLOW, not retryable",
			baseURL: scripted(llmtest.FailContextLength, 0),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW, requests: 1,
			contains: []string{"longer than the model's context window (HTTP 400 Bad Request)",
				"maximum context length is 128000 tokens"},
		},
		{
			name: "llama.cpp's exceed_context_size_error is CONTEXT_OVERFLOW",
			baseURL: replying(400, nil, `{"error":{"code":400,"message":"the request exceeds the available `+
				`context size, try increasing it","type":"exceed_context_size_error"}}`),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW, requests: 1,
			contains: []string{"exceeds the available context size"},
		},
		{
			name: "413 is INVALID_REQUEST", baseURL: replying(413, nil, `{"error":{"message":"request too large"}}`),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"HTTP 413", "request too large"},
		},
		{
			name: "422 is INVALID_REQUEST", baseURL: replying(422, nil, `{"error":"messages: field required"}`),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"HTTP 422", "field required"},
		},
		{
			name: "404 (an unknown model) is INVALID_REQUEST, not retryable", baseURL: replying(404, nil, `{"error":{"message":"model gpt-x does not exist","code":"model_not_found"}}`),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"not found (HTTP 404 Not Found)", "model gpt-x does not exist"},
		},
		{
			name: "other 4xx is INVALID_REQUEST", baseURL: replying(405, nil, `{"error":"method not allowed"}`),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"request refused (HTTP 405", "method not allowed"},
		},
		{
			name: "408 is TIMEOUT, retryable", baseURL: replying(408, nil, `{"error":{"message":"request timed out"}}`),
			code: codes.DeadlineExceeded, class: typev1.ErrorClass_ERROR_CLASS_TIMEOUT, retryable: true, requests: 1,
			contains: []string{"request timeout (HTTP 408 Request Timeout)", "request timed out"},
		},
		{
			name: "408 is retried by a provider configured to retry", baseURL: replying(408, nil, `{"error":{"message":"request timed out"}}`),
			edit: func(o *generation.OpenAIOptions) {
				o.MaxRetries, o.RetryWaitMin, o.RetryWaitMax = 1, time.Millisecond, time.Millisecond
			},
			code: codes.DeadlineExceeded, class: typev1.ErrorClass_ERROR_CLASS_TIMEOUT, retryable: true, requests: 2,
		},
		{
			name: "409 is SERVER, retryable", baseURL: replying(409, nil, `{"error":{"message":"another request is in progress"}}`),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
			contains: []string{"conflict (HTTP 409 Conflict)", "another request is in progress"},
		},
		{
			name: "409 is retried by a provider configured to retry", baseURL: replying(409, nil, `{"error":{"message":"another request is in progress"}}`),
			edit: func(o *generation.OpenAIOptions) {
				o.MaxRetries, o.RetryWaitMin, o.RetryWaitMax = 1, time.Millisecond, time.Millisecond
			},
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 2,
		},
		{
			name: "invalid JSON is BAD_RESPONSE", baseURL: scripted(llmtest.FailInvalidResponse, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true, requests: 1,
			contains: []string{"not valid JSON"},
		},
		{
			name: "invalid stream chunk is BAD_RESPONSE", baseURL: scripted(llmtest.FailInvalidResponse, 0), stream: true,
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"stream chunk is not valid JSON"},
		},
		{
			name: "no choices is BAD_RESPONSE", baseURL: replying(200, nil, `{"id":"x","choices":[]}`),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"no choices"},
		},
		{
			name:    "an error body with status 200 (OpenRouter's once the model started) keeps its class",
			baseURL: replying(200, nil, `{"error":{"code":429,"message":"Rate limit exceeded upstream"}}`),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			contains: []string{"openai: error in the answer: Rate limit exceeded upstream"},
		},
		{
			name:    "an error body with status 200 and finish_reason error keeps its class",
			baseURL: replying(200, nil, `{"error":{"code":402,"message":"Insufficient credits"},"choices":[{"message":{"content":"Hi"},"finish_reason":"error"}]}`),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA,
			contains: []string{"openai: error in the answer: Insufficient credits"},
		},
		{
			name: "an error body with status 200 to a streamed request keeps its class", stream: true,
			baseURL: replying(200, nil, `{"error":{"code":402,"message":"Insufficient credits"}}`),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA,
			contains: []string{"openai: error in the answer: Insufficient credits"},
		},
		{
			name: "dropped connection is NETWORK after one request (no retry behind the orchestrator)", baseURL: scripted(llmtest.FailNetworkError, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_NETWORK, retryable: true, requests: 1,
			contains: []string{"cannot reach"},
		},
		{
			name: "connection refused is NETWORK", baseURL: closedPort,
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_NETWORK, retryable: true,
			contains: []string{"cannot reach", "connection refused"},
		},
		{
			name: "slow server is TIMEOUT", baseURL: scripted(llmtest.FailTimeout, 0),
			edit: func(o *generation.OpenAIOptions) { o.Timeout = 100 * time.Millisecond },
			code: codes.DeadlineExceeded, class: typev1.ErrorClass_ERROR_CLASS_TIMEOUT, retryable: true, requests: 1,
			contains: []string{"no answer", "provider timeout 100ms"},
		},
		{
			name: "error inside the stream", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"message\":\"upstream crashed\",\"type\":\"server_error\"}}\n\n"),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{"error in the stream: upstream crashed"},
		},
		{
			name: "quota error inside the stream (a numeric code, as OpenRouter sends) is QUOTA, not retryable", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"error\":{\"code\":402,\"message\":\"Insufficient credits\"},\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n"),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA,
			contains: []string{"error in the stream: Insufficient credits"},
		},
		{
			name: "rate limit inside the stream (code 429) is RATE_LIMITED", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"error\":{\"code\":429,\"message\":\"Rate limit exceeded upstream\"}}\n\n"),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			contains: []string{"Rate limit exceeded upstream"},
		},
		{
			name: "context length error inside the stream is CONTEXT_OVERFLOW, not retryable", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n"),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW,
			contains: []string{"maximum context length is 8192 tokens"},
		},
		{
			name: "bad request inside the stream (vLLM's code 400) is INVALID_REQUEST", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"error\":{\"object\":\"error\",\"message\":\"stop must be a list\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}\n\ndata: [DONE]\n\n"),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST,
			contains: []string{"stop must be a list"},
		},
		{
			name: "finish_reason error ends the stream as SERVER, not as an answer", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n"),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{`openai: the answer ended with finish_reason "error"`},
		},
		{
			name:    "finish_reason error in a completion is SERVER, not an answer",
			baseURL: replying(200, nil, `{"choices":[{"message":{"content":"Hi"},"finish_reason":"error"}]}`),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{`openai: the answer ended with finish_reason "error"`},
		},
		{
			name: "an error event without the error envelope ({\"object\":\"error\"}) ends the stream", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"},
				"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"object\":\"error\",\"message\":\"engine dead\",\"type\":\"InternalServerError\",\"code\":500}\n\ndata: [DONE]\n\n"),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{"openai: error in the stream: engine dead"},
		},
		{
			name: "an HTML page with status 200 to a streamed request is BAD_RESPONSE that quotes it", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/html; charset=utf-8"}, "<html><body>Sign in to the proxy</body></html>"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"openai: the answer is text/html, not an event stream: <html><body>Sign in to the proxy</body></html>"},
		},
		{
			name: "connection lost while the answer streams is NETWORK, and says so", stream: true,
			baseURL: cutOff("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_NETWORK, retryable: true,
			contains: []string{"openai: the connection to http://", "was lost while the answer streamed: unexpected EOF"},
		},
		{
			name: "stream cut short is BAD_RESPONSE", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/event-stream"}, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"without a finish_reason"},
		},
		{
			name: "the API key never appears in messages", baseURL: replying(401, nil, `{"error":{"message":"bad key $AUTH","type":"invalid_request_error"}}`),
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH,
			contains: []string{"bad key Bearer [redacted]"},
		},
	}
	runErrorCases(t, "openai", "gpt-test", openAIAt, cases)
}

func TestRetryAfterDateIsHonoured(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	url, _ := replying(429, map[string]string{"Retry-After": date}, `{"message":"later"}`)(t)
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	_, err := client.Generate(t.Context(), request("openai", "gpt-test", user("hi")))
	se := stageError(t, err, codes.ResourceExhausted)
	if se.Class != typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED || !strings.Contains(se.Msg, "later") {
		t.Errorf("error = %v %q", se.Class, se.Msg)
	}
	if se.RetryAfter < 85*time.Second || se.RetryAfter > 91*time.Second {
		t.Errorf("retry after = %v, want about 90s", se.RetryAfter)
	}
}

// TestServerErrorRetriedThenAnswered: a provider configured to retry (MaxRetries; none by
// default) retries a 5xx.
func TestServerErrorRetriedThenAnswered(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
		Content: "recovered", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 2,
	}}})
	resp, err := openAIClient(t, srv, func(o *generation.OpenAIOptions) { o.MaxRetries = 2 }).Generate(t.Context(), request("openai", "gpt-test", user("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetContent() != "recovered" || len(srv.Requests()) != 3 {
		t.Errorf("content %q after %d requests, want recovered after 3", resp.GetContent(), len(srv.Requests()))
	}
}

func TestStreamAnsweredWithPlainJSON(t *testing.T) {
	url, _ := replying(200, nil, `{"model":"local-1","choices":[{"message":{"content":"whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)(t)
	client := serveProviders(t, map[string]generation.Provider{"local": openAIAt(t, url, nil)})
	deltas, final, err := streamAll(t, client, request("local", "local-1", user("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 1 || deltas[0].GetContent() != "whole answer" || final.GetContent() != "whole answer" || final.GetUsage().GetTotal() != 5 {
		t.Errorf("deltas %v final %v", deltas, final)
	}
}

// TestStreamCutAfterItsFinishIsAnswered: once a streamed answer has its finish_reason, the
// answer is complete, whether the stream then ends cleanly without [DONE] or its connection is
// lost before the usage chunk and [DONE]: both are the answer, from one request. A lost
// connection was a NETWORK failure, and the answer, paid for, was asked for again.
func TestStreamCutAfterItsFinishIsAnswered(t *testing.T) {
	const events = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	for name, serve := range map[string]func(t *testing.T) (string, func() int){
		"the stream ends":        replying(200, map[string]string{"Content-Type": "text/event-stream"}, events),
		"the connection is lost": cutOff(events),
	} {
		t.Run(name, func(t *testing.T) {
			url, requests := serve(t)
			client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
			_, final, err := streamAll(t, client, request("openai", "gpt-test", user("hi")))
			if err != nil {
				t.Fatalf("the answer was refused: %v", err)
			}
			if final.GetContent() != "Hi" || final.GetStopReason() != "stop" || requests() != 1 {
				t.Errorf("answer %q (stop reason %q) after %d requests, want Hi (stop) after 1", final.GetContent(), final.GetStopReason(), requests())
			}
		})
	}
}

// cutOff streams events, then drops the connection without ending the chunked body: a
// connection lost while the answer streams.
func cutOff(events string) func(t *testing.T) (string, func() int) {
	return func(t *testing.T) (string, func() int) {
		var n atomic.Int32
		url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, events)
			w.(http.Flusher).Flush()
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = buf.Flush()
			_ = conn.Close()
		})
		return url, func() int { return int(n.Load()) }
	}
}

// closedPort returns the URL of a port nothing listens on.
func closedPort(t *testing.T) (string, func() int) {
	return fmt.Sprintf("http://%s/v1", grpctest.FreeAddr(t)), func() int { return 0 }
}

// TestHugeRetryAfterIsCapped: a Retry-After too long for a time.Duration is the longest wait
// the stage advertises (a day), not a negative wait that reads as none.
func TestHugeRetryAfterIsCapped(t *testing.T) {
	for _, header := range []map[string]string{
		{"Retry-After": "1e12"},
		{"retry-after-ms": "1e300"},
		{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
	} {
		url, _ := replying(429, header, `{"message":"much later"}`)(t)
		client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
		_, err := client.Generate(t.Context(), request("openai", "gpt-test", user("hi")))
		se := stageError(t, err, codes.ResourceExhausted)
		if se.RetryAfter != 24*time.Hour || !strings.Contains(se.Msg, "retry after 24h0m0s") {
			t.Errorf("%v: retry after = %v (%q), want 24h", header, se.RetryAfter, se.Msg)
		}
	}
}
