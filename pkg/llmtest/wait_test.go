package llmtest_test

import (
	"context"
	"errors"
	"net/http"
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
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Requests()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 requests arrived", len(srv.Requests()))
		}
		time.Sleep(time.Millisecond)
	}
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
