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
	ran := runInBackground(ctx, h, &agentv1.RunRequest{RunId: "action-drain-in-the-mesh", Message: "post the note slowly"})
	select {
	case <-arrived:
	case r := <-ran:
		t.Fatalf("the run ended before its tool ran: %v, %v", r.res, r.err)
	}
	// The call in flight outlives the drain every other service gets.
	r, stopped := stopOutlivingDrain(ctx, t, h, mesh.Action, "a tool call", ran, releaseOnce)
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
	ran := runInBackground(ctx, h, &agentv1.RunRequest{RunId: "intent-drain-in-the-mesh", Message: message})
	asked := func() int { return len(requestsAbout(h, intent.ModelInputPrefix+message)) }
	if !eventually(t, 30*time.Second, func() bool { return asked() > 0 }) {
		t.Fatal("the intent model was never asked")
	}
	// The answer in flight outlives the drain of a stage without a model.
	r, stopped := stopOutlivingDrain(ctx, t, h, mesh.Intent, "its model's answer", ran, releaseOnce)
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

// runResult is what a run started in the background (runInBackground) returned.
type runResult struct {
	res *typev1.RunResult
	err error
}

// runInBackground starts req on h's public API and returns where its result arrives.
func runInBackground(ctx context.Context, h *harness, req *agentv1.RunRequest) <-chan runResult {
	ran := make(chan runResult, 1)
	go func() {
		res, err := h.client.Run(ctx, req)
		ran <- runResult{res, err}
	}()
	return ran
}

// stopOutlivingDrain stops stage (Stop) while the run in ran waits on what the stage holds in
// flight, fails the test if the stage stops or the run ends within the drain of a stage
// without a model or a tool (server.DefaultDrainTimeout and 2 s), then releases what is held
// and returns the run's result, and a channel closed once the stage has stopped.
func stopOutlivingDrain(ctx context.Context, t *testing.T, h *harness, stage, inFlight string,
	ran <-chan runResult, release func()) (runResult, <-chan struct{}) {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := h.mesh.Stop(t.Context(), stage); err != nil {
			t.Error(err)
		}
	}()
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	select {
	case <-stopped:
		t.Fatalf("the %s stage stopped within %s, with %s in flight", stage, outlives, inFlight)
	case r := <-ran:
		t.Fatalf("the run ended while %s was held: %v, %v", inFlight, r.res, r.err)
	case <-past.C:
	}
	release()
	var r runResult
	select {
	case r = <-ran:
	case <-ctx.Done():
		t.Fatalf("the run did not end once %s was released", inFlight)
	}
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	return r, stopped
}
