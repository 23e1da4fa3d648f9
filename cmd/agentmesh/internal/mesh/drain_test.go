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
	"github.com/agentmesh/agentmesh/services/intent"
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

// TestStoppedIntentStageFinishesItsParses: the mesh's intent stage with a model of its own
// (models.intent), stopped (Stop) while the model reads the run's message, lets the answer
// finish as the intent binary does (intent.DrainTimeout), here past the drain of a stage
// without a model (server.DefaultDrainTimeout): the run is accounted the intent model's
// request, and the model was asked once.
func TestStoppedIntentStageFinishesItsParses(t *testing.T) {
	const message = "read the message slowly"
	hold := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(releaseOnce)
	parse := submitIntent(`{"goal": "` + message + `", "constraints": [], ` +
		`"task_type": "question", "needs_clarification": false, "unsafe": false}`)
	parse.Hold = hold
	const answer = "Read while the intent stage stopped."
	h := startWith(t, nil, intentModel, intentScenario(message, parse),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{text(answer)}})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type result struct {
		res *typev1.RunResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := h.client.Run(ctx, &agentv1.RunRequest{RunId: "intent-drain-in-the-mesh",
			Message: message})
		ran <- result{res, err}
	}()
	asked := func() int { return len(requestsAbout(h, intent.ModelInputPrefix+message)) }
	if !eventually(t, 30*time.Second, func() bool { return asked() > 0 }) {
		t.Fatal("the intent model was never asked")
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := h.mesh.Stop(t.Context(), mesh.Intent); err != nil {
			t.Error(err)
		}
	}()

	// The answer in flight outlives the drain of a stage without a model.
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	select {
	case <-stopped:
		t.Fatalf("the intent stage stopped within %s, with its model's answer in flight", outlives)
	case r := <-ran:
		t.Fatalf("the run ended while its intent was held: %v, %v", r.res, r.err)
	case <-past.C:
	}
	releaseOnce()
	var r result
	select {
	case r = <-ran:
	case <-ctx.Done():
		t.Fatal("the run did not end once the intent model answered")
	}
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if !r.res.GetSuccess() || r.res.GetFinalReport().GetContent() != answer {
		t.Errorf("the run ended %s %q: %v, want a success answering %q", r.res.GetOutcome(),
			r.res.GetFinalReport().GetContent(), r.res.GetError(), answer)
	}
	var accounted bool
	for _, e := range r.res.GetAccounting() {
		accounted = accounted || e.GetStage() == "intent" && e.GetModel() == "intent-model"
	}
	if !accounted {
		t.Errorf("accounting %v, want the intent model's request", r.res.GetAccounting())
	}
	if n := asked(); n != 1 {
		t.Errorf("the intent model was asked %d times, want once", n)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the intent stage did not stop once its call was done")
	}
}
