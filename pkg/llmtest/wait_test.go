package llmtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"go.uber.org/goleak"
)

func TestDelayWaitsBeforeAnswering(t *testing.T) {
	const delay = 100 * time.Millisecond
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "slow", DelayMS: int(delay / time.Millisecond)}}})
	begin := time.Now()
	c := complete(t, newClient(t), srv.URL()+"/chat/completions", chatBody("user", "x"))
	if elapsed := time.Since(begin); elapsed < delay {
		t.Errorf("answered after %s, want at least %s", elapsed, delay)
	}
	if got := c.Choices[0].Message.Content; got == nil || *got != "slow" {
		t.Errorf("content = %v, want slow", got)
	}
}

func TestHoldAnswersOnceReleased(t *testing.T) {
	hold := make(chan struct{})
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{
		{Content: "released", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 1, Hold: hold},
	}})
	client := newClient(t)
	answered := make(chan int, 2)
	send := func() {
		resp, _ := post(t, client, srv.URL()+"/chat/completions", chatBody("user", "x"))
		answered <- resp.StatusCode
	}
	go send()
	go send()
	awaitRequests(t, srv, 2)
	select {
	case status := <-answered:
		t.Fatalf("a held request was answered with status %d", status)
	default:
	}
	close(hold)
	// The hold comes before the injected failure: one attempt fails, the other answers.
	got := map[int]int{<-answered: 1}
	got[<-answered]++
	if got[http.StatusInternalServerError] != 1 || got[http.StatusOK] != 1 {
		t.Errorf("statuses after release = %v, want one 500 and one 200", got)
	}
}

// TestWaitEndsWhenTheClientGivesUp: a request waiting out a delay or a hold is dropped as soon
// as its client goes away (e.g. the process that asked was killed), leaving no goroutine
// behind.
func TestWaitEndsWhenTheClientGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn llmtest.Turn
	}{
		{"delay", llmtest.Turn{Content: "never", DelayMS: int(time.Hour / time.Millisecond)}},
		{"hold", llmtest.Turn{Content: "never", Hold: make(chan struct{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{tc.turn}})
			client := newClient(t)
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			req := requestWithContext(t, ctx, srv.URL()+"/chat/completions", chatBody("user", "x"))
			resp, err := client.Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error = %v, want context deadline exceeded", err)
			}
			if err := goleak.Find(before); err != nil {
				t.Errorf("the abandoned request is still held: %v", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

// TestStreamingPausesAfterTheFirstEvent: a turn's Streaming hook runs once a streamed answer's
// first event is out, OpenAI's and Anthropic's: the client has the response's headers and that
// event while the hook holds the rest, which follows once it returns.
func TestStreamingPausesAfterTheFirstEvent(t *testing.T) {
	for _, tc := range []struct {
		api, path, first, last string
		header                 http.Header
	}{
		{"openai", "/chat/completions", `"role":"assistant"`, "[DONE]", nil},
		{"anthropic", "/messages", "event: message_start", "event: message_stop", http.Header{"Anthropic-Version": {"2023-06-01"}}},
	} {
		t.Run(tc.api, func(t *testing.T) {
			paused, resume := make(chan struct{}), make(chan struct{})
			srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "the rest", Streaming: func() {
				close(paused)
				<-resume
			}}}})
			body := messagesBody("user", "x")
			body["stream"] = true
			req := requestWithContext(t, t.Context(), srv.URL()+tc.path, body)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := newClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			select {
			case <-paused:
			case <-time.After(10 * time.Second):
				t.Fatal("the answer did not pause after its first event")
			}
			first := make([]byte, 4096)
			n, err := resp.Body.Read(first)
			if err != nil || !strings.Contains(string(first[:n]), tc.first) {
				t.Fatalf("first read %q, %v; want the first event (%s)", first[:n], err, tc.first)
			}
			close(resume)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || !strings.Contains(string(rest), "the") || !strings.Contains(string(rest), tc.last) {
				t.Errorf("the rest of the answer %q, %v; want its content through %s", rest, err, tc.last)
			}
		})
	}
}

// TestHoldEmbeddingsHoldsWhatItNames: HoldEmbeddings holds the embeddings requests with an
// input containing its text until released, and answers the others at once.
func TestHoldEmbeddingsHoldsWhatItNames(t *testing.T) {
	srv := llmtest.New(t)
	hold := make(chan struct{})
	srv.HoldEmbeddings("slow", hold)
	client := newClient(t)
	resp, _ := post(t, client, srv.URL()+"/embeddings",
		map[string]any{"model": "embed-1", "input": []string{"quick"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an embedding nothing holds: status %d", resp.StatusCode)
	}
	answered := make(chan int, 1)
	go func() {
		resp, _ := post(t, client, srv.URL()+"/embeddings",
			map[string]any{"model": "embed-1", "input": []string{"quick", "a slow text"}})
		answered <- resp.StatusCode
	}()
	awaitRequests(t, srv, 2)
	select {
	case status := <-answered:
		t.Fatalf("a held embedding was answered with status %d", status)
	default:
	}
	close(hold)
	if status := <-answered; status != http.StatusOK {
		t.Errorf("the released embedding: status %d, want 200", status)
	}
}

// awaitRequests waits, up to 10 s, until srv has received n requests.
func awaitRequests(t *testing.T, srv *llmtest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests arrived", len(srv.Requests()), n)
		}
		time.Sleep(time.Millisecond)
	}
}
