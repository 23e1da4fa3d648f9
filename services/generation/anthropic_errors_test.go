package generation_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// replyingSSE serves every request with an event stream body.
func replyingSSE(body string) func(t *testing.T) (string, func() int) {
	return replying(http.StatusOK, map[string]string{"Content-Type": "text/event-stream"}, body)
}

// echoingKey serves 401 with an error message that quotes the x-api-key header.
func echoingKey(t *testing.T) (string, func() int) {
	var n atomic.Int32
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+r.Header.Get("x-api-key")+`"}}`)
	})
	return url, func() int { return int(n.Load()) }
}

// streamStart is the opening of an Anthropic event stream.
const streamStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"

// TestAnthropicStreamCutAfterItsStopReasonIsAnswered: once message_delta has brought the stop
// reason (and the final usage), every content block has ended and the answer is complete: a
// stream that breaks off before message_stop, cleanly or with its connection lost, is that
// answer, from one request. Both were failures, and the answer, paid for, was asked for again.
func TestAnthropicStreamCutAfterItsStopReasonIsAnswered(t *testing.T) {
	const events = streamStart +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n"
	for name, serve := range map[string]func(t *testing.T) (string, func() int){
		"the stream ends":        replyingSSE(events),
		"the connection is lost": cutOff(events),
	} {
		t.Run(name, func(t *testing.T) {
			url, requests := serve(t)
			client := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, url, nil)})
			_, final, err := streamAll(t, client, request("anthropic", "claude-test", user("hi")))
			if err != nil {
				t.Fatalf("the answer was refused: %v", err)
			}
			if final.GetContent() != "Hi" || final.GetStopReason() != "stop" || final.GetUsage().GetOutput() != 3 || requests() != 1 {
				t.Errorf("answer %q (stop reason %q, usage %v) after %d requests, want Hi (stop, 3 output tokens) after 1",
					final.GetContent(), final.GetStopReason(), final.GetUsage(), requests())
			}
		})
	}
}

