package generation

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"
)

// TestAStreamingAnswerDoesNotHoldItsRequest: once a provider's response is in, the request's
// encoded body (the conversation, the tools' schemas) is released, over HTTP/1.1 and HTTP/2: a
// run whose answer is streaming does not hold it in the generation stage for as long as the
// model writes. The provider got the whole body.
func TestAStreamingAnswerDoesNotHoldItsRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		http2 bool
	}{{"http1", false}, {"http2", true}} {
		t.Run(tc.name, func(t *testing.T) {
			release, got := make(chan struct{}), make(chan string, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- string(b)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, ": the answer starts\n\n")
				w.(http.Flusher).Flush()
				select { // the model still writing
				case <-release:
				case <-r.Context().Done():
				}
			}))
			start(srv, tc.http2)
			defer srv.Close()
			defer close(release) // before Close, which waits for the handler

			e := newEndpoint(endpointOptions{name: "test", baseURL: srv.URL, httpClient: srv.Client()})
			data := longRequest()
			want, held := string(data), weak.Make(&data[0])
			resp, err := e.send(t.Context(), "/chat/completions", data, true)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if body := <-got; body != want {
				t.Fatalf("the provider got %d bytes, want the %d sent", len(body), len(want))
			}
			if tc.http2 != (resp.ProtoMajor == 2) {
				t.Fatalf("the response came over %s", resp.Proto)
			}
			deadline := time.Now().Add(10 * time.Second)
			for held.Value() != nil {
				if time.Now().After(deadline) {
					t.Fatal("the request's body was still held 10 s into the streamed answer")
				}
				runtime.GC()
			}
			runtime.KeepAlive(resp)
		})
	}
}

// TestRequestBodyReadsEachAttemptWhole: every attempt reads the whole body, until it is
// released; then an attempt gets an error reading it rather than an empty body.
func TestRequestBodyReadsEachAttemptWhole(t *testing.T) {
	b := &requestBody{data: []byte("the request")}
	for range 2 {
		r, err := b.reader()
		if err != nil {
			t.Fatal(err)
		}
		if n := r.(interface{ Len() int }).Len(); n != len("the request") {
			t.Errorf("Len %d, want %d", n, len("the request"))
		}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != "the request" {
			t.Errorf("read %q, %v; want the whole body", got, err)
		}
	}
	b.release()
	r, err := b.reader()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); !errors.Is(err, errBodyReleased) {
		t.Errorf("a released body was read again: %q, %v", got, err)
	}
}

// TestAPlainHTTPRequestIsReleasedOnceSent: over plain HTTP (HTTP/1.1, a local model server),
// the request's encoded body is released as soon as it is written, while the run still waits
// for the answer's headers; over HTTPS (HTTP/2, a hosted provider) it is kept until they come,
// since the transport resends a request whose stream the server refused.
func TestAPlainHTTPRequestIsReleasedOnceSent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		http2    bool
		released bool
	}{{"http1", false, true}, {"http2", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			answer, got := make(chan struct{}), make(chan string, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- string(b)
				select { // the model thinking: no headers yet
				case <-answer:
				case <-r.Context().Done():
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{}`)
			}))
			start(srv, tc.http2)
			defer srv.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel() // before Close, which waits for the handler

			e := newEndpoint(endpointOptions{name: "test", baseURL: srv.URL, httpClient: srv.Client()})
			data := longRequest()
			want, held := string(data), weak.Make(&data[0])
			sent := make(chan error, 1)
			go func() {
				resp, err := e.send(ctx, "/chat/completions", data, false)
				if err == nil {
					err = resp.Body.Close()
				}
				sent <- err
			}()
			if body := <-got; body != want {
				t.Fatalf("the provider got %d bytes, want the %d sent", len(body), len(want))
			}
			if tc.released {
				deadline := time.Now().Add(10 * time.Second)
				for held.Value() != nil {
					if time.Now().After(deadline) {
						t.Fatal("the request's body was still held 10 s after the provider read it")
					}
					runtime.GC()
				}
			} else {
				runtime.GC()
				runtime.GC()
				if held.Value() == nil {
					t.Fatal("the request's body was released before the response came in: a refused stream could not be resent")
				}
			}
			close(answer)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// start starts srv over HTTP/2 and TLS, as a hosted provider serves, or over plain HTTP/1.1, as
// a local model server does.
func start(srv *httptest.Server, http2 bool) {
	if http2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		return
	}
	srv.Start()
}

// longRequest is the JSON of a chat request with a conversation of some 10 KB.
func longRequest() []byte {
	return []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("a long conversation ", 500) + `"}]}`)
}
