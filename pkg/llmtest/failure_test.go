package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

func TestFailureKinds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		failure      string
		retryAfterMS int
		stream       bool
		check        func(t *testing.T, resp *http.Response, body []byte)
	}{
		{name: "model_error is 500", failure: llmtest.FailModelError, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusInternalServerError)
			wantErrorBody(t, body, "server_error", "")
		}},
		{name: "invalid_response is not JSON", failure: llmtest.FailInvalidResponse, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusOK)
			if json.Valid(body) {
				t.Errorf("body %q is valid JSON", body)
			}
		}},
		{name: "invalid_response streamed", failure: llmtest.FailInvalidResponse, stream: true, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusOK)
			frames := sseFrames(t, body)
			if json.Valid([]byte(frames[0])) {
				t.Errorf("first frame %q is valid JSON", frames[0])
			}
		}},
		{name: "rate_limit with headers", failure: llmtest.FailRateLimit, retryAfterMS: 1500, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusTooManyRequests)
			if resp.Header.Get("Retry-After") != "2" || resp.Header.Get("retry-after-ms") != "1500" {
				t.Errorf("headers Retry-After %q retry-after-ms %q, want 2 and 1500",
					resp.Header.Get("Retry-After"), resp.Header.Get("retry-after-ms"))
			}
			wantErrorBody(t, body, "requests", "rate_limit_exceeded")
		}},
		{name: "rate_limit without delay", failure: llmtest.FailRateLimit, check: func(t *testing.T, resp *http.Response, _ []byte) {
			wantStatus(t, resp, http.StatusTooManyRequests)
			if resp.Header.Get("Retry-After") != "" {
				t.Error("Retry-After sent without retry_after_ms")
			}
		}},
		{name: "auth_error is 401", failure: llmtest.FailAuthError, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusUnauthorized)
			wantErrorBody(t, body, "invalid_request_error", "invalid_api_key")
		}},
		{name: "quota_exceeded is 429 insufficient_quota", failure: llmtest.FailQuotaExceeded, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusTooManyRequests)
			wantErrorBody(t, body, "insufficient_quota", "insufficient_quota")
		}},
		{name: "overloaded is 503", failure: llmtest.FailOverloaded, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusServiceUnavailable)
			wantErrorBody(t, body, "server_error", "")
		}},
		{name: "bad_request is 400", failure: llmtest.FailBadRequest, check: func(t *testing.T, resp *http.Response, body []byte) {
			wantStatus(t, resp, http.StatusBadRequest)
			wantErrorBody(t, body, "invalid_request_error", "unsupported_parameter")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{
				Content: "recovered", Failure: tc.failure, FailuresBeforeSuccess: 1, RetryAfterMS: tc.retryAfterMS,
			}}})
			client := newClient(t)
			body := chatBody("user", "x")
			body["stream"] = tc.stream
			resp, raw := post(t, client, srv.URL()+"/chat/completions", body)
			tc.check(t, resp, raw)
			resp, raw = post(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
			if c := decodeCompletion(t, resp, raw); *c.Choices[0].Message.Content != "recovered" {
				t.Errorf("second attempt content = %q", *c.Choices[0].Message.Content)
			}
		})
	}
}

func TestNetworkErrorClosesTheConnection(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{
		Content: "ok", Failure: llmtest.FailNetworkError, FailuresBeforeSuccess: 1,
	}}})
	client := newClient(t)
	resp, err := postErr(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("got status %d, want a transport error", resp.StatusCode)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Errorf("error = %v, want EOF or reset", err)
	}
	resp, body := post(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
	decodeCompletion(t, resp, body)
}

func TestTimeoutHoldsUntilTheClientGivesUp(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "late", Failure: llmtest.FailTimeout}}})
	client := newClient(t)
	client.Timeout = 50 * time.Millisecond
	resp, err := postErr(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("got status %d, want a timeout", resp.StatusCode)
	}
	var netErr interface{ Timeout() bool }
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Errorf("error = %v, want a timeout", err)
	}
}

func TestTimeoutReleasedByClose(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Failure: llmtest.FailTimeout}}})
	client := newClient(t)
	done := make(chan error, 1)
	go func() {
		resp, err := postErr(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a held request answered normally")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not release the held request")
	}
}

func TestEveryAttemptFailsWithoutFailuresBeforeSuccess(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "never", Failure: llmtest.FailAuthError}}})
	client := newClient(t)
	for range 3 {
		resp, _ := post(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
		wantStatus(t, resp, http.StatusUnauthorized)
	}
}

func TestFailuresBeforeSuccessCountsPerTurn(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{
		{Content: "one", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 2},
		{Content: "two", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 1},
	}})
	client := newClient(t)
	url := srv.URL() + "/chat/completions"
	turn0 := chatBody("user", "x")
	turn1 := chatBody("user", "x", "assistant", "one", "user", "again")
	for i, step := range []struct {
		body   map[string]any
		status int
	}{
		{turn0, 500}, {turn0, 500}, {turn0, 200}, {turn0, 200}, {turn1, 500}, {turn1, 200},
	} {
		resp, body := post(t, client, url, step.body)
		if resp.StatusCode != step.status {
			t.Errorf("attempt %d: status %d, want %d (%s)", i+1, resp.StatusCode, step.status, body)
		}
	}
}

func TestRequestContextCancelReleasesTimeout(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Failure: llmtest.FailTimeout}}})
	client := newClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	resp, err := client.Do(requestWithContext(t, ctx, srv.URL()+"/chat/completions", chatBody("user", "x")))
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want context deadline exceeded", err)
	}
}

func wantStatus(t *testing.T, resp *http.Response, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d", resp.StatusCode, status)
	}
}

func wantErrorBody(t *testing.T, body []byte, typ, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	gotCode := ""
	if e.Error.Code != nil {
		gotCode = *e.Error.Code
	}
	if e.Error.Message == "" || e.Error.Type != typ || gotCode != code {
		t.Errorf("error = %+v code %q, want type %q code %q", e.Error, gotCode, typ, code)
	}
}
