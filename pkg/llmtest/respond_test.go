package llmtest_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRespondWritesTheAnswerFromTheRequest: a turn's Respond sees the request and the attempt
// of the turn, its answer replaces the turn's, and injected failures still come first.
func TestRespondWritesTheAnswerFromTheRequest(t *testing.T) {
	var (
		mu       sync.Mutex
		attempts []int
	)
	srv := llmtest.New(t, llmtest.Scenario{Name: "echo", Match: "echo", Turns: []llmtest.Turn{{
		Content: "never sent", FailuresBeforeSuccess: 1, Failure: llmtest.FailModelError,
		Respond: func(req llmtest.Request, attempt int) llmtest.Turn {
			mu.Lock()
			attempts = append(attempts, attempt)
			mu.Unlock()
			last := req.Messages[len(req.Messages)-1]
			return llmtest.Turn{Content: "you said: " + string(last.Content), FinishReason: "length"}
		},
	}}})
	client := newClient(t)
	url := srv.URL() + "/chat/completions"

	if resp, body := post(t, client, url, chatBody("user", "echo", "user", "first")); resp.StatusCode != 500 {
		t.Fatalf("attempt 1: status %d %s, want the injected 500", resp.StatusCode, body)
	}
	c := complete(t, client, url, chatBody("user", "echo", "user", "second"))
	ch := c.Choices[0]
	if ch.Message.Content == nil || *ch.Message.Content != "you said: second" || ch.FinishReason != "length" {
		t.Errorf("answer %v finish %q", ch.Message.Content, ch.FinishReason)
	}
	mu.Lock()
	if len(attempts) != 1 || attempts[0] != 2 {
		t.Errorf("Respond called for attempts %v, want [2]", attempts)
	}
	mu.Unlock()

	frames := sseFrames(t, func() []byte {
		body := chatBody("user", "echo", "user", "streamed")
		body["stream"] = true
		_, data := post(t, client, url, body)
		return data
	}())
	if joined := strings.Join(frames, ""); !strings.Contains(joined, "streamed") || !strings.Contains(joined, `"finish_reason":"length"`) {
		t.Errorf("streamed answer %s", joined)
	}
}