func TestAnthropicErrorClasses(t *testing.T) {
	cases := []errorCase[generation.AnthropicOptions]{
		{
			name: "401 authentication_error is AUTH", baseURL: scripted(llmtest.FailAuthError, 0),
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH, requests: 1,
			contains: []string{"anthropic: authentication failed (HTTP 401 Unauthorized): invalid x-api-key"},
		},
		{
			name: "403 permission_error is AUTH", baseURL: replying(403, nil, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`),
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH, requests: 1,
			contains: []string{"HTTP 403", "does not have permission"},
		},
		{
			name: "402 billing_error is QUOTA", baseURL: replying(402, nil, `{"type":"error","error":{"type":"billing_error","message":"Billing issue."}}`),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA, requests: 1,
			contains: []string{"quota exceeded (HTTP 402 Payment Required): Billing issue."},
		},
		{
			name: "400 credit balance too low is QUOTA", baseURL: scripted(llmtest.FailQuotaExceeded, 0),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA, requests: 1,
			contains: []string{"quota exceeded (HTTP 400 Bad Request)", "credit balance is too low"},
		},
		{
			name: "400 invalid_request_error is INVALID_REQUEST, not retryable", baseURL: scripted(llmtest.FailBadRequest, 0),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"request refused (HTTP 400 Bad Request)", "input_schema"},
		},
		{
			name:    `400 "prompt is too long" is CONTEXT_OVERFLOW, not retryable`,
			baseURL: scripted(llmtest.FailContextLength, 0),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW, requests: 1,
			contains: []string{"longer than the model's context window (HTTP 400 Bad Request)",
				"prompt is too long: 208917 tokens > 200000 maximum"},
		},
		{
			name:    "429 spend limit is QUOTA, not a rate limit",
			baseURL: replying(429, nil, `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}`),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_QUOTA, requests: 1,
			contains: []string{"usage limits"},
		},
		{
			name: "429 rate_limit_error is RATE_LIMITED with retry-after, not retried", baseURL: scripted(llmtest.FailRateLimit, 2500),
			code: codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			retryAfter: 3 * time.Second, requests: 1,
			contains: []string{"rate limited (HTTP 429 Too Many Requests)", "rate limit", "retry after 3s"},
		},
		{
			name: "529 overloaded_error is SERVER after one request (no retry behind the orchestrator)", baseURL: scripted(llmtest.FailOverloaded, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
			contains: []string{"anthropic: overloaded (HTTP 529 Overloaded): Overloaded"},
		},
		{
			name: "500 api_error is SERVER after one request (no retry behind the orchestrator)", baseURL: scripted(llmtest.FailModelError, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
			contains: []string{"server error (HTTP 500", "Internal server error"},
		},
		{
			name: "retries can be disabled", baseURL: scripted(llmtest.FailOverloaded, 0),
			edit: func(o *generation.AnthropicOptions) { o.MaxRetries = -1 },
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true, requests: 1,
		},
		{
			name: "404 not_found_error (an unknown model) is INVALID_REQUEST", baseURL: replying(404, nil, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`),
			code: codes.InvalidArgument, class: typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, requests: 1,
			contains: []string{"not found (HTTP 404", "model: claude-x"},
		},
		{
			name: "invalid JSON is BAD_RESPONSE", baseURL: scripted(llmtest.FailInvalidResponse, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true, requests: 1,
			contains: []string{"the message is not valid JSON"},
		},
		{
			name: "a body that is not a message is BAD_RESPONSE", baseURL: replying(200, nil, `{"type":"completion","completion":"hi"}`),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{`not a message (type "completion")`},
		},
		{
			name: "an error body with status 200 keeps its class", baseURL: replying(200, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{"Overloaded"},
		},
		{
			name: "invalid stream event is BAD_RESPONSE", baseURL: scripted(llmtest.FailInvalidResponse, 0), stream: true,
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"stream event is not valid JSON"},
		},
		{
			name: "overloaded error event in the stream is SERVER", stream: true,
			baseURL: replyingSSE(streamStart + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_SERVER, retryable: true,
			contains: []string{"anthropic: error in the stream: Overloaded"},
		},
		{
			name: "rate limit error event in the stream is RATE_LIMITED", stream: true,
			baseURL: replyingSSE(streamStart + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n"),
			code:    codes.ResourceExhausted, class: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, retryable: true,
			contains: []string{"slow down"},
		},
		{
			name: "an HTML page with status 200 to a streamed request is BAD_RESPONSE that quotes it", stream: true,
			baseURL: replying(200, map[string]string{"Content-Type": "text/html"}, "<html><body>Bad gateway</body></html>"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"anthropic: the answer is text/html, not an event stream: <html><body>Bad gateway</body></html>"},
		},
		{
			name: "connection lost while the answer streams is NETWORK, and says so", stream: true, baseURL: cutOff(streamStart),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_NETWORK, retryable: true,
			contains: []string{"anthropic: the connection to http://", "was lost while the answer streamed: unexpected EOF"},
		},
		{
			name: "stream cut short is BAD_RESPONSE", stream: true, baseURL: replyingSSE(streamStart),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"the stream ended without message_stop"},
		},
		{
			name: "a delta before message_start is BAD_RESPONSE", stream: true,
			baseURL: replyingSSE("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"content_block_delta before message_start"},
		},
		{
			name: "a delta of a block never started is BAD_RESPONSE", stream: true,
			baseURL: replyingSSE(streamStart + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"),
			code:    codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, retryable: true,
			contains: []string{"block 3, which was not started"},
		},
		{
			name: "dropped connection is NETWORK after one request (no retry behind the orchestrator)", baseURL: scripted(llmtest.FailNetworkError, 0),
			code: codes.Unavailable, class: typev1.ErrorClass_ERROR_CLASS_NETWORK, retryable: true, requests: 1,
			contains: []string{"cannot reach"},
		},
		{
			name: "slow server is TIMEOUT", baseURL: scripted(llmtest.FailTimeout, 0),
			edit: func(o *generation.AnthropicOptions) { o.Timeout = 100 * time.Millisecond },
			code: codes.DeadlineExceeded, class: typev1.ErrorClass_ERROR_CLASS_TIMEOUT, retryable: true, requests: 1,
			contains: []string{"no answer", "provider timeout 100ms"},
		},
		{
			name: "the API key never appears in messages", baseURL: echoingKey,
			code: codes.PermissionDenied, class: typev1.ErrorClass_ERROR_CLASS_AUTH,
			contains: []string{"invalid x-api-key [redacted]"},
		},
	}
	runErrorCases(t, "anthropic", "claude-test", anthropicAt, cases)
}

// TestAnthropicOverloadedRetriedThenAnswered: a provider configured to retry (MaxRetries;
// none by default) retries a 529.
func TestAnthropicOverloadedRetriedThenAnswered(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
		Content: "recovered", Failure: llmtest.FailOverloaded, FailuresBeforeSuccess: 2,
	}}})
	resp, err := anthropicClient(t, srv, func(o *generation.AnthropicOptions) { o.MaxRetries = 2 }).Generate(t.Context(), request("anthropic", "claude-test", user("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetContent() != "recovered" || len(srv.Requests()) != 3 {
		t.Errorf("content %q after %d requests, want recovered after 3", resp.GetContent(), len(srv.Requests()))
	}
}
