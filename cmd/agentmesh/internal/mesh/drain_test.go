package mesh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// TestStoppedActionStageFinishesItsCalls: the mesh's action stage, stopped (Stop; Close, as
// Ctrl-C on `agentmesh dev`, drains it the same way) while a tool call runs, lets the call
// finish as the action binary does (action.DrainTimeout), here past the drain every other
// service gets (server.DefaultDrainTimeout): the run is told the tool's answer, and the tool
// ran once.
func TestStoppedActionStageFinishesItsCalls(t *testing.T) {
	var posts atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	notes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if posts.Add(1) == 1 {
			close(arrived)
		}
		<-release
		_, _ = w.Write([]byte("posted"))
	}))
	t.Cleanup(notes.Close)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before notes.Close, which waits for the held request
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"post_note": {Description: "Posts a note.", URL: notes.URL}}
	const answer = "Posted while the action stage stopped."
	h := start(t, cfg, llmtest.Scenario{Name: "drain", Match: "post the note slowly", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "post_note", Arguments: `{}`}}}, text(answer),
	}})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type result struct {
		res *typev1.RunResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := h.client.Run(ctx, &agentv1.RunRequest{RunId: "action-drain-in-the-mesh", Message: "post the note slowly"})
		ran <- result{res, err}
	}()
	select {
	case <-arrived:
	case r := <-ran:
		t.Fatalf("the run ended before its tool ran: %v, %v", r.res, r.err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := h.mesh.Stop(t.Context(), mesh.Action); err != nil {
			t.Error(err)
		}
	}()

	// The call in flight outlives the drain every other service gets.
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	select {
	case <-stopped:
		t.Fatalf("the action stage stopped within %s, with a tool call in flight", outlives)
	case r := <-ran:
		t.Fatalf("the run ended while its tool call was held: %v, %v", r.res, r.err)
	case <-past.C:
	}
	releaseOnce()
	var r result
	select {
	case r = <-ran:
	case <-ctx.Done():
		t.Fatal("the run did not end once its tool answered")
	}
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if !r.res.GetSuccess() || r.res.GetFinalReport().GetContent() != answer {
		t.Errorf("the run ended %s %q: %v, want a success answering %q", r.res.GetOutcome(), r.res.GetFinalReport().GetContent(), r.res.GetError(), answer)
	}
	if got := toolMessage(t, r.res, 0); got != "posted" {
		t.Errorf("the run was told %q of its tool call, want its answer %q", got, "posted")
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the action stage did not stop once its call was done")
	}
}
