package meshproc_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
)

// post calls the tool as the action stage would, with key in place of ${parameters.key}.
func post(t *testing.T, tools *meshproc.ToolServer, key string) (string, error) {
	t.Helper()
	url := strings.Replace(tools.Tool("").URL, "${parameters.key}", key, 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestToolServerCountsEachKey(t *testing.T) {
	tools := meshproc.NewToolServer(t)
	for _, step := range []struct {
		key     string
		request int
	}{{"x", 1}, {"y", 1}, {"x", 2}} {
		body, err := post(t, tools, step.key)
		if err != nil {
			t.Fatal(err)
		}
		if want := meshproc.Answer(step.key, step.request); body != want {
			t.Errorf("request %d of %s answered %q, want %q", step.request, step.key, body, want)
		}
	}
	if tools.Count("x") != 2 || tools.Count("y") != 1 || tools.Count("z") != 0 {
		t.Errorf("counts x=%d y=%d z=%d, want 2 1 0", tools.Count("x"), tools.Count("y"), tools.Count("z"))
	}
	if rt := tools.Tool("d"); rt.Method != http.MethodPost || rt.Description != "d" || !strings.HasSuffix(rt.URL, "/calls/${parameters.key}") {
		t.Errorf("tool configuration %+v", rt)
	}
}

// TestToolServerHoldsTheNextRequest: a held request is counted when it arrives, answered only
// once released, and the next request of the key is not held.
func TestToolServerHoldsTheNextRequest(t *testing.T) {
	tools := meshproc.NewToolServer(t)
	hold := tools.Hold("k")
	answered := make(chan string, 1)
	go func() {
		body, _ := post(t, tools, "k")
		answered <- body
	}()
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the held request never arrived")
	}
	if n := tools.Count("k"); n != 1 {
		t.Errorf("count while held = %d, want 1", n)
	}
	if body, err := post(t, tools, "k"); err != nil || body != meshproc.Answer("k", 2) {
		t.Errorf("the next request answered %q, %v; want it answered at once", body, err)
	}
	select {
	case body := <-answered:
		t.Fatalf("the held request was answered %q before its release", body)
	default:
	}
	hold.Release()
	hold.Release()
	if body := <-answered; body != meshproc.Answer("k", 1) {
		t.Errorf("the released request answered %q", body)
	}
}
