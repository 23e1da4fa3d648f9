package generation_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/services/generation"
)

// A provider's default HTTP client keeps a connection for each request of a burst, and a
// streamed answer gives its connection back once it is read: a second burst of streamed
// requests dials nothing.
func TestDefaultClientReusesConnections(t *testing.T) {
	const burst = 8 // more than the GOMAXPROCS+1 idle connections an http.Transport keeps by default
	var (
		dials   atomic.Int64
		mu      sync.Mutex
		waiting int
		release = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every request of a burst waits for the others, so that they hold a connection each.
		mu.Lock()
		waiting++
		all := release
		if waiting == burst {
			close(release)
			waiting, release = 0, make(chan struct{})
		}
		mu.Unlock()
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := serveProviders(t, map[string]generation.Provider{
		"openai": generation.NewOpenAI(generation.OpenAIOptions{Name: "openai", BaseURL: srv.URL + "/v1", APIKey: testAPIKey}),
	})
	for round := range 2 {
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				stream, err := client.GenerateStream(t.Context(), &generationv1.GenerateStreamRequest{Request: request("openai", "m", user("hi"))})
				if err != nil {
					t.Error(err)
					return
				}
				for {
					if _, err := stream.Recv(); err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		if got := dials.Load(); got != burst {
			t.Fatalf("after burst %d: %d connections dialled, want %d", round+1, got, burst)
		}
	}
}

// A server that holds the response open after [DONE] does not hold the answer back: the
// rest of a finished stream is read only for a moment before the connection is given up.
func TestStreamHeldOpenAfterDone(t *testing.T) {
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	_, final, err := streamAll(t, client, request("openai", "m", user("hi")))
	if err != nil || final.GetContent() != "hi" {
		t.Fatalf("final = %v, %v; want the answer hi", final, err)
	}
}

// Headers longer than the default client's connection buffers pass whole both ways: a
// configured request header of 2 KiB reaches the provider, and an answer whose headers take
// 4 KiB is read, streamed or not.
func TestLongHeadersPassTheConnectionBuffers(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 128) // 2 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-Long"); got != long {
			http.Error(w, fmt.Sprintf(`{"error":{"message":"X-Long has %d bytes, want %d"}}`, len(got), len(long)), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Long-1", long)
		w.Header().Set("X-Long-2", long)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	client := serveProviders(t, map[string]generation.Provider{
		"openai": generation.NewOpenAI(generation.OpenAIOptions{Name: "openai", BaseURL: srv.URL + "/v1", APIKey: testAPIKey, Headers: map[string]string{"X-Long": long}}),
	})
	resp, err := client.Generate(t.Context(), request("openai", "m", user("hi")))
	if err != nil || resp.GetContent() != "hi" {
		t.Fatalf("answer = %q, %v", resp.GetContent(), err)
	}
	if _, final, err := streamAll(t, client, request("openai", "m", user("hi"))); err != nil || final.GetContent() != "hi" {
		t.Fatalf("streamed answer = %q, %v", final.GetContent(), err)
	}
}
